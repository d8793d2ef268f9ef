# cuda.mk -- automake fragment: compile .cu sources with nvcc into libtool
# objects, so .cu files can be listed in a libtool library's _SOURCES.
#
# In Makefile.am (EXTRA_DIST must be defined before the include):
#   EXTRA_DIST =
#   include $(top_srcdir)/build-aux/cuda.mk
#   if TFC_USE_CUDA
#   libfoo_la_SOURCES += kernels/foo.cu
#   libfoo_la_LIBADD  += $(CUDA_LIBS)
#   endif
#
# Variables come from TFC_CHECK_CUDA (m4/tfc_cuda.m4): NVCC, NVCCFLAGS,
# CUDA_CFLAGS, CUDA_LIBS; STARPU_CFLAGS from PKG_CHECK_MODULES([STARPU]).
# Add project-wide nvcc flags with AM_NVCCFLAGS.  Per-target _CPPFLAGS are
# not seen by this suffix rule (use AM_CPPFLAGS).  .cu files get no automatic
# dependency tracking: `make clean` after changing headers they include.

# No SUFFIXES += .cu: automake learns .cu from the .cu.lo rule below (and
# `+=` would fail unless Makefile.am had set SUFFIXES first).
EXTRA_DIST += $(top_srcdir)/build-aux/nvcc-libtool.sh

NVCC_LIBTOOL = $(SHELL) $(top_srcdir)/build-aux/nvcc-libtool.sh
NVCC_CPPFLAGS = $(DEFS) $(DEFAULT_INCLUDES) $(INCLUDES) $(AM_CPPFLAGS) \
	$(CPPFLAGS) $(STARPU_CFLAGS) $(CUDA_CFLAGS)

tfc_nvcc_verbose = $(tfc_nvcc_verbose_@AM_V@)
tfc_nvcc_verbose_ = $(tfc_nvcc_verbose_@AM_DEFAULT_V@)
tfc_nvcc_verbose_0 = @echo "  NVCC    " $@;
tfc_nvcc_verbose_1 =

.cu.lo:
	$(tfc_nvcc_verbose)$(NVCC_LIBTOOL) $@ $< $(NVCC) $(NVCC_CPPFLAGS) \
	  $(AM_NVCCFLAGS) $(NVCCFLAGS)
