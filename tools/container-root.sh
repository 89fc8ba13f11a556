#!/bin/sh
# SPDX-License-Identifier: MIT
# The Debian tree the systemd tests boot with systemd-nspawn (tests/integration/syskit.py):
# a minimal Debian of the host's own release with systemd as init, redis-server, and
# everything the package depends on, so that `apt-get install ./cogworkerd_….deb` inside
# needs no network (the containers get a private one, with loopback only).
#
#   sh tools/container-root.sh ROOT DEB
#
# Kept under build/ and made again only when the list of packages changes (it is written
# to ROOT/.cogworkerd-include); containers boot it with --volatile=overlay, so nothing they
# do is written into it. Packages come from the mirror the host's apt uses.
set -e
root=$1
deb=$2
[ -n "$root" ] && [ -f "$deb" ] || { echo "usage: $0 ROOT DEB" >&2; exit 2; }
sh "$(dirname "$0")/deps.sh" container
# The first alternative of each dependency, without its version.
deps=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/[[:space:]]//g')
include=$(printf '%s\n' systemd systemd-sysv dbus procps redis-server $deps | grep -v '^$' |
	sort -u | paste -sd, -)
if [ "$(cat "$root/.cogworkerd-include" 2>/dev/null)" = "$include" ]; then
	exit 0
fi
. /etc/os-release
mirror() {
	apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(TARGET_OF)' 'Identifier: Packages' |
		awk -v suite="$VERSION_CODENAME" '$2 == suite && $3 == "deb" { print $1; exit }'
}
uri=$(mirror)
if [ -z "$uri" ]; then
	apt-get update -qq
	uri=$(mirror)
fi
[ -n "$uri" ] || { echo "container-root: no $VERSION_CODENAME mirror in apt's sources" >&2; exit 1; }
# An interrupted debootstrap leaves proc and sys mounted in its target: unmount them
# before removing it.
clear() {
	awk -v p="$1/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r m; do umount -l "$m"; done
	rm -rf "$1"
}
clear "$root.new"
mkdir -p "$(dirname "$root")"
echo "container-root: debootstrap $VERSION_CODENAME into $root ($include)"
debootstrap --variant=minbase --include="$include" "$VERSION_CODENAME" "$root.new" "$uri" \
	> "$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
# The tree's own apt cache is of no use to the tests.
rm -rf "$root.new/var/cache/apt/archives/"*.deb
echo "$include" > "$root.new/.cogworkerd-include"
clear "$root"
mv "$root.new" "$root"
