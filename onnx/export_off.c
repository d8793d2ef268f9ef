/* export_off.c: tfc_onnx_export in a library built without protobuf-c (configure
 * --with-onnx=no, or protoc-c / libprotobuf-c not found): it says so, naming what to install.
 * With ONNX support, onnx/export.c defines it and this file compiles to nothing. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "tfc.h"

#ifndef TFC_HAVE_ONNX
#include "internal.h"

tfc_status tfc_onnx_export(tfc_graph *g, const tfc_signature *sig,
                           const tfc_onnx_export_options *options, const char *path)
{
    (void)g, (void)sig, (void)options;
    return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "tfc_onnx_export: this library was built "
                           "without ONNX support, so '%s' cannot be written (configure "
                           "--with-onnx=yes needs protoc-c and libprotobuf-c: "
                           "protobuf-c-compiler and libprotobuf-c-dev)", path ? path : "(null)");
}
#endif
