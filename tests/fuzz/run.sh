#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/fuzz/run.sh DIR SECONDS TARGET...: run each harness DIR/fuzz_TARGET for SECONDS
# (0: no time limit, for a run bounded by -runs) from its seed corpus, one after the other,
# and say what each did: executions, time, exec/s, coverage (cov: edges, ft: features) and
# the size of its corpus at the end, the figures doc/hardening.md publishes. New inputs go
# to DIR/corpus/TARGET (the seeds in the repo stay as they are), a crash to
# DIR/crash-TARGET-*; the exit status is 1 when any harness found one.
#   FUZZ_ARGS="-jobs=2 -workers=2" adds libFuzzer options (e.g. -runs=10000000: `make
#   fuzz-long` is that, with no time limit, niced).
set -u
dir=$1
seconds=$2
shift 2
here=$(dirname "$0")
# Leaks of our dependencies, not ours (each one explained in the file).
LSAN_OPTIONS="suppressions=$(cd "$here" && pwd)/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export LSAN_OPTIONS
failed=""
summary=""
for t in "$@"; do
	mkdir -p "$dir/corpus/$t"
	dict=""
	[ -f "$here/$t.dict" ] && dict="-dict=$here/$t.dict"
	log="$dir/fuzz-$t.log"
	limit="${seconds}s"
	[ "$seconds" = 0 ] && limit="no time limit"
	echo "== fuzz_$t: $limit ${FUZZ_ARGS:-} (log: $log) $(date -u '+%F %T UTC')"
	start=$(date +%s)
	# shellcheck disable=SC2086
	"$dir/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 -max_len=65536 \
	    -timeout=30 -rss_limit_mb=2048 -artifact_prefix="$dir/crash-$t-" $dict \
	    ${FUZZ_ARGS:-} "$dir/corpus/$t" "$here/corpus/$t" >"$log" 2>&1
	rc=$?
	took=$(( $(date +%s) - start ))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	# The last status line: "#N DONE cov: C ft: F corp: K/Sb ... exec/s: E rss: ...".
	last=$(grep -E '^#[0-9]+[[:space:]]' "$log" | tail -n 1)
	cov=$(printf '%s' "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	ft=$(printf '%s' "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	corp=$(printf '%s' "$last" | sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p')
	rate="?"
	[ -n "$execs" ] && [ "$took" -gt 0 ] && rate=$(( execs / took ))
	line="fuzz_$t: ${execs:-?} executions in ${took}s ($rate exec/s), cov ${cov:-?}"
	line="$line ft ${ft:-?}, corpus ${corp:-?} (inputs/bytes), $(date -u +%F)"
	if [ $rc -eq 72 ]; then         # libFuzzer's -interrupted_exitcode: stopped (Ctrl-C)
		line="$line: interrupted before its end"
	elif [ $rc -ne 0 ]; then
		failed="$failed $t"
		line="$line: FOUND A CRASH (exit $rc), see $log"
		grep -E 'ERROR|CHECK failed|runtime error|Test unit written' "$log" | head -n 5
	fi
	echo "$line"
	summary="$summary$line
"
done
echo "---"
printf '%s' "$summary"
[ -z "$failed" ] || { echo "fuzz: crashes in:$failed"; exit 1; }
