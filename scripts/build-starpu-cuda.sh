#!/bin/bash
# build-starpu-cuda.sh [PREFIX]
#
# Build StarPU 1.3.10 *with CUDA* from Debian's own source package
# (`apt-get source starpu`; Debian's libstarpu-dev is built without CUDA)
# and install it into PREFIX (default: $PWD/_deps/starpu-cuda).
#
# Then configure tfc-starpu with
#   PKG_CONFIG_PATH=PREFIX/lib/pkgconfig ./configure --enable-cuda=yes --enable-mpi=no
#   (--enable-mpi=no: this StarPU has no MPI, and mixing it with Debian's starpumpi-1.3 headers fails)
# and run programs with LD_LIBRARY_PATH=PREFIX/lib.
#
# - Patches StarPU for CUDA 13 (scripts/starpu-1.3.10-cuda13.patch).
# - Idempotent: exits at once if PREFIX already holds a CUDA-enabled StarPU
#   (FORCE=1 rebuilds).
# - Needs root for apt-get (adds a deb-src entry if none, installs build deps).
# - Sources and build tree go to PREFIX-build (a sibling of PREFIX), or $WORKDIR.
# - Works without a GPU: the final smoke test starts StarPU on CPU workers.
#
# Environment: CUDA_HOME (default /usr/local/cuda), JOBS (default 2),
#              WORKDIR, FORCE=1, KEEP_BUILD=1 (keep the build tree).

set -euo pipefail

STARPU_VERSION=1.3.10
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PATCH_FILE=$SCRIPT_DIR/starpu-$STARPU_VERSION-cuda13.patch
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
JOBS=${JOBS:-2}

msg()  { printf '==> [build-starpu-cuda] %s\n' "$*"; }
die()  { printf '\n*** [build-starpu-cuda] ERROR: %s\n' "$*" >&2; exit 1; }
trap 'rc=$?; [ $rc -ne 0 ] && printf "*** [build-starpu-cuda] FAILED (exit %s) at line %s: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2' ERR

PREFIX=${1:-$PWD/_deps/starpu-cuda}
case $PREFIX in /*) ;; *) PREFIX=$PWD/$PREFIX ;; esac
PREFIX=${PREFIX%/}
WORKDIR=${WORKDIR:-$PREFIX-build}
PC=$PREFIX/lib/pkgconfig/starpu-1.3.pc
CONFIG_H=$PREFIX/include/starpu/1.3/starpu_config.h

has_cuda_starpu() {
    [ -f "$PC" ] && [ -f "$CONFIG_H" ] &&
    grep -q '^#define STARPU_USE_CUDA 1' "$CONFIG_H" &&
    ls "$PREFIX"/lib/libstarpu-1.3.so* >/dev/null 2>&1
}

# ---------------------------------------------------------------- smoke test
smoke_test() {
    msg "smoke test: starpu_init/starpu_shutdown against $PC"
    local t=$WORKDIR/smoke
    mkdir -p "$t"
    cat > "$t/smoke.c" <<'EOF'
#include <stdio.h>
#include <starpu.h>
int main(void)
{
#ifndef STARPU_USE_CUDA
#error "STARPU_USE_CUDA is not defined: this StarPU was built without CUDA"
#endif
	int ret = starpu_init(NULL);
	if (ret != 0) { fprintf(stderr, "starpu_init failed: %d\n", ret); return 1; }
	printf("cpu workers: %u\ncuda workers: %u\n",
	       starpu_cpu_worker_get_count(), starpu_cuda_worker_get_count());
	starpu_shutdown();
	return 0;
}
EOF
    # shellcheck disable=SC2046
    cc -o "$t/smoke" "$t/smoke.c" \
        $(PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig pkg-config --cflags --libs starpu-1.3) \
        || die "cannot compile/link the smoke test against $PC"
    # STARPU_HOME: keep StarPU's calibration files out of $HOME.
    LD_LIBRARY_PATH=$PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        STARPU_HOME=$t STARPU_SILENT=1 "$t/smoke" \
        || die "smoke test failed to run (starpu_init/starpu_shutdown)"
    msg "smoke test OK (no GPU here means 0 CUDA workers; that is expected)"
}

if [ "${FORCE:-0}" != 1 ] && has_cuda_starpu; then
    msg "CUDA-enabled StarPU already installed in $PREFIX (FORCE=1 to rebuild); nothing to do"
    exit 0
fi

start=$(date +%s)
msg "building StarPU $STARPU_VERSION with CUDA into $PREFIX (work dir $WORKDIR)"

# ---------------------------------------------------------------- prerequisites
[ -x "$CUDA_HOME/bin/nvcc" ] || command -v nvcc >/dev/null 2>&1 \
    || die "nvcc not found (CUDA_HOME=$CUDA_HOME); install the CUDA toolkit or set CUDA_HOME"
[ -f "$CUDA_HOME/include/cuda.h" ] || die "$CUDA_HOME/include/cuda.h not found; set CUDA_HOME"
[ -f "$PATCH_FILE" ] || die "patch file $PATCH_FILE is missing"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script needs Debian/Ubuntu"

SUDO=
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "must run as root (or have sudo) for apt-get"
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive

ensure_deb_src() {
    if apt-cache showsrc starpu 2>/dev/null | grep -q '^Package: starpu$'; then
        return 0
    fi
    local d=/etc/apt/sources.list.d
    if ! grep -rqs '^Types:.*deb-src' $d/*.sources && ! grep -rqs '^deb-src ' /etc/apt/sources.list $d/*.list; then
        msg "no deb-src entries found; adding $d/debian-src.sources"
        if [ -f $d/debian.sources ]; then
            # mirror the existing deb entries (same URIs/suites/components)
            sed 's/^Types:.*/Types: deb-src/' $d/debian.sources | $SUDO tee $d/debian-src.sources >/dev/null
        elif grep -qs '^deb .*debian' /etc/apt/sources.list; then
            sed -n 's/^deb \(.*debian.*\)$/deb-src \1/p' /etc/apt/sources.list \
                | $SUDO tee $d/debian-src.list >/dev/null
        else
            local codename
            codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
            printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
                "$codename" "$codename" | $SUDO tee $d/debian-src.sources >/dev/null
        fi
    fi
    msg "apt-get update (source indexes)"
    $SUDO apt-get update -qq || die "apt-get update failed"
    apt-cache showsrc starpu 2>/dev/null | grep -q '^Package: starpu$' \
        || die "source package 'starpu' still unknown to apt after adding deb-src entries"
}

install_build_deps() {
    local want="dpkg-dev build-essential pkg-config libhwloc-dev patch" missing="" p
    for p in $want; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        msg "installing build dependencies:$missing"
        $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null \
            || die "apt-get install$missing failed"
    fi
}

ensure_deb_src
install_build_deps

# ---------------------------------------------------------------- source
SRC_PARENT=$WORKDIR/src
rm -rf "$SRC_PARENT"
mkdir -p "$SRC_PARENT"
msg "apt-get source starpu (into $SRC_PARENT)"
(cd "$SRC_PARENT" && apt-get source -qq starpu >"$SRC_PARENT/apt-source.log" 2>&1) \
    || { cat "$SRC_PARENT/apt-source.log" >&2; die "apt-get source starpu failed"; }
SRC=$(find "$SRC_PARENT" -mindepth 1 -maxdepth 1 -type d -name "starpu-$STARPU_VERSION*" | head -n 1)
[ -n "$SRC" ] && [ -x "$SRC/configure" ] \
    || die "expected starpu-$STARPU_VERSION* in $SRC_PARENT; got: $(ls "$SRC_PARENT")"
msg "source: $SRC"

msg "applying $(basename "$PATCH_FILE")"
(cd "$SRC" && patch -p1 --forward --batch --dry-run -s < "$PATCH_FILE" >/dev/null) \
    || die "$PATCH_FILE does not apply to $SRC (StarPU source changed?)"
(cd "$SRC" && patch -p1 --forward --batch -s < "$PATCH_FILE")
# belt and braces: nothing CUDA 13 rejects must be left
if grep -nE 'computeMode *==|cublasInit|cublasShutdown|cublasSetKernelStream|#include <cublas\.h>' \
        "$SRC"/src/drivers/cuda/*.[ch]; then
    die "CUDA 13 patch incomplete (see lines above)"
fi

# ---------------------------------------------------------------- build
BUILD=$WORKDIR/build
rm -rf "$BUILD"
mkdir -p "$BUILD"
cd "$BUILD"
msg "configure (log: $BUILD/configure.log)"
# --disable-fxt is not an option of 1.3.10: FxT is off unless --with-fxt.
# (Do not pass --disable-sc-hypervisor: 1.3.10 treats it as --enable.)
CFLAGS=${CFLAGS:--O2 -g -Wno-deprecated-declarations} \
"$SRC/configure" \
    --prefix="$PREFIX" \
    --enable-cuda --with-cuda-dir="$CUDA_HOME" \
    --enable-maxcpus=64 \
    --disable-build-doc --disable-build-examples --disable-build-tests \
    --disable-fortran --disable-mpi --disable-opencl --disable-socl \
    --disable-starpufft --disable-glpk \
    >configure.log 2>&1 \
    || { tail -n 30 configure.log >&2; die "StarPU configure failed (see $BUILD/configure.log)"; }
grep -q '^#define STARPU_USE_CUDA 1' include/starpu_config.h \
    || { grep -n 'CUDA' configure.log | tail -n 20 >&2; die "StarPU configure did not enable CUDA"; }

msg "make -j$JOBS (log: $BUILD/make.log)"
make -j"$JOBS" >make.log 2>&1 \
    || { grep -nE 'error|Error' make.log | tail -n 30 >&2; die "StarPU build failed (see $BUILD/make.log)"; }
msg "make install"
make install >install.log 2>&1 \
    || { tail -n 30 install.log >&2; die "StarPU install failed (see $BUILD/install.log)"; }

# StarPU's .pc adds -I<cuda>/include, and starpu.h pulls in cusparse.h, whose
# CUDA 13 version spews hundreds of -Wdeprecated-declarations warnings into
# every file that includes starpu.h.  Make it a system include dir instead.
for f in "$PREFIX"/lib/pkgconfig/*.pc; do
    sed -i "s#-I$CUDA_HOME/include\( \|\$\)#-isystem $CUDA_HOME/include\1#g" "$f"
done

# ---------------------------------------------------------------- checks
has_cuda_starpu || die "installed StarPU in $PREFIX is missing STARPU_USE_CUDA / libstarpu-1.3.so / starpu-1.3.pc"
msg "OK: $CONFIG_H defines STARPU_USE_CUDA"
smoke_test

if [ "${KEEP_BUILD:-0}" != 1 ]; then
    rm -rf "$BUILD" "$SRC_PARENT" "$WORKDIR/smoke"
    rmdir "$WORKDIR" 2>/dev/null || true
fi
msg "done in $(( $(date +%s) - start ))s: StarPU $STARPU_VERSION + CUDA in $PREFIX"
msg "use: PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig  LD_LIBRARY_PATH=$PREFIX/lib"
