/* npy.c: NumPy .npy files: "\x93NUMPY", a version, a little-endian header length and a Python
 * dict literal ({'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }), then the C-order
 * data. The reader parses that dict strictly and checks the data size against the file size
 * before allocating; the writer pads the header to 64 bytes as NumPy does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "internal.h"

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

static const struct {
    const char *descr;
    enum tfc_dtype dtype;
} npy_types[] = {
    {"<f4", TFC_FLOAT32}, {"<f8", TFC_FLOAT64}, {"<i4", TFC_INT32},
    {"<i8", TFC_INT64},   {"|u1", TFC_UINT8},   {"|b1", TFC_BOOL},
};

static const char *descr_of(enum tfc_dtype dtype)
{
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].dtype == dtype) return npy_types[i].descr;
    return NULL;
}

/* ---- The header dict -------------------------------------------------------------------- */

struct header {
    char descr[32];
    int fortran;
    tfc_shape shape;
    unsigned seen; /* 1 descr, 2 fortran_order, 4 shape */
};

struct cursor {
    const char *start, *p, *end;
    char *why; /* what is wrong, TFC_MSG_LEN / 2 bytes */
};

static void ws(struct cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int expect(struct cursor *c, char ch)
{
    ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 0;
    }
    snprintf(c->why, TFC_MSG_LEN / 2, "expected '%c' at offset %ld", ch, (long)(c->p - c->start));
    return -1;
}

/* A quoted Python string without escapes, into buf. */
static int string(struct cursor *c, char *buf, size_t size)
{
    ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) {
        snprintf(c->why, TFC_MSG_LEN / 2, "expected a quoted string");
        return -1;
    }
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\') {
            snprintf(c->why, TFC_MSG_LEN / 2, "an escaped string at offset %ld (escapes are "
                     "not supported)", (long)(c->p - c->start));
            return -1;
        }
        if (n + 1 >= size) {
            snprintf(c->why, TFC_MSG_LEN / 2, "a string longer than %zu characters at offset "
                     "%ld (or one not closed)", size - 1, (long)(c->p - n - 1 - c->start));
            return -1;
        }
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end) {
        snprintf(c->why, TFC_MSG_LEN / 2, "unterminated string");
        return -1;
    }
    c->p++;
    buf[n] = '\0';
    return 0;
}

static int word(struct cursor *c, const char *w)
{
    size_t n = strlen(w);
    ws(c);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* (d0, d1, ...), () or (d0,) */
static int shape_tuple(struct cursor *c, tfc_shape *s)
{
    if (expect(c, '(')) return -1;
    s->rank = 0;
    for (;;) {
        ws(c);
        if (c->p < c->end && *c->p == ')') {
            c->p++;
            return 0;
        }
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') {
            snprintf(c->why, TFC_MSG_LEN / 2, "shape: expected a non-negative integer");
            return -1;
        }
        int64_t d = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (__builtin_mul_overflow(d, 10, &d) || __builtin_add_overflow(d, *c->p - '0', &d)) {
                snprintf(c->why, TFC_MSG_LEN / 2, "shape: a dimension overflows int64");
                return -1;
            }
            c->p++;
        }
        if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 longs */
        if (s->rank == TFC_MAX_RANK) {
            snprintf(c->why, TFC_MSG_LEN / 2, "shape: more than %d dims", TFC_MAX_RANK);
            return -1;
        }
        s->dims[s->rank++] = d;
        ws(c);
        if (c->p < c->end && *c->p == ',') c->p++;
        else if (c->p >= c->end || *c->p != ')') {
            snprintf(c->why, TFC_MSG_LEN / 2, "shape: expected ',' or ')'");
            return -1;
        }
    }
}

static int parse_header(const char *text, size_t len, struct header *h, char *why)
{
    struct cursor c = {text, text, text + len, why};
    memset(h, 0, sizeof *h);
    if (expect(&c, '{')) return -1;
    for (;;) {
        ws(&c);
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        char key[32];
        if (string(&c, key, sizeof key) || expect(&c, ':')) return -1;
        if (strcmp(key, "descr") == 0) {
            if (string(&c, h->descr, sizeof h->descr)) return -1;
            h->seen |= 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (word(&c, "True")) h->fortran = 1;
            else if (word(&c, "False")) h->fortran = 0;
            else {
                snprintf(why, TFC_MSG_LEN / 2, "fortran_order is neither True nor False");
                return -1;
            }
            h->seen |= 2;
        } else if (strcmp(key, "shape") == 0) {
            if (shape_tuple(&c, &h->shape)) return -1;
            h->seen |= 4;
        } else {
            snprintf(why, TFC_MSG_LEN / 2, "unexpected key '%s'", key);
            return -1;
        }
        ws(&c);
        if (c.p < c.end && *c.p == ',') c.p++;
        else if (c.p >= c.end || *c.p != '}') {
            snprintf(why, TFC_MSG_LEN / 2, "expected ',' or '}' in the header dict");
            return -1;
        }
    }
    ws(&c);
    if (c.p != c.end) {
        snprintf(why, TFC_MSG_LEN / 2, "unexpected text after the header dict");
        return -1;
    }
    if (h->seen != 7) {
        snprintf(why, TFC_MSG_LEN / 2, "the header dict lacks '%s'",
                 !(h->seen & 1) ? "descr" : !(h->seen & 2) ? "fortran_order" : "shape");
        return -1;
    }
    return 0;
}

/* ---- Reading ---------------------------------------------------------------------------- */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
static void swap_bytes(void *data, size_t count, size_t size)
{
    unsigned char *p = data;
    for (size_t i = 0; i < count; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}
#endif

/* What the file's preamble and header say. */
struct npy_file {
    uint64_t data_off;     /* where the data start */
    struct header h;
    enum tfc_dtype dtype;
    uint64_t numel, bytes;
    char text[200];        /* the shape, for messages */
};

/* The magic, the version and the header length; the header must fit in the file. */
static tfc_status read_preamble(FILE *f, const char *path, uint64_t file_size, uint64_t *hlen,
                                struct npy_file *n)
{
    const tfc_status bad = TFC_ERR_INVALID_ARGUMENT;
    unsigned char pre[12];
    size_t got = fread(pre, 1, 8, f);
    if (memcmp(pre, npy_magic, got < 6 ? got : 6) != 0)
        return tfc_fail_global(bad, "npy '%s': wrong magic: not a .npy file (it must start with "
                               "\\x93NUMPY)", path);
    if (got < 8)
        return tfc_fail_global(bad, "npy '%s': truncated header: %zu of the 8 bytes of magic "
                               "and version", path, got);
    int major = pre[6], minor = pre[7];
    size_t len_bytes = major == 1 ? 2 : major == 2 || major == 3 ? 4 : 0;
    if (!len_bytes)
        return tfc_fail_global(bad, "npy '%s': unsupported format version %d.%d (supported: "
                               "1.0, 2.0, 3.0)", path, major, minor);
    if (fread(pre + 8, 1, len_bytes, f) != len_bytes)
        return tfc_fail_global(bad, "npy '%s': truncated header: the header length is missing",
                               path);
    *hlen = pre[8] | (uint64_t)pre[9] << 8;
    if (len_bytes == 4) *hlen |= (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
    n->data_off = 8 + len_bytes + *hlen;
    if (n->data_off > file_size)
        return tfc_fail_global(bad, "npy '%s': truncated header: it says %llu bytes but the file "
                               "has %lld", path, (unsigned long long)*hlen, (long long)file_size);
    return TFC_OK;
}

/* Reads and parses the header dict of hlen bytes: C order and a dtype we hold. */
static tfc_status read_dict(FILE *f, const char *path, uint64_t hlen, struct npy_file *n)
{
    const tfc_status bad = TFC_ERR_INVALID_ARGUMENT;
    char *text = malloc(hlen + 1);
    if (!text)
        return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "npy '%s': no memory for the header", path);
    tfc_status rc = TFC_OK;
    char why[TFC_MSG_LEN / 2];
    if (fread(text, 1, hlen, f) != hlen) {
        rc = tfc_fail_global(bad, "npy '%s': cannot read the header: %s", path,
                             ferror(f) ? strerror(errno) : "early end of file");
    } else {
        text[hlen] = '\0';
        if (parse_header(text, hlen, &n->h, why))
            rc = tfc_fail_global(bad, "npy '%s': bad header: %s", path, why);
    }
    free(text);
    if (rc) return rc;
    if (n->h.fortran)
        return tfc_fail_global(bad, "npy '%s': fortran_order True is not supported (only C "
                               "order; save np.ascontiguousarray(a))", path);
    const char *descr = n->h.descr;
    int dtype = -1;
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (strcmp(descr, npy_types[i].descr) == 0) dtype = (int)npy_types[i].dtype;
    if (dtype < 0 && (strcmp(descr, "<u1") == 0 || strcmp(descr, ">u1") == 0))
        dtype = TFC_UINT8; /* one byte: the order mark means nothing */
    if (dtype < 0)
        return tfc_fail_global(bad, "npy '%s': unsupported dtype '%s'%s (supported: <f4 <f8 <i4 "
                               "<i8 |u1 |b1)", path, descr, descr[0] == '>' ? ", big-endian" : "");
    n->dtype = (enum tfc_dtype)dtype;
    return TFC_OK;
}

/* The data's size from the shape, checked against overflow and against the file's bytes
 * after the header (which must match it exactly). */
static tfc_status check_size(const char *path, uint64_t file_size, struct npy_file *n)
{
    const tfc_status bad = TFC_ERR_INVALID_ARGUMENT;
    const tfc_shape *s = &n->h.shape;
    const char *descr = n->h.descr;
    tfc_shape_str(s, n->text, sizeof n->text);
    int overflow = 0;
    n->numel = 1;
    for (int i = 0; i < s->rank; i++)
        overflow |= __builtin_mul_overflow(n->numel, (uint64_t)s->dims[i], &n->numel);
    overflow |= __builtin_mul_overflow(n->numel, (uint64_t)tfc_dtype_size(n->dtype), &n->bytes);
    if (overflow || n->numel > (uint64_t)INT64_MAX || n->bytes > SIZE_MAX)
        return tfc_fail_global(bad, "npy '%s': shape %s of '%s' is too large (the size "
                               "overflows)", path, n->text, descr);
    uint64_t avail = file_size - n->data_off;
    if (n->bytes > avail)
        return tfc_fail_global(bad, "npy '%s': truncated data: the header says %s '%s' (%llu "
                               "bytes) but the file holds %llu", path, n->text, descr,
                               (unsigned long long)n->bytes, (unsigned long long)avail);
    if (n->bytes < avail)
        return tfc_fail_global(bad, "npy '%s': wrong size: %llu bytes of data for %s '%s', "
                               "which takes %llu", path, (unsigned long long)avail, n->text,
                               descr, (unsigned long long)n->bytes);
    return TFC_OK;
}

/* Reads the data into a new value *v. */
static tfc_status read_data(FILE *f, const char *path, const struct npy_file *n, tfc_value **v)
{
    tfc_status rc = tfc_value_create(n->dtype, n->h.shape, v);
    if (rc)
        return tfc_fail_global(rc, "npy '%s': no memory for %s '%s' (%llu bytes)", path, n->text,
                               n->h.descr, (unsigned long long)n->bytes);
    if (n->bytes && fread(tfc_value_data(*v), 1, n->bytes, f) != n->bytes)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "npy '%s': cannot read the data: %s",
                               path, ferror(f) ? strerror(errno) : "early end of file");
    if (n->dtype == TFC_BOOL) {
        unsigned char *p = tfc_value_data(*v);
        for (uint64_t i = 0; i < n->numel; i++) p[i] = p[i] != 0;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    swap_bytes(tfc_value_data(*v), n->numel, tfc_dtype_size(n->dtype));
#endif
    return TFC_OK;
}

tfc_status tfc_npy_read(const char *path, tfc_value **out)
{
    if (!out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "npy: out is NULL");
    *out = NULL;
    if (!path) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "npy: path is NULL");

    const tfc_status bad = TFC_ERR_INVALID_ARGUMENT;
    struct stat st;
    if (stat(path, &st) != 0)
        return tfc_fail_global(errno == ENOENT ? TFC_ERR_NOT_FOUND : bad,
                               "npy '%s': cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return tfc_fail_global(bad, "npy '%s': not a regular file", path);
    if (st.st_size == 0) return tfc_fail_global(bad, "npy '%s': empty file", path);
    FILE *f = fopen(path, "rb");
    if (!f) return tfc_fail_global(bad, "npy '%s': cannot open: %s", path, strerror(errno));

    struct npy_file n;
    uint64_t hlen = 0;
    tfc_value *v = NULL;
    tfc_status rc = read_preamble(f, path, (uint64_t)st.st_size, &hlen, &n);
    if (!rc) rc = read_dict(f, path, hlen, &n);
    if (!rc) rc = check_size(path, (uint64_t)st.st_size, &n);
    if (!rc) rc = read_data(f, path, &n, &v);
    if (!rc) {
        *out = v;
        v = NULL;
    }
    tfc_value_destroy(v);
    fclose(f);
    return rc;
}

/* ---- Writing ---------------------------------------------------------------------------- */

tfc_status tfc_npy_write(const char *path, const tfc_value *v)
{
    if (!path || !v)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "npy: %s is NULL", path ? "value" : "path");
    enum tfc_dtype dtype = tfc_value_dtype(v);
    const char *descr = descr_of(dtype);
    if (!descr)
        return tfc_fail_global(TFC_ERR_DTYPE, "npy '%s': cannot write dtype %s", path,
                               tfc_dtype_name(dtype));
    tfc_shape s = tfc_value_shape(v);

    char dict[400];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (int i = 0; i < s.rank; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "",
                      (long long)s.dims[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", s.rank == 1 ? "," : "");
    /* magic(6) version(2) length(2) dict, spaces, '\n': a multiple of 64 bytes. At most 8
     * dims keep the dict far below format 1.0's 65535-byte limit. */
    size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64;
    size_t hlen = total - 10;
    unsigned char pre[10];
    memcpy(pre, npy_magic, 6);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (unsigned char)(hlen & 0xff);
    pre[9] = (unsigned char)(hlen >> 8);
    char pad[64 + 1];
    size_t npad = hlen - (size_t)n - 1;
    memset(pad, ' ', npad);
    pad[npad] = '\n';

    FILE *f = fopen(path, "wb");
    if (!f)
        return tfc_fail_global(errno == ENOENT ? TFC_ERR_NOT_FOUND : TFC_ERR_INVALID_ARGUMENT,
                               "npy '%s': cannot create: %s", path, strerror(errno));
    size_t bytes = tfc_value_nbytes(v);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)n, f) == (size_t)n &&
             fwrite(pad, 1, npad + 1, f) == npad + 1;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    size_t esz = tfc_dtype_size(dtype);
    const unsigned char *src = tfc_value_cdata(v);
    for (size_t i = 0; ok && i < bytes; i += esz)
        for (size_t k = esz; ok && k-- > 0;) ok = fputc(src[i + k], f) != EOF;
#else
    if (ok && bytes) ok = fwrite(tfc_value_cdata(v), 1, bytes, f) == bytes;
#endif
    int err = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (!ok) {
        remove(path);
        return tfc_fail_global(TFC_ERR_RUNTIME, "npy '%s': write failed: %s", path,
                               err ? strerror(err) : "short write");
    }
    return TFC_OK;
}
