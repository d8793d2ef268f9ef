/* fuzz_npy.c: libFuzzer target of the .npy reader (tfc_npy_read) and, on what it accepts, the
 * writer. A failure must be a status with a message naming the file and leave *out NULL; a
 * success must hold the file's data bytes exactly (bools as 0/1), and writing the value with
 * tfc_npy_write and reading that back must give the same dtype, shape and bytes. */
#include "fuzz_common.h"

/* The data's offset from the preamble (magic, version, header length); 0 when malformed. */
static size_t data_offset(const uint8_t *data, size_t size)
{
    if (size < 10) return 0;
    if (data[6] == 1) return 10 + (size_t)(data[8] | data[9] << 8);
    if (size < 12 || (data[6] != 2 && data[6] != 3)) return 0;
    return 12 + (size_t)((uint32_t)data[8] | (uint32_t)data[9] << 8 | (uint32_t)data[10] << 16 |
                         (uint32_t)data[11] << 24);
}

static void check_data(const uint8_t *data, size_t size, const tfc_value *v)
{
    size_t off = data_offset(data, size), n = tfc_value_nbytes(v);
    if (!off || off > size || size - off != n)
        fuzz_die("npy: %zu value bytes from a file of %zu whose data start at %zu", n, size, off);
    const uint8_t *got = tfc_value_cdata(v);
    int is_bool = tfc_value_dtype(v) == TFC_BOOL;
    for (size_t i = 0; i < n; i++) {
        uint8_t want = is_bool ? data[off + i] != 0 : data[off + i];
        if (got[i] != want) fuzz_die("npy: byte %zu is %u, the file says %u", i, got[i], want);
    }
}

/* Writes v and reads it back: the same value. */
static void check_roundtrip(const tfc_value *v)
{
    char path[160];
    snprintf(path, sizeof path, "%s/roundtrip.npy", fuzz_dir());
    if (tfc_npy_write(path, v)) fuzz_die("tfc_npy_write of a value just read: %s", tfc_errmsg());
    tfc_value *w = NULL;
    if (tfc_npy_read(path, &w)) fuzz_die("reading back what tfc_npy_write wrote: %s", tfc_errmsg());
    tfc_shape a = tfc_value_shape(v), b = tfc_value_shape(w);
    if (tfc_value_dtype(v) != tfc_value_dtype(w) || !tfc_shape_equal(&a, &b) ||
        tfc_value_nbytes(v) != tfc_value_nbytes(w) ||
        (tfc_value_nbytes(v) && memcmp(tfc_value_cdata(v), tfc_value_cdata(w), tfc_value_nbytes(v))))
        fuzz_die("npy: the written and read back value differs from the one read");
    tfc_value_destroy(w);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("input.npy", data, size);
    tfc_value *v = (tfc_value *)&v; /* must come back NULL on failure */
    fuzz_clear_errmsg();
    tfc_status st = tfc_npy_read(path, &v);
    if (st) {
        fuzz_check_failure("tfc_npy_read", st, tfc_errmsg(), path);
        if (v) fuzz_die("tfc_npy_read failed (%s) but *out is not NULL", tfc_errmsg());
        return 0;
    }
    if (!v) fuzz_die("tfc_npy_read succeeded with *out NULL");
    check_data(data, size, v);
    check_roundtrip(v);
    tfc_value_destroy(v);
    return 0;
}
