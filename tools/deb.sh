#!/bin/sh
# SPDX-License-Identifier: MIT
# make deb: the Debian package, built as Debian builds one, from a copy of the source.
#
#   sh tools/deb.sh [OUT]     OUT: build/deb by default
#
# The copy (OUT/src) is the tree as a fresh checkout has it (tracked and new files, no
# build/ and no .git), so the build cannot pick up a developer's objects, and
# dpkg-buildpackage's results, which it writes next to the source directory, land in OUT:
# cogworkerd_VERSION_ARCH.deb (and its -dbgsym, .buildinfo, .changes). lintian then checks
# them; its report is OUT/lintian.txt and an error fails the build.
# DEB_BUILD_OPTIONS=nocheck skips the unit tests that the package build runs.
set -e
cd "$(dirname "$0")/.."
out=${1:-build/deb}
sh tools/deps.sh deb
rm -rf "$out/src"
mkdir -p "$out/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files -z --cached --others --exclude-standard |
		xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar -cf - --null -T - | tar -xf - -C "$out/src"
else
	tar -cf - --exclude=./build --exclude=./.git . | tar -xf - -C "$out/src"
fi
cd "$out/src"
# Build-Depends beyond what tools/deps.sh installs (none today) come from the archive.
if ! dpkg-checkbuilddeps >/dev/null 2>&1; then
	apt-get build-dep -y -qq ./
fi
version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
rm -f ../*.deb ../*.buildinfo ../*.changes
dpkg-buildpackage -us -uc -b
cd ..
# As root lintian says it should not run so, and runs: the build runs as root here anyway.
lintian --fail-on error --info --display-level '>=pedantic' \
	"cogworkerd_${version}_${arch}.changes" > lintian.txt 2>&1 || status=$?
cat lintian.txt
[ -z "$status" ] || { echo "deb: lintian found errors (above)" >&2; exit 1; }
echo "deb: $(pwd)/cogworkerd_${version}_${arch}.deb"
