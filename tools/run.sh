#!/bin/sh
# SPDX-License-Identifier: MIT
# `make run`: the daemon on conf/dev.conf (or make run CONF=FILE: sh tools/run.sh BUILD FILE), with the example handlers of conf/handlers on
# its PATH. Unless REDIS_URL says otherwise, a private redis-server is started on a unix
# socket under build/run/ and stopped when the daemon exits. Push work from another
# terminal with the command this prints.
#
# A second `make run` in the same checkout: while the first one runs, it refuses (two
# daemons each believing they own the private server would stop it under each other) and
# says how to reach the running one, and that daemons on one Redis need the same handlers. A
# redis-server left behind by a run that was killed (kill -9, a closed terminal) is
# reused and becomes this run's, so none is ever orphaned for good.
#
# Ctrl-C stops the daemon: the running jobs get the conf's shutdown_timeout to finish, a
# second Ctrl-C stops them at once, and either way those left go back to their queues. The
# private server keeps its data in build/run/ (an append-only file), so what was requeued,
# scheduled or left queued is still there for the next make run (make clean removes it).
set -e
build=${1:-build}
conf=${2:-conf/dev.conf}
top=$(pwd)
if [ ! -f "$conf" ]; then
	echo "run: no conf file $conf (make run CONF=path/to/your.conf)" >&2
	exit 2
fi
dir=$top/build/run
pidfile=/dev/null           # the daemon's pid, recorded only for a private server
mkdir -p "$dir"
PATH="$top/conf/handlers:$PATH"
export PATH

# The pid in file $1 if that process is alive and its command line mentions $2.
live_pid() {
	[ -f "$1" ] || return 1
	p=$(cat "$1" 2>/dev/null) || return 1
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "$2" || return 1
	echo "$p"
}

if [ -z "$REDIS_URL" ]; then
	sock="$dir/redis.sock"
	if other=$(live_pid "$dir/run.pid" tools/run.sh) && [ "$other" != $$ ]; then
		echo "run: make run is already running in this checkout (pid $other)." >&2
		echo "run: push jobs to it with:  REDIS_URL=unix://$sock $build/cogworkerctl push Echo hello" >&2
		echo "run: stop it with Ctrl-C in its terminal (or: kill $other) before a make run" >&2
		echo "run: of another conf: daemons on one Redis must have the same handlers, or the" >&2
		echo "run: jobs one of them has no handler for fail there as 'no handler configured'" >&2
		exit 1
	fi
	if daemon=$(live_pid "$dir/daemon.pid" cogworkerd); then
		echo "run: a daemon of an earlier make run is still running (pid $daemon);" >&2
		echo "run: stop it first (kill $daemon), then run again" >&2
		exit 1
	fi
	echo $$ >"$dir/run.pid"
	pidfile=$dir/daemon.pid
	if server=$(live_pid "$dir/redis.pid" redis-server) &&
	    redis-cli -s "$sock" ping 2>/dev/null | grep -q PONG; then
		echo "run: reusing the private redis-server (pid $server) an earlier make run left running"
		# one started before make run kept an AOF keeps one from now on
		redis-cli -s "$sock" config set appendonly yes >/dev/null
	else
		[ -n "$server" ] && kill "$server" 2>/dev/null || true
		rm -f "$sock" "$dir/redis.pid"
		redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --save '' \
			--appendonly yes --daemonize yes --pidfile "$dir/redis.pid" \
			--logfile "$dir/redis.log" --dir "$dir"
		i=0
		while [ ! -S "$sock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	fi
	# Whatever ends this script (the daemon's exit, Ctrl-C, TERM, a closed terminal)
	# stops the server it owns.
	trap 'kill "$(cat "$dir/redis.pid" 2>/dev/null)" 2>/dev/null || true; rm -f "$dir/run.pid" "$dir/daemon.pid"' EXIT
	# Ctrl-C reaches the daemon too, which stops cleanly: its exit status is then this
	# script's, so make does not report a clean stop as "Error 130".
	trap ':' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	REDIS_URL="unix://$sock"
	export REDIS_URL
	echo "run: private redis-server at $REDIS_URL"
fi
echo "run: push a job with:  REDIS_URL=$REDIS_URL $build/cogworkerctl push Echo hello world"
echo "run: and watch it with: REDIS_URL=$REDIS_URL $build/cogworkerctl jobs show JID"
drain=$(sed -n 's/^shutdown_timeout *= *\([0-9.]*\).*/\1/p' "$conf")
echo "run: Ctrl-C stops it: running jobs get ${drain:-25}s to finish (shutdown_timeout in" \
    "$conf), a second Ctrl-C stops them at once; unfinished jobs go back to their queue"
[ "$pidfile" = /dev/null ] ||
	echo "run: the private Redis keeps its data in build/run/ for the next make run"
# The daemon in the foreground (Ctrl-C reaches it), its pid recorded by the shell it
# replaces.
sh -c 'echo $$ >"$1"; shift; exec "$@"' run "$pidfile" "$build/cogworkerd" -c "$conf"
