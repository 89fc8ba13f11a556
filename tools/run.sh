#!/bin/sh
# `make run`: the daemon on conf/dev.conf. Unless REDIS_URL says otherwise, a private
# redis-server is started on a unix socket under build/run/ and stopped when the daemon
# exits. Push work from another terminal with the command this prints.
set -e
build=${1:-build}
dir=$(pwd)/build/run
mkdir -p "$dir"
if [ -z "$REDIS_URL" ]; then
	sock="$dir/redis.sock"
	redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --save '' \
		--appendonly no --daemonize yes --pidfile "$dir/redis.pid" \
		--logfile "$dir/redis.log" --dir "$dir"
	trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null || true' EXIT INT TERM
	i=0
	while [ ! -S "$sock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	REDIS_URL="unix://$sock"
	export REDIS_URL
	echo "run: private redis-server at $REDIS_URL"
fi
echo "run: push a job with:  REDIS_URL=$REDIS_URL $build/cogworkerctl push Echo hello world"
"$build/cogworkerd" -c conf/dev.conf
