#!/bin/bash
# device-pack.sh BUILD_DIR [OUT_DIR]: packs what a GPU device machine needs to run the CUDA
# checks (scripts/device-check.sh) into OUT_DIR (default .devcarry, which .git/info/exclude
# should ignore): the test and benchmark programs of a CUDA build (stripped), the shared
# libraries they load from this Debian system (StarPU built with CUDA, hwloc, OpenBLAS, ...;
# NOT the CUDA libraries, which the device machine has), xz-compressed into payload.tar.xz,
# and the Fashion-MNIST files for the training benchmark. The device machine has CUDA but no
# StarPU, no Debian packages and no network; the whole carried tree must stay under 64 MiB.
#
#   scripts/build-starpu-cuda.sh
#   PKG_CONFIG_PATH=$PWD/_deps/starpu-cuda/lib/pkgconfig scripts/build.sh build-gpu \
#       --enable-cuda=yes --with-cuda-arch=sm_90
#   make -C build-gpu check TESTS= && make -C build-gpu bench
#   scripts/device-pack.sh build-gpu
set -euo pipefail
build=$(cd "${1:?usage: device-pack.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-.devcarry}
stage=$(mktemp -d /tmp/devpack.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$out"

progs="tests/test_ops tests/test_grad tests/test_optim tests/test_train tests/test_session
       tests/test_sched tests/test_report tests/test_plan tests/test_graph tests/test_value
       tests/test_errors tests/test_env bench/mlp_step bench/overhead bench/priority
       examples/mnist_mlp"
for extra in bench/tiled_matmul bench/cnn_step tests/test_passes tests/test_tiling tests/test_conv_cudnn \
             tests/test_control_flow tests/test_layers tests/test_cflow_grad tests/test_rnn; do
    [ -x "$build/$extra" ] && progs="$progs $extra"
done
for p in $progs; do
    [ -x "$build/$p" ] || { echo "device-pack: $build/$p is missing (build it first)" >&2; exit 1; }
    # libtool wrappers: the real program is in .libs
    src=$build/$p
    [ -x "$build/$(dirname "$p")/.libs/$(basename "$p")" ] && src=$build/$(dirname "$p")/.libs/$(basename "$p")
    strip -o "$stage/bin/$(basename "$p")" "$src"
done

# Every shared library the programs load, except the C runtime and CUDA's own.
for f in "$stage"/bin/*; do ldd "$f"; done | awk '/=> \// {print $3}' | sort -u |
while read -r lib; do
    case $(basename "$lib") in
        libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
        libcuda*|libcublas*|libcudnn*|libcusparse*|libnvJitLink*|libcurand*|libnvrtc*) ;;
        *) strip -o "$stage/lib/$(basename "$lib")" "$(readlink -f "$lib")" ;;
    esac
done
tar -C "$stage" -cJf "$out/payload.tar.xz" bin lib
mkdir -p "$out/fashion-mnist"
cp -u /usr/share/datasets/fashion-mnist/*.gz "$out/fashion-mnist/"
du -sh "$out"/payload.tar.xz "$out"/fashion-mnist
