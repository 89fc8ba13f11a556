#!/bin/sh
# SPDX-License-Identifier: MIT
# Static checks of src/ that the compiler does not make (make lint, before make check):
#   graph     tools/include-graph.py: no cycle between components, by include or by link
#             (needs the objects of BUILD, so make lint builds first)
#   cppcheck  cppcheck's warning, style and performance checks; a finding that is wrong
#             is silenced where it stands, /* cppcheck-suppress ID ; why */, never globally
#   keys      tools/key-literals.py: key names spelled in src/keys.h only
# Every check runs even when an earlier one failed, so one run lists everything to fix; each
# prints its findings and a line naming it, and the last line names the checks that failed.
#
# Usage: tools/lint.sh [-s SRC] [-b BUILD] [CHECK...]   (default: src, build, all checks)
set -u
src=src
build=build
while getopts s:b: o; do
	case $o in
	s) src=$OPTARG ;;
	b) build=$OPTARG ;;
	*) echo "usage: $0 [-s SRC] [-b BUILD] [graph|cppcheck|keys]..." >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- graph cppcheck keys
tools=$(dirname "$0")

# std c11 and _GNU_SOURCE: the one configuration the Makefile builds (cppcheck would
# otherwise try every #ifdef combination); system headers are not given to it, so it does
# not report them missing.
run_cppcheck() {
	out=$(cppcheck --enable=warning,style,performance --error-exitcode=1 --inline-suppr \
	    --suppress=missingIncludeSystem --std=c11 -D_GNU_SOURCE -I"$src" -q \
	    --template='{file}:{line}: {severity}: {id}: {message}' "$src" 2>&1)
	rc=$?
	[ -n "$out" ] && printf '%s\n' "$out"
	if [ $rc -ne 0 ]; then
		echo "cppcheck: FAILED: $(printf '%s\n' "$out" | grep -c ': .*: .*: ') finding(s) in $src"
		return 1
	fi
	echo "cppcheck: ok"
}

failed=""
for check; do
	case $check in
	graph) python3 "$tools/include-graph.py" --src "$src" --build "$build" ;;
	cppcheck) run_cppcheck ;;
	keys) python3 "$tools/key-literals.py" --src "$src" ;;
	*) echo "lint: unknown check $check" >&2; exit 2 ;;
	esac
	[ $? -eq 0 ] || failed="$failed $check"
done
if [ -n "$failed" ]; then
	echo "lint: FAILED:$failed"
	exit 1
fi
echo "lint: ok"
