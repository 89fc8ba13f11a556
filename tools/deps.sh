#!/bin/sh
# SPDX-License-Identifier: MIT
# Install the Debian packages a target needs, when missing. Runs as root, or through sudo;
# does nothing at all when everything is there already.
#
#   sh tools/deps.sh [SET...]      (no SET: test)
#
#   run        building and running the daemon: compiler, libraries, redis-server (make run)
#   test       run + what the tests, the static checks and the benchmarks use (make check,
#              make lint, make bench)
#   deb        run + the package tools (make deb; the package build runs the unit tests,
#              hence check)
#   container  the Debian tree and systemd-nspawn of the container tests (make check-systemd)
#
# A Redis this script did not install is never touched. Installing redis-server or
# redis-sentinel starts and enables its packaged service, which nothing here wants (make
# run and the tests start private servers): that service is stopped and disabled, and the
# output says so, only when its package was installed by this very call. A host's own
# Redis, packaged or not, running or not, is left exactly as it was.
#
# Another apt holding the lock (unattended-upgrades, a second make) is waited for, up to
# DEPS_LOCK_TIMEOUT seconds (default 600), with a message, instead of failing: apt-get
# install waits by itself (DPkg::Lock::Timeout), apt-get update does not honour that
# option for its lists lock, so it is retried here.
set -e
run_pkgs="build-essential pkg-config libhiredis-dev libcjson-dev libconfig-dev libsystemd-dev
      libmicrohttpd-dev libcrypt-dev libssl-dev redis-server redis-tools"
# chromium, chromium-driver and python3-selenium: the dashboard's tests (test_web.py) drive
# a real, headless browser. ruby and nodejs: the warm handler libraries' tests
# (test_warm_libs.py) run them under Debian's interpreters. curl: the dashboard's HTTPS is
# checked with it against the test CA. openssl: the TLS tests make
# their certificates with it.
test_pkgs="check redis-sentinel python3 python3-redis python3-prometheus-client procps
      valgrind gnuplot-nox man-db systemd cppcheck tmux chromium chromium-driver
      python3-selenium ruby nodejs openssl curl"
services="redis-server redis-sentinel"
lock_timeout=${DEPS_LOCK_TIMEOUT:-600}

[ $# -gt 0 ] || set -- test
pkgs=""
for set in "$@"; do
	case $set in
	run) pkgs="$pkgs $run_pkgs" ;;
	test) pkgs="$pkgs $run_pkgs $test_pkgs" ;;
	# dpkg-buildpackage and debhelper build the package (its other Build-Depends are in
	# the run set), lintian checks it.
	deb) pkgs="$pkgs $run_pkgs check dpkg-dev debhelper lintian" ;;
	# A Debian tree to boot (debootstrap) and the container that boots it (systemd-nspawn).
	container) pkgs="$pkgs debootstrap systemd-container" ;;
	*) echo "deps: unknown set $set (run, test, deb, container)" >&2; exit 2 ;;
	esac
done

installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

missing=""
for p in $pkgs; do
	installed "$p" || case " $missing " in *" $p "*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0
# The service packages absent before this call: the only ones whose services it may stop
# (they may come in as dependencies too, so each is looked at, not only those asked for).
absent=""
for s in $services; do
	installed "$s" || absent="$absent $s"
done

if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

apt_update() {
	waited=0
	while ! out=$($sudo apt-get update -qq 2>&1); do
		case $out in
		*"Could not get lock"*) ;;
		*) printf '%s\n' "$out" >&2; return 1 ;;
		esac
		if [ "$waited" -ge "$lock_timeout" ]; then
			printf '%s\n' "$out" >&2
			echo "deps: gave up waiting for the apt lists lock after ${waited}s" >&2
			return 1
		fi
		[ "$waited" -gt 0 ] || echo "deps: another apt is running" \
		    "($(printf '%s\n' "$out" | sed -n 's/^E: //p' | head -n 1));" \
		    "waiting for it, up to ${lock_timeout}s"
		sleep 1
		waited=$((waited + 1))
	done
	[ -z "$out" ] || printf '%s\n' "$out"
}

# Stopped and disabled with what runs the host's services: systemd when it is the init
# (sd_booted: /run/systemd/system), else the package's init script.
stop_service() {
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
		$sudo systemctl disable --now "$1.service" >/dev/null 2>&1 || true
	else
		$sudo invoke-rc.d "$1" stop >/dev/null 2>&1 || true
		$sudo update-rc.d "$1" disable >/dev/null 2>&1 || true
	fi
}

echo "deps: installing$missing"
echo "deps: (if another apt holds the dpkg lock, this waits for it, up to ${lock_timeout}s)"
apt_update
$sudo apt-get -o DPkg::Lock::Timeout="$lock_timeout" install -y -qq --no-install-recommends \
    $missing
for s in $absent; do
	installed "$s" || continue
	stop_service "$s"
	echo "deps: stopped and disabled the $s service, which this call installed" \
	    "(make run and the tests start private servers)"
done
for s in $services; do
	case " $absent " in *" $s "*) ;; *)
		installed "$s" && echo "deps: $s was installed before this call: its service is" \
		    "left as it was" ;;
	esac
done
exit 0
