/* idx.c: the idx reader (MNIST, Fashion-MNIST): a big-endian header (two zero bytes, a type
 * code, a rank, then one uint32 per dimension) and the elements, read through zlib so that
 * gzip and plain files read alike. Every size is checked against what the file can hold before
 * anything large is allocated, so a corrupt header fails with a message instead of a huge malloc. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include "internal.h"

/* Deflate expands at most about 1032:1; a gzip file of c bytes never holds more than this. */
#define DEFLATE_MAX_RATIO 1032u
#define CHUNK 16384 /* bytes per conversion pass; a multiple of every element size */

struct idx_type {
    unsigned code;
    const char *name;
    size_t size;         /* bytes per element in the file */
    enum tfc_dtype dtype; /* what it becomes (int8 and int16 widen to int32) */
};

static const struct idx_type idx_types[] = {
    {0x08, "uint8", 1, TFC_UINT8},     {0x09, "int8", 1, TFC_INT32},
    {0x0B, "int16", 2, TFC_INT32},     {0x0C, "int32", 4, TFC_INT32},
    {0x0D, "float32", 4, TFC_FLOAT32}, {0x0E, "float64", 8, TFC_FLOAT64},
};

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const unsigned char *p)
{
    return (uint64_t)be32(p) << 32 | be32(p + 4);
}

/* Reads up to n bytes; returns the count (short only at the end of the data), or -1 when zlib
 * reports an error (corrupt or truncated gzip stream). */
static int64_t read_full(gzFile gz, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        unsigned chunk = n - got > (1u << 30) ? 1u << 30 : (unsigned)(n - got);
        int r = gzread(gz, (char *)buf + got, chunk);
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (int64_t)got;
}

/* Whether zlib saw the compressed stream end early (gzread then reports a short count, not
 * an error). */
static int cut_short(gzFile gz)
{
    int err;
    gzerror(gz, &err);
    return err == Z_BUF_ERROR;
}

static const char *zmsg(gzFile gz)
{
    int err;
    const char *m = gzerror(gz, &err);
    if (err == Z_ERRNO) return strerror(errno);
    return m && *m ? m : "unknown zlib error";
}

/* Big-endian file elements -> host values of the target dtype. */
static void convert(const struct idx_type *t, const unsigned char *raw, size_t count, void *dst)
{
    size_t i;
    switch (t->code) {
    case 0x08: memcpy(dst, raw, count); break;
    case 0x09:
        for (i = 0; i < count; i++) ((int32_t *)dst)[i] = (int8_t)raw[i];
        break;
    case 0x0B:
        for (i = 0; i < count; i++)
            ((int32_t *)dst)[i] = (int16_t)(uint16_t)(raw[2 * i] << 8 | raw[2 * i + 1]);
        break;
    case 0x0C:
        for (i = 0; i < count; i++) ((int32_t *)dst)[i] = (int32_t)be32(raw + 4 * i);
        break;
    case 0x0D:
        for (i = 0; i < count; i++) {
            uint32_t u = be32(raw + 4 * i);
            memcpy((float *)dst + i, &u, 4);
        }
        break;
    default: /* 0x0E */
        for (i = 0; i < count; i++) {
            uint64_t u = be64(raw + 8 * i);
            memcpy((double *)dst + i, &u, 8);
        }
        break;
    }
}

/* Reads the elements after the header into v; returns the count of whole elements read, or -1
 * on a zlib error. */
static int64_t read_elements(gzFile gz, const struct idx_type *t, tfc_value *v)
{
    int64_t numel = tfc_value_numel(v);
    if (numel == 0) return 0;
    if (t->code == 0x08) return read_full(gz, tfc_value_data(v), (size_t)numel);
    unsigned char raw[CHUNK];
    size_t per = CHUNK / t->size, out_size = tfc_dtype_size(t->dtype);
    char *dst = tfc_value_data(v);
    int64_t done = 0;
    while (done < numel) {
        size_t want = (size_t)(numel - done) < per ? (size_t)(numel - done) : per;
        int64_t got = read_full(gz, raw, want * t->size);
        if (got < 0) return -1;
        size_t whole = (size_t)got / t->size;
        convert(t, raw, whole, dst + (size_t)done * out_size);
        done += (int64_t)whole;
        if ((size_t)got < want * t->size) break;
    }
    return done;
}

/* What the header says, and what follows from it. */
struct idx_header {
    const struct idx_type *t;
    tfc_shape shape;
    size_t len;            /* bytes of the header */
    int compressed;        /* gzip (known once zlib has read something) */
    uint64_t numel, bytes; /* elements, and their bytes in the file */
    char text[160];        /* the shape, for messages */
};

/* Reads and checks the magic (type code, rank) and the dims. */
static tfc_status read_header(gzFile gz, const char *path, struct idx_header *h)
{
    const tfc_status bad = TFC_ERR_INVALID_ARGUMENT;
    unsigned char head[4 + 4 * TFC_MAX_RANK];
    int64_t got = read_full(gz, head, 4);
    if (got < 0) return tfc_fail_global(bad, "idx '%s': corrupt gzip data: %s", path, zmsg(gz));
    if (got < 4)
        return tfc_fail_global(bad, "idx '%s': truncated header: %lld of the 4 magic bytes",
                               path, (long long)got);
    h->compressed = !gzdirect(gz);
    uint32_t magic = be32(head);
    if (head[0] || head[1])
        return tfc_fail_global(bad, "idx '%s': wrong magic 0x%08x (an idx file starts with two "
                               "zero bytes, a type code and a rank, e.g. 0x00000803)", path,
                               magic);
    h->t = NULL;
    for (size_t i = 0; i < sizeof idx_types / sizeof idx_types[0]; i++)
        if (idx_types[i].code == head[2]) h->t = &idx_types[i];
    if (!h->t)
        return tfc_fail_global(bad, "idx '%s': unsupported element type 0x%02x in magic 0x%08x "
                               "(supported: 0x08 0x09 0x0B 0x0C 0x0D 0x0E)", path, head[2],
                               magic);
    int rank = head[3];
    if (rank < 1 || rank > TFC_MAX_RANK)
        return tfc_fail_global(bad, "idx '%s': rank %d in magic 0x%08x is outside [1, %d]", path,
                               rank, magic, TFC_MAX_RANK);
    h->len = 4 + 4 * (size_t)rank;
    got = read_full(gz, head + 4, h->len - 4);
    if (got < 0) return tfc_fail_global(bad, "idx '%s': corrupt gzip data: %s", path, zmsg(gz));
    if ((size_t)got < h->len - 4)
        return tfc_fail_global(bad, "idx '%s': truncated header: %lld of the %zu bytes of %d "
                               "dims", path, (long long)got, h->len - 4, rank);
    h->shape = (tfc_shape){.rank = rank};
    for (int i = 0; i < rank; i++) h->shape.dims[i] = be32(head + 4 + 4 * i);
    return TFC_OK;
}

/* Checks the size the dims give against overflow and against what a file of file_size bytes
 * can hold, before anything is allocated. */
static tfc_status check_size(const char *path, uint64_t file_size, struct idx_header *h)
{
    const tfc_status bad = TFC_ERR_INVALID_ARGUMENT;
    int overflow = 0;
    h->numel = 1;
    for (int i = 0; i < h->shape.rank; i++)
        overflow |= __builtin_mul_overflow(h->numel, (uint64_t)h->shape.dims[i], &h->numel);
    overflow |= __builtin_mul_overflow(h->numel, (uint64_t)h->t->size, &h->bytes);
    overflow |= h->numel > (uint64_t)INT64_MAX || h->bytes > SIZE_MAX / 4; /* widened to int32 */
    tfc_shape_str(&h->shape, h->text, sizeof h->text);
    if (overflow)
        return tfc_fail_global(bad, "idx '%s': dims %s of %s are too large (the size "
                               "overflows)", path, h->text, h->t->name);
    /* What the file can hold: exact for a plain file, deflate's largest expansion for gzip. */
    uint64_t avail;
    if (!h->compressed)
        avail = file_size > h->len ? file_size - h->len : 0;
    else if (__builtin_mul_overflow(file_size, DEFLATE_MAX_RATIO, &avail))
        avail = UINT64_MAX;
    if (h->bytes <= avail) return TFC_OK;
    if (!h->compressed)
        return tfc_fail_global(bad, "idx '%s': truncated data: the header says %s %s (%llu "
                               "bytes) but the file holds %llu bytes after the header", path,
                               h->text, h->t->name, (unsigned long long)h->bytes,
                               (unsigned long long)avail);
    return tfc_fail_global(bad, "idx '%s': the header says %s %s (%llu bytes), more than a gzip "
                           "file of %lld bytes can hold", path, h->text, h->t->name,
                           (unsigned long long)h->bytes, (long long)file_size);
}

/* Reads the elements into v, then checks that the file ends there. */
static tfc_status read_body(gzFile gz, const char *path, const struct idx_header *h,
                            tfc_value *v)
{
    const tfc_status bad = TFC_ERR_INVALID_ARGUMENT;
    int64_t n = read_elements(gz, h->t, v);
    if (n < 0)
        return tfc_fail_global(bad, "idx '%s': corrupt or truncated gzip data: %s", path,
                               zmsg(gz));
    if ((uint64_t)n < h->numel)
        return tfc_fail_global(bad, "idx '%s': truncated data: the header says %s %s (%llu "
                               "elements) but the file holds %lld%s", path, h->text, h->t->name,
                               (unsigned long long)h->numel, (long long)n,
                               cut_short(gz) ? " (the gzip stream is cut short)" : "");
    /* Reading past the end also checks the gzip trailer (CRC and length). */
    unsigned char extra;
    int64_t got = read_full(gz, &extra, 1);
    if (got < 0)
        return tfc_fail_global(bad, "idx '%s': corrupt gzip data after the elements: %s", path,
                               zmsg(gz));
    if (got == 0 && cut_short(gz))
        return tfc_fail_global(bad, "idx '%s': the gzip stream is cut short after the elements "
                               "(no trailer)", path);
    if (got > 0)
        return tfc_fail_global(bad, "idx '%s': wrong size: trailing data after the %llu "
                               "elements of %s %s", path, (unsigned long long)h->numel, h->text,
                               h->t->name);
    return TFC_OK;
}

tfc_status tfc_idx_read(const char *path, tfc_value **out)
{
    if (!out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "idx: out is NULL");
    *out = NULL;
    if (!path) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "idx: path is NULL");

    struct stat st;
    if (stat(path, &st) != 0)
        return tfc_fail_global(errno == ENOENT ? TFC_ERR_NOT_FOUND : TFC_ERR_INVALID_ARGUMENT,
                               "idx '%s': cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "idx '%s': not a regular file", path);
    if (st.st_size == 0)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "idx '%s': empty file", path);

    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return tfc_fail_global(errno ? TFC_ERR_INVALID_ARGUMENT : TFC_ERR_OUT_OF_MEMORY,
                               "idx '%s': cannot open: %s", path,
                               errno ? strerror(errno) : "zlib has no memory");
    gzbuffer(gz, 1u << 17);

    struct idx_header h;
    tfc_value *v = NULL;
    tfc_status rc = read_header(gz, path, &h);
    if (!rc) rc = check_size(path, (uint64_t)st.st_size, &h);
    if (!rc && (rc = tfc_value_create(h.t->dtype, h.shape, &v)))
        tfc_fail_global(rc, "idx '%s': no memory for %s %s (%llu bytes)", path, h.text,
                        tfc_dtype_name(h.t->dtype),
                        (unsigned long long)(h.numel * tfc_dtype_size(h.t->dtype)));
    if (!rc) rc = read_body(gz, path, &h, v);
    if (!rc) {
        *out = v;
        v = NULL;
    }
    tfc_value_destroy(v);
    gzclose(gz);
    return rc;
}
