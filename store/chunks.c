/* chunks.c: tensor data as rows of at most tfc_store_chunk_bytes() bytes (SQLite caps one
 * value at 1e9 bytes), little-endian and row-major, each with a CRC-32 so that a corrupted
 * file is reported rather than loaded. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "store_internal.h"

static size_t chunk_bytes = TFC_STORE_CHUNK_BYTES;

void tfc_store_set_chunk_bytes(size_t bytes)
{
    __atomic_store_n(&chunk_bytes, bytes ? bytes : TFC_STORE_CHUNK_BYTES, __ATOMIC_RELAXED);
}

size_t tfc_store_chunk_bytes(void)
{
    size_t c = __atomic_load_n(&chunk_bytes, __ATOMIC_RELAXED);
    c -= c % 8; /* whole elements of every dtype */
    return c ? c : 8;
}

static uint32_t crc_of(const void *p, size_t n)
{
    return (uint32_t)crc32_z(0, p, n);
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define TFC_BIG_ENDIAN 1
static void swap_elems(uint8_t *p, size_t n, size_t elem)
{
    for (size_t i = 0; elem > 1 && i + elem <= n; i += elem)
        for (size_t a = 0, b = elem - 1; a < b; a++, b--) {
            uint8_t t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}
#else
#define TFC_BIG_ENDIAN 0
#endif

int tfc_store_put_chunks(sqlite3 *db, sqlite3_stmt *ins, int64_t owner, const void *data,
                         size_t nbytes, size_t elem_size)
{
    size_t chunk = tfc_store_chunk_bytes();
    const uint8_t *p = data;
    uint8_t *tmp = NULL;
    int rc = SQLITE_OK;
    (void)elem_size;
    for (size_t off = 0, seq = 0; off < nbytes && rc == SQLITE_OK; off += chunk, seq++) {
        size_t n = nbytes - off < chunk ? nbytes - off : chunk;
        const uint8_t *src = p + off;
        if (TFC_BIG_ENDIAN) {
            if (!tmp && !(tmp = malloc(chunk))) return SQLITE_NOMEM;
            memcpy(tmp, src, n);
#if TFC_BIG_ENDIAN
            swap_elems(tmp, n, elem_size);
#endif
            src = tmp;
        }
        sqlite3_reset(ins);
        sqlite3_bind_int64(ins, 1, owner);
        sqlite3_bind_int64(ins, 2, (int64_t)seq);
        sqlite3_bind_int64(ins, 3, crc_of(src, n));
        sqlite3_bind_blob64(ins, 4, src, n, SQLITE_STATIC);
        rc = sqlite3_step(ins);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_reset(ins);
    sqlite3_clear_bindings(ins);
    free(tmp);
    (void)db;
    return rc;
}

int tfc_store_get_chunks(sqlite3_stmt *sel, void *dst, size_t nbytes, size_t elem_size,
                         char *why, size_t why_len)
{
    uint8_t *p = dst;
    size_t off = 0;
    int64_t expect = 0;
    int rc;
    (void)elem_size;
    while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(sel, 0);
        uint32_t crc = (uint32_t)sqlite3_column_int64(sel, 1);
        const void *blob = sqlite3_column_blob(sel, 2);
        size_t n = (size_t)sqlite3_column_bytes(sel, 2);
        if (!blob && n) return SQLITE_NOMEM;
        if (seq != expect) {
            snprintf(why, why_len, "chunk %lld is missing", (long long)expect);
            return -1;
        }
        if (n > nbytes - off) {
            snprintf(why, why_len, "more data than its %zu bytes", nbytes);
            return -1;
        }
        if (crc_of(blob, n) != crc) {
            snprintf(why, why_len, "chunk %lld fails its CRC-32 check (corrupted data)",
                     (long long)seq);
            return -1;
        }
        if (!n) continue; /* an empty blob reads as NULL: nothing to copy (not memcpy of NULL) */
        memcpy(p + off, blob, n);
#if TFC_BIG_ENDIAN
        swap_elems(p + off, n, elem_size);
#endif
        off += n;
        expect++;
    }
    if (rc != SQLITE_DONE) return rc;
    if (off != nbytes) {
        snprintf(why, why_len, "%zu bytes of data where %zu are expected (chunk missing)", off,
                 nbytes);
        return -1;
    }
    return SQLITE_OK;
}
