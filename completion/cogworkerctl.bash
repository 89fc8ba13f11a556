# SPDX-License-Identifier: MIT
# bash completion for cogworkerctl(1); `make install` puts it where bash-completion looks
# ($(PREFIX)/share/bash-completion/completions/cogworkerctl). To try it from a checkout:
#   source completion/cogworkerctl.bash
#
# Commands, subcommands and options are listed here by hand, as `cogworkerctl help` names
# them (tests/integration/test_ctl_help.py checks that both say the same). Queue names
# after --queue and `queues pause|resume|clear`, identities after `processes
# quiet|resume|stop` and pjids after `periodic run|enable|disable` come from cogworkerctl
# itself (--json queues, processes, periodic), with the -c given on the command line,
# when Redis answers.

# _cogworkerctl_names CONF COMMAND FIELD: the FIELD of each element of `COMMAND --json`.
_cogworkerctl_names()
{
	cogworkerctl ${1:+-c "$1"} --json "$2" 2>/dev/null |
		tr ',' '\n' | sed -n "s/.*\"$3\":\"\\([^\"]*\\)\".*/\\1/p"
}

_cogworkerctl_queues()
{
	_cogworkerctl_names "$1" queues name
}

_cogworkerctl()
{
	local cur prev conf= cmd= sub= i
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	COMPREPLY=()
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-c|--config) conf=${COMP_WORDS[i+1]}; ((i++)) ;;
		--tls-ca-file|--tls-cert-file|--tls-key-file|--tls-server-name) ((i++)) ;;
		--set|--queue|--class|--limit|--status|--since|--in|--at|--retry|--jid|--json-args|--timeout|--run|--expires-in|--expires-at|--listen|--auth-file|--tls-cert|--tls-key)
			((i++)) ;;
		-*) ;;
		*)
			if [[ -z $cmd ]]; then cmd=${COMP_WORDS[i]}
			elif [[ -z $sub ]]; then sub=${COMP_WORDS[i]}
			fi ;;
		esac
	done

	case $prev in
	-c|--config|--auth-file|--tls-ca-file|--tls-cert-file|--tls-key-file|--tls-cert|--tls-key)
		COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--tls-server-name) return ;;
	--set) COMPREPLY=($(compgen -W "queued scheduled retry dead running waiting" -- "$cur")); return ;;
	--status) COMPREPLY=($(compgen -W "success failed" -- "$cur")); return ;;
	--retry) COMPREPLY=($(compgen -W "true false 0 1 3 5 10 25" -- "$cur")); return ;;
	--queue) COMPREPLY=($(compgen -W "$(_cogworkerctl_queues "$conf")" -- "$cur")); return ;;
	--class|--limit|--since|--in|--at|--jid|--json-args|--timeout|--run|--expires-in|--expires-at|--listen|--batch|--after|--description|--on-success|--on-complete|--on-death|--callback-args|--callback-queue|--parent|--outcome) return ;;
	esac

	local common="--json --yes --help"
	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "-c --config --tls-ca-file --tls-cert-file --tls-key-file --tls-server-name --tls-no-verify --json --yes --help --version" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "push stats queues jobs processes periodic history exec limits groups metrics top web batch help" -- "$cur"))
		fi
		return
	fi

	local words=
	case $cmd in
	help) [[ -z $sub ]] && words="push stats queues jobs processes periodic history exec limits groups metrics top web batch" ;;
	push) words="--queue --in --at --retry --unique --jid --json-args --stdin --expires-in --expires-at --batch --after --after-any $common" ;;
	batch)
		case $sub in
		'') words="new commit show list cancel settle $common" ;;
		new) words="--description --on-success --on-complete --on-death --callback-args --callback-queue --parent --expires-in $common" ;;
		settle) words="--outcome $common" ;;
		*) words=$common ;;
		esac ;;
	stats|metrics|top|limits) words=$common ;;
	groups) words="--handler $common" ;;
	queues)
		case $sub in
		'') words="list pause resume clear $common" ;;
		pause|resume|clear) words="$(_cogworkerctl_queues "$conf") $common" ;;
		*) words=$common ;;
		esac ;;
	jobs)
		case $sub in
		'') words="list show retry delete kill reschedule log cancel $common" ;;
		list) words="--set --queue --class --limit $common" ;;
		show) words="--full $common" ;;
		log) words="--run --follow $common" ;;
		cancel) words="--discard $common" ;;
		retry) words="--set --all --queue --class --expires-in $common" ;;
		delete|kill) words="--set --all --queue --class $common" ;;
		*) words=$common ;;
		esac ;;
	processes)
		case $sub in
		'') words="list quiet resume stop $common" ;;
		quiet|resume|stop) words="$(_cogworkerctl_names "$conf" processes identity) --all $common" ;;
		*) words=$common ;;
		esac ;;
	periodic)
		case $sub in
		'') words="list run enable disable $common" ;;
		run|enable|disable) words="$(_cogworkerctl_names "$conf" periodic pjid) $common" ;;
		*) words=$common ;;
		esac ;;
	history) words="--class --status --since --limit $common" ;;
	exec) words="--json-args --queue --retry --jid --timeout $common" ;;
	web)
		case $sub in
		'') words="passwd --listen --read-only --auth-file --tls-cert --tls-key --insecure-http $common" ;;
		passwd) words="--auth-file --token $common" ;;
		*) words=$common ;;
		esac ;;
	esac
	COMPREPLY=($(compgen -W "$words" -- "$cur"))
}

complete -F _cogworkerctl cogworkerctl
