# tfc_cuda.m4 -- optional CUDA (nvcc + cuBLAS + cuDNN + CUDA-enabled StarPU)
#
# TFC_CHECK_CUDA
# --------------
# Call after PKG_CHECK_MODULES([STARPU], [starpu-1.3]) (uses $STARPU_CFLAGS).
#
# Options:
#   --enable-cuda=auto|yes|no   (default: auto)
#   --with-cuda=DIR             CUDA toolkit root (default: /usr/local/cuda)
#   --with-cuda-arch=LIST       comma list of sm_NN / compute_NN / NN
#                               (default: sm_75; PTX of the last entry is embedded)
#
# CUDA is enabled when nvcc, the CUDA runtime, cuBLAS (cublas_v2.h + libcublas),
# cuDNN (cudnn.h + libcudnn) are found AND StarPU was built with CUDA
# (STARPU_USE_CUDA defined in starpu_config.h).
#   yes  -> any missing piece is fatal (AC_MSG_ERROR naming it)
#   auto -> CUDA is disabled, reason recorded in $tfc_cuda_summary
#
# Output:
#   AC_SUBST: NVCC NVCCFLAGS CUDA_CFLAGS CUDA_LIBS
#   AC_DEFINE: TFC_USE_CUDA 1 (when enabled)
#   AM_CONDITIONAL: TFC_USE_CUDA (always defined)
#   shell: tfc_cuda_summary ("yes (nvcc 13.0, arch sm_75+PTX)" / "no (reason)"),
#          tfc_use_cuda (yes|no)
#
# The user's NVCCFLAGS / CUDA_CFLAGS / CUDA_LIBS from the environment are
# appended to the computed ones.

AC_DEFUN([TFC_CHECK_CUDA],
[AC_REQUIRE([AC_PROG_CC])dnl
AC_REQUIRE([AC_PROG_SED])dnl
AC_ARG_VAR([NVCC], [CUDA compiler command])dnl
AC_ARG_VAR([NVCCFLAGS], [extra flags for the CUDA compiler])dnl

AC_ARG_ENABLE([cuda],
  [AS_HELP_STRING([--enable-cuda@<:@=auto|yes|no@:>@],
    [build the CUDA kernels (needs nvcc, cuBLAS, cuDNN and a CUDA-enabled StarPU) @<:@default=auto@:>@])],
  [tfc_enable_cuda=$enableval], [tfc_enable_cuda=auto])
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit directory @<:@default=/usr/local/cuda@:>@])],
  [tfc_cuda_dir=$withval], [tfc_cuda_dir=/usr/local/cuda])
AC_ARG_WITH([cuda-arch],
  [AS_HELP_STRING([--with-cuda-arch=LIST],
    [comma-separated GPU architectures, e.g. sm_75,sm_90 (PTX of the last one is embedded too) @<:@default=sm_75@:>@])],
  [tfc_cuda_arch=$withval], [tfc_cuda_arch=sm_75])

AS_CASE([$tfc_enable_cuda],
  [yes|no|auto], [],
  [AC_MSG_ERROR([bad value '$tfc_enable_cuda' for --enable-cuda (use auto, yes or no)])])
AS_CASE([$tfc_cuda_dir],
  [no], [tfc_enable_cuda=no],
  [yes|""], [tfc_cuda_dir=/usr/local/cuda])
AS_CASE([$tfc_cuda_arch],
  [yes|no|""], [tfc_cuda_arch=sm_75])

tfc_use_cuda=no
tfc_cuda_missing=
tfc_cuda_user_nvccflags=$NVCCFLAGS
tfc_cuda_user_cflags=$CUDA_CFLAGS
tfc_cuda_user_libs=$CUDA_LIBS
tfc_cuda_cflags=
tfc_cuda_libs=
tfc_cuda_nvccflags=
tfc_cuda_version=

AS_IF([test "x$tfc_enable_cuda" = xno], [
  tfc_cuda_summary="no (disabled by --enable-cuda=no)"
], [
  dnl ---- architecture list -> -gencode flags ----------------------------
  tfc_cuda_gencode=
  tfc_cuda_last=
  tfc_cuda_arch_bad=
  for tfc_a in `echo "$tfc_cuda_arch" | $SED 's/,/ /g'`; do
    AS_CASE([$tfc_a],
      [sm_@<:@0-9@:>@*], [tfc_n=`echo "$tfc_a" | $SED 's/^sm_//'`
        tfc_cuda_gencode="$tfc_cuda_gencode -gencode arch=compute_$tfc_n,code=sm_$tfc_n"],
      [compute_@<:@0-9@:>@*], [tfc_n=`echo "$tfc_a" | $SED 's/^compute_//'`
        tfc_cuda_gencode="$tfc_cuda_gencode -gencode arch=compute_$tfc_n,code=compute_$tfc_n"],
      [@<:@0-9@:>@*], [tfc_n=$tfc_a
        tfc_cuda_gencode="$tfc_cuda_gencode -gencode arch=compute_$tfc_n,code=sm_$tfc_n"],
      [tfc_cuda_arch_bad="$tfc_cuda_arch_bad $tfc_a"; tfc_n=])
    test -n "$tfc_n" && tfc_cuda_last=$tfc_n
  done
  AS_IF([test -n "$tfc_cuda_arch_bad" || test -z "$tfc_cuda_last"],
    [AC_MSG_ERROR([bad --with-cuda-arch value '$tfc_cuda_arch' (expected e.g. sm_75 or sm_75,sm_90)])])
  AS_CASE([" $tfc_cuda_gencode "],
    [*" arch=compute_$tfc_cuda_last,code=compute_$tfc_cuda_last "*], [],
    [tfc_cuda_gencode="$tfc_cuda_gencode -gencode arch=compute_$tfc_cuda_last,code=compute_$tfc_cuda_last"])
  tfc_cuda_arch_desc="$tfc_cuda_arch+PTX(compute_$tfc_cuda_last)"

  dnl ---- nvcc -----------------------------------------------------------
  AS_IF([test -z "$NVCC"], [
    AC_PATH_PROG([NVCC], [nvcc], [], [$tfc_cuda_dir/bin$PATH_SEPARATOR$PATH])])
  AS_IF([test -z "$NVCC"], [
    tfc_cuda_missing="nvcc not found in $tfc_cuda_dir/bin or PATH"
  ], [
    tfc_cuda_version=`$NVCC --version 2>/dev/null | $SED -n 's/.*release \(@<:@0-9.@:>@*\).*/\1/p' | head -n 1`
    AC_MSG_CHECKING([nvcc version])
    AC_MSG_RESULT([${tfc_cuda_version:-unknown}])
  ])

  dnl ---- CUDA include/lib dirs ------------------------------------------
  AS_IF([test -z "$tfc_cuda_missing"], [
    tfc_cuda_incdir=$tfc_cuda_dir/include
    tfc_cuda_libdir=
    for tfc_d in lib64 lib targets/x86_64-linux/lib targets/sbsa-linux/lib; do
      AS_IF([test -e "$tfc_cuda_dir/$tfc_d/libcudart.so" || test -e "$tfc_cuda_dir/$tfc_d/libcudart.a"],
        [tfc_cuda_libdir=$tfc_cuda_dir/$tfc_d; break])
    done
    AS_IF([test -z "$tfc_cuda_libdir"], [tfc_cuda_libdir=$tfc_cuda_dir/lib64])
    tfc_cuda_cflags="-isystem $tfc_cuda_incdir"
    tfc_cuda_ldflags="-L$tfc_cuda_libdir -Wl,-rpath,$tfc_cuda_libdir"
  ])

  AC_LANG_PUSH([C])
  tfc_save_CPPFLAGS=$CPPFLAGS
  tfc_save_LIBS=$LIBS

  dnl ---- nvcc works with the requested architectures --------------------
  AS_IF([test -z "$tfc_cuda_missing"], [
    AC_MSG_CHECKING([whether $NVCC compiles for $tfc_cuda_arch])
    cat > conftest.cu <<_TFCEOF
__global__ void tfc_k(float *x) { x@<:@threadIdx.x@:>@ = 1.0f; }
int main(void) { tfc_k<<<1, 1>>>(0); return 0; }
_TFCEOF
    tfc_cuda_nvccflags="-O3 -Xcompiler -fPIC$tfc_cuda_gencode"
    AS_IF([$NVCC $tfc_cuda_nvccflags -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       tfc_cuda_missing="$NVCC cannot compile for $tfc_cuda_arch (see config.log)"])
    AS_IF([test -z "$tfc_cuda_missing"], [
      dnl let host-only flags (-pthread, -f...) from STARPU_CFLAGS etc. through
      AS_IF([$NVCC $tfc_cuda_nvccflags --forward-unknown-to-host-compiler -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
        [tfc_cuda_nvccflags="$tfc_cuda_nvccflags --forward-unknown-to-host-compiler"])])
    rm -f conftest.cu conftest.$OBJEXT
  ])

  dnl ---- CUDA runtime ---------------------------------------------------
  AS_IF([test -z "$tfc_cuda_missing"], [
    CPPFLAGS="$tfc_save_CPPFLAGS $tfc_cuda_cflags"
    LIBS="$tfc_cuda_ldflags -lcudart $tfc_save_LIBS"
    AC_MSG_CHECKING([for the CUDA runtime (cuda_runtime.h, -lcudart) in $tfc_cuda_dir])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime.h>]],
                                    [[int n; return (int) cudaGetDeviceCount(&n);]])],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       tfc_cuda_missing="CUDA runtime (cuda_runtime.h / libcudart) not usable in $tfc_cuda_dir"])
  ])

  dnl ---- cuBLAS ---------------------------------------------------------
  AS_IF([test -z "$tfc_cuda_missing"], [
    CPPFLAGS="$tfc_save_CPPFLAGS $tfc_cuda_cflags"
    AC_CHECK_HEADER([cublas_v2.h], [],
      [tfc_cuda_missing="cuBLAS header cublas_v2.h not found (looked in $tfc_cuda_incdir)"])
  ])
  AS_IF([test -z "$tfc_cuda_missing"], [
    LIBS="$tfc_cuda_ldflags -lcublas -lcudart $tfc_save_LIBS"
    AC_MSG_CHECKING([for cublasCreate in -lcublas])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cublas_v2.h>]],
                                    [[cublasHandle_t h; return (int) cublasCreate(&h);]])],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       tfc_cuda_missing="cuBLAS library libcublas not found/linkable (looked in $tfc_cuda_libdir)"])
  ])

  dnl ---- cuDNN (under DIR or in the system paths) ------------------------
  AS_IF([test -z "$tfc_cuda_missing"], [
    CPPFLAGS="$tfc_save_CPPFLAGS $tfc_cuda_cflags"
    AC_CHECK_HEADER([cudnn.h], [],
      [tfc_cuda_missing="cuDNN header cudnn.h not found (looked in $tfc_cuda_incdir and the system include path)"])
  ])
  AS_IF([test -z "$tfc_cuda_missing"], [
    LIBS="$tfc_cuda_ldflags -lcudnn -lcudart $tfc_save_LIBS"
    AC_MSG_CHECKING([for cudnnCreate in -lcudnn])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cudnn.h>]],
                                    [[cudnnHandle_t h; return (int) cudnnCreate(&h);]])],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       tfc_cuda_missing="cuDNN library libcudnn not found/linkable (looked in $tfc_cuda_libdir and the system library path)"])
  ])

  dnl ---- StarPU built with CUDA ------------------------------------------
  AS_IF([test -z "$tfc_cuda_missing"], [
    CPPFLAGS="$tfc_save_CPPFLAGS $STARPU_CFLAGS $tfc_cuda_cflags"
    LIBS=$tfc_save_LIBS
    AC_MSG_CHECKING([whether StarPU was built with CUDA (STARPU_USE_CUDA)])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <starpu_config.h>
#ifndef STARPU_USE_CUDA
# error StarPU was built without CUDA
#endif
]], [[]])],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       tfc_cuda_missing="StarPU built without CUDA"])
  ])

  CPPFLAGS=$tfc_save_CPPFLAGS
  LIBS=$tfc_save_LIBS
  AC_LANG_POP([C])

  AS_IF([test -z "$tfc_cuda_missing"], [
    tfc_use_cuda=yes
    tfc_cuda_summary="yes (nvcc ${tfc_cuda_version:-unknown}, arch $tfc_cuda_arch_desc)"
  ], [test "x$tfc_enable_cuda" = xyes], [
    AS_CASE([$tfc_cuda_missing],
      [StarPU*], [AC_MSG_ERROR([--enable-cuda=yes but StarPU (STARPU_CFLAGS='$STARPU_CFLAGS') was built without CUDA: STARPU_USE_CUDA is not defined in starpu_config.h. Build a CUDA StarPU (scripts/build-starpu-cuda.sh) and point PKG_CONFIG_PATH at PREFIX/lib/pkgconfig])],
      [AC_MSG_ERROR([--enable-cuda=yes but $tfc_cuda_missing])])
  ], [
    tfc_cuda_summary="no ($tfc_cuda_missing)"
  ])
])

AS_IF([test "x$tfc_use_cuda" = xyes], [
  NVCCFLAGS="$tfc_cuda_nvccflags${tfc_cuda_user_nvccflags:+ $tfc_cuda_user_nvccflags}"
  CUDA_CFLAGS="$tfc_cuda_cflags${tfc_cuda_user_cflags:+ $tfc_cuda_user_cflags}"
  CUDA_LIBS="$tfc_cuda_ldflags -lcudnn -lcublas -lcudart -lstdc++${tfc_cuda_user_libs:+ $tfc_cuda_user_libs}"
  AC_DEFINE([TFC_USE_CUDA], [1], [Define to 1 to build the CUDA kernels.])
], [
  NVCCFLAGS=
  CUDA_CFLAGS=
  CUDA_LIBS=
])
AC_MSG_CHECKING([whether to build CUDA kernels])
AC_MSG_RESULT([$tfc_cuda_summary])
AC_SUBST([NVCC])
AC_SUBST([NVCCFLAGS])
AC_SUBST([CUDA_CFLAGS])
AC_SUBST([CUDA_LIBS])
AM_CONDITIONAL([TFC_USE_CUDA], [test "x$tfc_use_cuda" = xyes])
])
