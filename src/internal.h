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

int tfc_dtype_valid(int dtype);
int tfc_dtype_is_float(enum tfc_dtype dtype);
int tfc_dtype_is_integer(enum tfc_dtype dtype); /* int32, int64, uint8 */
/* Parses "float32", "f32", "int64", ...; returns -1 when unknown. */
int tfc_dtype_parse(const char *name);
/* Writes "[2, -1, 3]" into buf. */
const char *tfc_shape_str(const tfc_shape *s, char *buf, size_t len);
int tfc_shape_equal(const tfc_shape *a, const tfc_shape *b);

/* Value internals used by the session (fetch results are allocated before the run). */
tfc_status tfc_value_alloc(enum tfc_dtype dtype, const tfc_shape *shape, tfc_value **out);

#endif
