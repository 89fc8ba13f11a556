#!/bin/sh
# SPDX-License-Identifier: MIT
# make fuzz needs clang (libFuzzer and the sanitizers come with it on Debian 12); installed
# here rather than by tools/deps.sh, since nothing else needs it.
set -e
command -v clang >/dev/null 2>&1 && exit 0
echo "fuzz: installing clang"
if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends clang
