/* model_read.c: reads an ONNX model file and parses it with protobuf-c, and finds the opset of
 * the default domain. A file that is not a ModelProto, or is cut short, is an error that names
 * the file; protobuf-c checks lengths against the buffer, so nothing is read past its end. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "onnx_import.h"

/* The whole file: mapped (*mapped = 1) when it is a regular file, which saves a large model a
 * copy of its weights; else read into a new buffer (a pipe, a character device). (As with
 * onnxruntime's mapping, a file cut short by another process during the import is SIGBUS.) */
static tfc_status read_file(tfc_graph *g, const char *path, uint8_t **buf, size_t *len,
                            int *mapped)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tfc_graph_error(g, errno == ENOENT ? TFC_ERR_NOT_FOUND : TFC_ERR_INVALID_ARGUMENT,
                               "ONNX model '%s': cannot open: %s", path, strerror(errno));
    struct stat sb;
    *mapped = 0;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        (uintmax_t)sb.st_size <= SIZE_MAX) {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fileno(f), 0);
        if (m != MAP_FAILED) {
            fclose(f);
            *buf = m, *len = (size_t)sb.st_size, *mapped = 1;
            return TFC_OK;
        }
    }
    uint8_t *data = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            uint8_t *p = realloc(data, cap);
            if (!p) {
                free(data);
                fclose(f);
                return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "ONNX model '%s': out of memory",
                                       path);
            }
            data = p;
        }
        size_t got = fread(data + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(data);
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "ONNX model '%s': read error", path);
    }
    *buf = data;
    *len = n;
    return TFC_OK;
}

/* protobuf-c leaves unset strings NULL; names in messages and lookups need "" (freed by
 * protobuf-c's free_unpacked like any field, since it is allocated the same way). */
static int fill_name(char **s)
{
    return *s || (*s = strdup("")) != NULL;
}

#define ONNX_MAX_NESTING 32 /* subgraphs in subgraphs (If, Loop): deeper is refused */

/* Fills the names of gp and of its subgraphs (If's branches, Loop's body), which the import
 * maps too. Returns 0 when out of memory, -1 when nested deeper than ONNX_MAX_NESTING. */
static int fill_names(Onnx__GraphProto *gp, int depth)
{
    if (depth > ONNX_MAX_NESTING) return -1;
    int ok = fill_name(&gp->name);
    for (size_t i = 0; ok > 0 && i < gp->n_node; i++) {
        Onnx__NodeProto *n = gp->node[i];
        ok &= fill_name(&n->name) & fill_name(&n->op_type) & fill_name(&n->domain);
        for (size_t a = 0; ok > 0 && a < n->n_attribute; a++) {
            Onnx__AttributeProto *at = n->attribute[a];
            if (at->g) ok = fill_names(at->g, depth + 1);
            for (size_t k = 0; ok > 0 && k < at->n_graphs; k++)
                ok = fill_names(at->graphs[k], depth + 1);
        }
    }
    for (size_t i = 0; ok > 0 && i < gp->n_initializer; i++) ok &= fill_name(&gp->initializer[i]->name);
    for (size_t i = 0; ok > 0 && i < gp->n_input; i++) ok &= fill_name(&gp->input[i]->name);
    for (size_t i = 0; ok > 0 && i < gp->n_output; i++) ok &= fill_name(&gp->output[i]->name);
    return ok;
}

tfc_status tfc_onnx_model_read(tfc_graph *g, const char *path, Onnx__ModelProto **out)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int mapped;
    tfc_status st = read_file(g, path, &buf, &len, &mapped);
    if (st) return st;
    if (len == 0) {
        free(buf);
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "ONNX model '%s': the file is empty",
                               path);
    }
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
    if (mapped)
        munmap(buf, len);
    else
        free(buf);
    if (!m)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "ONNX model '%s': not an ONNX model, or truncated (%zu bytes do "
                               "not parse as a ModelProto)", path, len);
    /* Other protobufs can parse as a ModelProto with unknown fields: require what a model has. */
    if (!m->graph || !m->has_ir_version || m->n_opset_import == 0) {
        const char *what = !m->graph ? "graph" : !m->has_ir_version ? "IR version"
                                                                    : "opset import";
        onnx__model_proto__free_unpacked(m, NULL);
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "ONNX model '%s': not an ONNX model (it has no %s)", path, what);
    }
    int filled = fill_names(m->graph, 0);
    if (filled <= 0) {
        onnx__model_proto__free_unpacked(m, NULL);
        if (filled < 0)
            return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "ONNX model '%s': subgraphs "
                                   "nested deeper than %d", path, ONNX_MAX_NESTING);
        return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "ONNX model '%s': out of memory", path);
    }
    *out = m;
    return TFC_OK;
}

tfc_status tfc_onnx_model_opset(tfc_graph *g, const Onnx__ModelProto *m, int64_t *opset)
{
    *opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        const char *d = o->domain ? o->domain : "";
        if (!strcmp(d, "") || !strcmp(d, "ai.onnx")) *opset = o->has_version ? o->version : 1;
    }
    if (*opset < 0)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "ONNX model: no opset of the default domain (ai.onnx) is imported");
    if (*opset > TFC_ONNX_MAX_OPSET)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "ONNX model: opset %lld of the default domain is newer than the "
                               "newest we know (%d, ONNX 1.12)", (long long)*opset,
                               TFC_ONNX_MAX_OPSET);
    return TFC_OK;
}
