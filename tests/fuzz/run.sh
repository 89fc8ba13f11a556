#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/fuzz/run.sh DIR SECONDS TARGET...: run each harness DIR/fuzz_TARGET for SECONDS
# from its seed corpus, one after the other, and say how many executions each made. New
# inputs go to DIR/corpus/TARGET (the seeds in the repo stay as they are), a crash to
# DIR/crash-TARGET-*; the exit status is 1 when any harness found one.
#   FUZZ_ARGS="-jobs=2 -workers=2" adds libFuzzer options (e.g. -runs=10000000).
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
	echo "== fuzz_$t: ${seconds}s (log: $log)"
	# shellcheck disable=SC2086
	"$dir/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 -max_len=65536 \
	    -timeout=30 -rss_limit_mb=2048 -artifact_prefix="$dir/crash-$t-" $dict \
	    ${FUZZ_ARGS:-} "$dir/corpus/$t" "$here/corpus/$t" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	line="fuzz_$t: ${execs:-?} executions in ${seconds}s"
	if [ $rc -ne 0 ]; then
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
