#!/bin/sh
# SPDX-License-Identifier: MIT
# Install the Debian packages the build, the tests and the benchmarks need, when missing.
# Runs as root, or through sudo; does nothing when everything is there already.
#
#   sh tools/deps.sh [deb] [container]
#
# The extra sets are wanted only by the targets that build or boot the Debian package
# (make deb, make check-systemd and the tests that call them), not by a plain build.
set -e
pkgs="build-essential pkg-config libhiredis-dev libcjson-dev libconfig-dev libsystemd-dev
      libmicrohttpd-dev check redis-server redis-sentinel redis-tools python3
      python3-redis procps valgrind gnuplot-nox man-db systemd python3-prometheus-client cppcheck
      tmux"
for set in "$@"; do
	case $set in
	# dpkg-buildpackage and debhelper build the package (its other Build-Depends are
	# above), lintian checks it.
	deb) pkgs="$pkgs dpkg-dev debhelper lintian" ;;
	# A Debian tree to boot (debootstrap) and the container that boots it (systemd-nspawn).
	container) pkgs="$pkgs debootstrap systemd-container" ;;
	*) echo "deps: unknown set $set (deb, container)" >&2; exit 2 ;;
	esac
done
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends $missing
# The packaged redis-server and redis-sentinel services are not ours: tests start private ones.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	$sudo systemctl disable --now redis-server redis-sentinel >/dev/null 2>&1 || true
fi
