#!/bin/sh
# SPDX-License-Identifier: MIT
#
# example-warm.sh: a warm handler in POSIX sh, speaking cogworkerd's warm protocol
# (version 1, doc/protocol.md §1.2, handlers/README.md) by hand on fd 3. An example to copy
# from, not a library: it shows the whole protocol in a few lines. Conf:
#
#     { class = "Greet"; command = ["/usr/share/cogworkerd/handlers/sh/example-warm.sh"];
#       warm = true; }
#
# Per job it greets the job's first arg and reports progress. What it does not do, and a
# handler in a real language does with the libraries beside this one:
# - JSON: it finds "jid" and the first string arg with sed, which is enough for this
#   example's jobs and no more (a string arg holding a quote, or a "jid" key inside the
#   args, would fool it);
# - cancel: it does not read fd 3 while a job runs, so a cancel is honoured by the daemon,
#   which kills the process group kill_grace seconds after sending it (a line read after
#   the job, a cancel that crossed our `done`, is skipped).
set -u

if [ "${COGWORKER_PROTOCOL:-}" != 1 ]; then
	echo "example-warm.sh: COGWORKER_PROTOCOL is '${COGWORKER_PROTOCOL:-}', not 1:" \
		"run me from cogworkerd with warm = true" >&2
	exit 2
fi

# The warm-up: what a cold handler would do before every job is done here once
# (read a configuration, open a connection through a coprocess, ...).
greeting="hello"

send() {
	printf '%s\n' "$1" >&3
}

# One job: $1 the job message. Output to stdout and stderr is the job's; the status is
# judged as a cold handler's exit status.
work() {
	jid=$(printf '%s\n' "$1" | sed -n 's/.*"jid":"\([0-9a-zA-Z_-]*\)".*/\1/p')
	name=$(printf '%s\n' "$1" | sed -n 's/.*"args":\["\([^"\\]*\)".*/\1/p')
	[ -n "$name" ] || { echo "job $jid: the first arg is not a plain string" >&2; return 1; }
	send '{"type":"progress","pct":50,"message":"greeting"}'
	echo "$greeting, $name (job $jid, pid $$)"
}

send '{"type":"ready"}'
while IFS= read -r line <&3; do
	case $line in
	'{"type":"job",'*) ;;
	*) continue ;;
	esac
	if work "$line"; then code=0; else code=$?; fi
	send "{\"type\":\"done\",\"exit\":$code}"
done
# fd 3 closed: the daemon retires us.
exit 0
