/* fuzz_idx.c: libFuzzer target of the idx reader (tfc_idx_read), plain and gzip files. A
 * failure must be a status with a message naming the file and leave *out NULL; a success must
 * hold exactly what the file says: for a plain file every element is decoded here again, by a
 * second, simpler reading of the format, and compared. */
#include "fuzz_common.h"

/* The element type code's bytes per element in the file and dtype in memory. */
static int idx_type(unsigned code, size_t *size, enum tfc_dtype *dtype)
{
    switch (code) {
    case 0x08: *size = 1; *dtype = TFC_UINT8; return 0;
    case 0x09: *size = 1; *dtype = TFC_INT32; return 0;
    case 0x0B: *size = 2; *dtype = TFC_INT32; return 0;
    case 0x0C: *size = 4; *dtype = TFC_INT32; return 0;
    case 0x0D: *size = 4; *dtype = TFC_FLOAT32; return 0;
    case 0x0E: *size = 8; *dtype = TFC_FLOAT64; return 0;
    }
    return -1;
}

/* Element i of a plain file's data p as the reader must give it (the bytes of the value). */
static void decode(unsigned code, const uint8_t *p, size_t i, void *out)
{
    uint64_t u = 0;
    size_t size = code == 0x08 || code == 0x09 ? 1 : code == 0x0B ? 2 : code == 0x0E ? 8 : 4;
    for (size_t k = 0; k < size; k++) u = u << 8 | p[i * size + k];
    int32_t i32;
    float f;
    switch (code) {
    case 0x08: *(uint8_t *)out = (uint8_t)u; return;
    case 0x09: i32 = (int8_t)u; memcpy(out, &i32, 4); return;
    case 0x0B: i32 = (int16_t)u; memcpy(out, &i32, 4); return;
    case 0x0C: i32 = (int32_t)(uint32_t)u; memcpy(out, &i32, 4); return;
    case 0x0D: { uint32_t w = (uint32_t)u; memcpy(&f, &w, 4); memcpy(out, &f, 4); return; }
    default: memcpy(out, &u, 8); return;
    }
}

/* A plain file read successfully: the header and every element against the bytes. */
static void check_plain(const uint8_t *data, size_t size, const tfc_value *v)
{
    size_t esize;
    enum tfc_dtype dtype;
    if (size < 4 || data[0] || data[1] || idx_type(data[2], &esize, &dtype))
        fuzz_die("idx: a file with a bad magic was read");
    int rank = data[3];
    size_t hlen = 4 + 4 * (size_t)rank;
    tfc_shape s = tfc_value_shape(v);
    if (tfc_value_dtype(v) != dtype || s.rank != rank || size < hlen)
        fuzz_die("idx: dtype %d rank %d for type 0x%02x rank %d", (int)tfc_value_dtype(v), s.rank,
                 data[2], rank);
    for (int i = 0; i < rank; i++) {
        const uint8_t *d = data + 4 + 4 * i;
        int64_t dim = (int64_t)((uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | d[2] << 8 | d[3]);
        if (s.dims[i] != dim) fuzz_die("idx: dim %d is %lld, the file says %lld", i,
                                       (long long)s.dims[i], (long long)dim);
    }
    size_t numel = (size_t)tfc_value_numel(v), out = tfc_dtype_size(dtype);
    if (size - hlen != numel * esize)
        fuzz_die("idx: %zu data bytes read as %zu elements of %zu bytes", size - hlen, numel,
                 esize);
    const uint8_t *got = tfc_value_cdata(v);
    for (size_t i = 0; i < numel; i++) {
        uint8_t want[8];
        decode(data[2], data + hlen, i, want);
        if (memcmp(got + i * out, want, out)) fuzz_die("idx: element %zu differs", i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("input.idx", data, size);
    tfc_value *v = (tfc_value *)&v; /* must come back NULL on failure */
    fuzz_clear_errmsg();
    tfc_status st = tfc_idx_read(path, &v);
    if (st) {
        fuzz_check_failure("tfc_idx_read", st, tfc_errmsg(), path);
        if (v) fuzz_die("tfc_idx_read failed (%s) but *out is not NULL", tfc_errmsg());
        return 0;
    }
    if (!v) fuzz_die("tfc_idx_read succeeded with *out NULL");
    int gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    if (!gzip) check_plain(data, size, v);
    /* a gzip file holds at most about 1032 times its size (deflate's largest ratio) */
    else if (tfc_value_nbytes(v) > (size_t)size * 1032 * 4)
        fuzz_die("idx: %zu bytes from a gzip file of %zu", tfc_value_nbytes(v), size);
    tfc_value_destroy(v);
    return 0;
}
