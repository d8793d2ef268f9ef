/* internal.h: private declarations shared by the library's modules (never installed).
 * Status helpers, dtype helpers and the thread-local message used by calls without a handle. */
#ifndef TFC_INTERNAL_H
#define TFC_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>
#include "tfc.h"

#define TFC_MSG_LEN 512

/* Formats a message into buf (size TFC_MSG_LEN) and returns status, so that a failing path
 * reads `return tfc_fail(s->msg, TFC_ERR_SHAPE, "feed '%s': ...", name);`. */
tfc_status tfc_fail(char *buf, tfc_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for the thread-local message returned by tfc_errmsg(). */
tfc_status tfc_fail_global(tfc_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* tfc_fail with a va_list, for the layers' own helpers (tfc_graph_error, tfc_sched_fail). */
tfc_status tfc_vfail(char *buf, tfc_status status, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* A broken invariant of the library's own (never caller input): the status and message
 * arguments of a layer's error helper, naming the source file and line, as in
 *     default: tfc_kernel_fail(a, TFC_INTERNAL("no layout kernel of this kind"));          */
#define TFC_INTERNAL(what) \
    TFC_ERR_INTERNAL, "%s:%d: internal error: %s", __FILE__, __LINE__, (what)

/* Checks such an invariant where breaking it would otherwise crash or pass unnoticed: TFC_OK
 * when cond holds; else reports TFC_INTERNAL(cond) through report, a layer's error helper
 * given its leading arguments (tfc_fail, tfc_graph_error, tfc_sched_fail, tfc_kernel_fail),
 * and is TFC_ERR_INTERNAL. A bug then fails the call that meets it, saying where:
 *     if (TFC_CHECK(ax >= 0, tfc_graph_error, g)) return TFC_ERR_INTERNAL;                */
#define TFC_CHECK(cond, report, ...) \
    ((cond) ? TFC_OK : ((void)report(__VA_ARGS__, TFC_INTERNAL(#cond)), TFC_ERR_INTERNAL))

int tfc_dtype_valid(int dtype);
int tfc_dtype_is_float(enum tfc_dtype dtype);
int tfc_dtype_is_integer(enum tfc_dtype dtype); /* int32, int64, uint8 */
/* 1 when a tensor of this shape and dtype would hold more bytes than int64 counts (unknown
 * dims count as 1; a zero dim makes it empty): every size that enters the library from the
 * API, a store row or a file header is checked with it before anything is allocated. */
int tfc_shape_too_large(const tfc_shape *shape, enum tfc_dtype dtype);
/* Parses "float32", "f32", "int64", ...; returns -1 when unknown. */
int tfc_dtype_parse(const char *name);
/* Writes "[2, -1, 3]" into buf. */
const char *tfc_shape_str(const tfc_shape *s, char *buf, size_t len);
int tfc_shape_equal(const tfc_shape *a, const tfc_shape *b);

/* Value internals used by the session (fetch results are allocated before the run). */
tfc_status tfc_value_alloc(enum tfc_dtype dtype, const tfc_shape *shape, tfc_value **out);

#endif
