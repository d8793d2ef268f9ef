#!/bin/bash
# build.sh DIR [configure options...]: bootstraps (when needed), configures into DIR and builds.
# Safe to run again: reuses DIR and only rebuilds what changed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: build.sh DIR [configure options]}
shift
cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
    echo "==> autoreconf"
    autoreconf -fi
fi
mkdir -p "$dir"
cd "$dir"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ] || [ "$*" != "$(cat .tfc-configure-args 2>/dev/null)" ]; then
    echo "==> configure $*"
    "$top/configure" "$@"
    echo "$*" > .tfc-configure-args
fi
echo "==> make in $dir"
make -j"$(nproc)"
