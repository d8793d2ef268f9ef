/* import_off.c: the ONNX entry points of a library built without protobuf-c (configure
 * --with-onnx=no, or protoc-c / libprotobuf-c not found): each says so, naming what to install.
 * With ONNX support, onnx/import.c defines them and this file compiles to nothing. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "tfc.h"

#ifndef TFC_HAVE_ONNX
#include "../graph/graph.h"

tfc_status tfc_onnx_import(tfc_graph *g, const char *path, const tfc_onnx_options *options,
                           tfc_onnx_model **out)
{
    if (out) *out = NULL;
    static const char why[] = "tfc_onnx_import: this library was built without ONNX support "
                              "(configure --with-onnx=yes needs protoc-c and libprotobuf-c: "
                              "protobuf-c-compiler and libprotobuf-c-dev)";
    if (!g) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "%s", why);
    return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "%s (model '%s')", why,
                           path ? path : "(null)");
}

tfc_status tfc_onnx_init_variables(tfc_session *s, const tfc_onnx_model *m)
{
    return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "tfc_onnx_init_variables: this library "
                           "was built without ONNX support");
}

void tfc_onnx_model_free(tfc_onnx_model *m)
{
    (void)m; /* no import makes one */
}
#endif
