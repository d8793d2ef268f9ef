/* test_data.c: the input pipeline: idx on the real Fashion-MNIST files and on files written
 * here (plain and gzip, every type code), .npy round trips and NumPy's own bytes, bad files of
 * every kind (a clear status and a message naming the file), normalize and reshape, and the
 * batcher: coverage, partial and dropped batches, deterministic shuffles, exact resume by seek,
 * the wait counter, and create/seek/destroy races for the sanitizers. */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "testutil.h"
#include "../src/tfc.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist/"

static char tmpdir[] = "/tmp/tfc_test_data_XXXXXX";

static int suite_init(void)
{
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int suite_clean(void)
{
    return nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* A path in the temp dir (one of four rotating buffers). */
static const char *tpath(const char *name)
{
    static char bufs[4][512];
    static int k;
    char *b = bufs[k++ & 3];
    snprintf(b, 512, "%s/%s", tmpdir, name);
    return b;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    if (len) CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void write_gz(const char *path, const void *data, size_t len)
{
    gzFile gz = gzopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(gz);
    if (len) CU_ASSERT_EQUAL(gzwrite(gz, data, (unsigned)len), (int)len);
    CU_ASSERT_EQUAL(gzclose(gz), Z_OK);
}

static unsigned char *read_whole(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    CU_ASSERT_EQUAL(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* An idx image: header (type code, dims) then `payload` bytes (already big-endian). */
static size_t idx_bytes(unsigned char *out, unsigned type, int rank, const uint32_t *dims,
                        const void *payload, size_t len)
{
    out[0] = out[1] = 0;
    out[2] = (unsigned char)type;
    out[3] = (unsigned char)rank;
    for (int i = 0; i < rank; i++) {
        out[4 + 4 * i] = (unsigned char)(dims[i] >> 24);
        out[5 + 4 * i] = (unsigned char)(dims[i] >> 16);
        out[6 + 4 * i] = (unsigned char)(dims[i] >> 8);
        out[7 + 4 * i] = (unsigned char)dims[i];
    }
    if (len) memcpy(out + 4 + 4 * rank, payload, len);
    return 4 + 4 * (size_t)rank + len;
}

/* A failed read: the status, no value, and a message naming the file and the problem. */
static void expect_bad(tfc_status st, tfc_value **vp, tfc_status want, const char *path,
                       const char *what)
{
    tfc_value *v = *vp;
    *vp = (tfc_value *)1; /* a stale pointer, to check that the next failure clears it */
    CU_ASSERT_EQUAL(st, want);
    CU_ASSERT_PTR_NULL(v);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), path));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), what));
    if (st != want || !strstr(tfc_errmsg(), path) || !strstr(tfc_errmsg(), what))
        fprintf(stderr, "\n  status %d, message: %s (wanted '%s')\n", (int)st, tfc_errmsg(), what);
    if (v != (tfc_value *)1) tfc_value_destroy(v);
}

/* A file of literal bytes (gzipped when its name ends in .gz) that a reader must refuse with
 * status `want` and a message naming the file and containing `what`. */
struct bad_bytes {
    const char *name;
    const char *bytes;
    size_t len;
    tfc_status want;
    const char *what;
};

static void expect_bad_files(tfc_status (*read)(const char *, tfc_value **),
                             const struct bad_bytes *cases, int n)
{
    tfc_value *v = (tfc_value *)1;
    for (int i = 0; i < n; i++) {
        const char *p = tpath(cases[i].name);
        size_t len = strlen(p);
        if (len > 3 && !strcmp(p + len - 3, ".gz"))
            write_gz(p, cases[i].bytes, cases[i].len);
        else
            write_file(p, cases[i].bytes, cases[i].len);
        expect_bad(read(p, &v), &v, cases[i].want, p, cases[i].what);
    }
}

/* ---- Fashion-MNIST --------------------------------------------------------------------- */

static int fashion_present(const char *p)
{
    if (access(p, R_OK) == 0) return 1;
    printf("\n  SKIPPED: %s is absent (apt-get install dataset-fashion-mnist) ", p);
    return 0;
}

static void check_fashion(const char *images, const char *labels, int64_t n,
                          uint64_t pixel_sum, int first_center, const int *first_labels)
{
    if (!fashion_present(images) || !fashion_present(labels)) return;
    tfc_value *x = NULL, *y = NULL;
    if (tfc_idx_read(images, &x) != TFC_OK) fprintf(stderr, "\n  %s\n", tfc_errmsg());
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    CU_ASSERT_EQUAL_FATAL(tfc_idx_read(labels, &y), TFC_OK);
    tfc_shape s = tfc_value_shape(x);
    CU_ASSERT_EQUAL(tfc_value_dtype(x), TFC_UINT8);
    CU_ASSERT_EQUAL(s.rank, 3);
    CU_ASSERT_EQUAL(s.dims[0], n);
    CU_ASSERT_EQUAL(s.dims[1], 28);
    CU_ASSERT_EQUAL(s.dims[2], 28);
    const uint8_t *px = tfc_value_cdata(x);
    uint64_t sum = 0;
    for (int64_t i = 0; i < n * 784; i++) sum += px[i];
    CU_ASSERT_EQUAL(sum, pixel_sum); /* computed independently with Python's gzip module */
    CU_ASSERT_EQUAL(px[14 * 28 + 14], first_center);
    s = tfc_value_shape(y);
    CU_ASSERT_EQUAL(tfc_value_dtype(y), TFC_UINT8);
    CU_ASSERT_EQUAL(s.rank, 1);
    CU_ASSERT_EQUAL(s.dims[0], n);
    const uint8_t *lab = tfc_value_cdata(y);
    int64_t count[10] = {0};
    int in_range = 1;
    for (int64_t i = 0; i < n; i++) {
        if (lab[i] > 9) in_range = 0;
        else count[lab[i]]++;
    }
    CU_ASSERT(in_range);
    for (int c = 0; c < 10; c++) CU_ASSERT_EQUAL(count[c], n / 10); /* balanced classes */
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(lab[i], first_labels[i]);
    tfc_value_destroy(x);
    tfc_value_destroy(y);
}

static void test_fashion_train(void)
{
    check_fashion(FASHION_DIR "train-images-idx3-ubyte.gz", FASHION_DIR "train-labels-idx1-ubyte.gz",
                  60000, 3431114169ull, 217, (const int[]){9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
}

static void test_fashion_t10k(void)
{
    check_fashion(FASHION_DIR "t10k-images-idx3-ubyte.gz", FASHION_DIR "t10k-labels-idx1-ubyte.gz",
                  10000, 573469082ull, 110, (const int[]){9, 2, 1, 1, 6, 1, 4, 6, 5, 7});
}

/* The whole pipeline on the real data: read, normalize, reshape, one shuffled epoch. */
static void test_fashion_pipeline(void)
{
    const char *ip = FASHION_DIR "t10k-images-idx3-ubyte.gz", *lp = FASHION_DIR "t10k-labels-idx1-ubyte.gz";
    if (!fashion_present(ip) || !fashion_present(lp)) return;
    tfc_value *x8, *x, *y;
    CU_ASSERT_EQUAL_FATAL(tfc_idx_read(ip, &x8), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_idx_read(lp, &y), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_value_normalize_u8(x8, 1.0f / 255, 0.0f, &x), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_value_reshape(x, tfc_shape_of(2, (int64_t[]){10000, 784})), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_shape(x).dims[1], 784);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(x, 14 * 28 + 14), 110.0 / 255, 1e-6);
    tfc_batcher *b;
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(2, (tfc_value *[]){x, y}, 128, 42,
                                             TFC_BATCHER_SHUFFLE, &b), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_steps_per_epoch(b), 79);
    int64_t count[10] = {0}, rows = 0;
    double pix = 0, want_pix = 0;
    for (int64_t i = 0; i < 10000 * 784; i++) want_pix += tfc_value_get(x, i);
    int done = 0;
    while (!done) {
        tfc_value *batch[2];
        CU_ASSERT_EQUAL_FATAL(tfc_batcher_next(b, batch, &done), TFC_OK);
        int64_t r = tfc_value_shape(batch[0]).dims[0];
        CU_ASSERT_EQUAL(tfc_value_shape(batch[1]).dims[0], r);
        CU_ASSERT_EQUAL(tfc_value_shape(batch[0]).dims[1], 784);
        CU_ASSERT_EQUAL(tfc_value_dtype(batch[0]), TFC_FLOAT32);
        const uint8_t *l = tfc_value_cdata(batch[1]);
        for (int64_t i = 0; i < r; i++) count[l[i]]++;
        const float *p = tfc_value_cdata(batch[0]);
        for (int64_t i = 0; i < r * 784; i++) pix += p[i];
        rows += r;
    }
    CU_ASSERT_EQUAL(rows, 10000);
    for (int c = 0; c < 10; c++) CU_ASSERT_EQUAL(count[c], 1000);
    CU_ASSERT_DOUBLE_EQUAL(pix, want_pix, 1e-6 * want_pix);
    tfc_batcher_destroy(b);
    tfc_value_destroy(x8);
    tfc_value_destroy(x);
    tfc_value_destroy(y);
}

/* ---- idx on written files -------------------------------------------------------------- */

static void idx_case(unsigned type, int rank, const uint32_t *dims, const void *payload,
                     size_t len, enum tfc_dtype want_dtype, const double *want, int64_t numel)
{
    unsigned char buf[512];
    size_t n = idx_bytes(buf, type, rank, dims, payload, len);
    for (int gz = 0; gz < 2; gz++) {
        char name[64];
        snprintf(name, sizeof name, "t%02x_%d.idx%s", type, rank, gz ? ".gz" : "");
        const char *p = tpath(name);
        if (gz) write_gz(p, buf, n);
        else write_file(p, buf, n);
        tfc_value *v = NULL;
        tfc_status st = tfc_idx_read(p, &v);
        CU_ASSERT_EQUAL(st, TFC_OK);
        if (st) {
            fprintf(stderr, "\n  %s\n", tfc_errmsg());
            continue;
        }
        CU_ASSERT_EQUAL(tfc_value_dtype(v), want_dtype);
        CU_ASSERT_EQUAL(tfc_value_shape(v).rank, rank);
        for (int i = 0; i < rank; i++) CU_ASSERT_EQUAL(tfc_value_shape(v).dims[i], dims[i]);
        CU_ASSERT_EQUAL(tfc_value_numel(v), numel);
        for (int64_t i = 0; want && i < numel; i++) CU_ASSERT_EQUAL(tfc_value_get(v, i), want[i]);
        tfc_value_destroy(v);
    }
}

static void test_idx_types(void)
{
    unsigned char u8[24];
    double w8[24];
    for (int i = 0; i < 24; i++) w8[i] = u8[i] = (unsigned char)(i * 37);
    idx_case(0x08, 3, (uint32_t[]){2, 3, 4}, u8, 24, TFC_UINT8, w8, 24);
    idx_case(0x08, 1, (uint32_t[]){5}, u8, 5, TFC_UINT8, w8, 5);
    idx_case(0x09, 1, (uint32_t[]){5}, "\x80\xff\x00\x01\x7f", 5, TFC_INT32,
             (double[]){-128, -1, 0, 1, 127}, 5);
    idx_case(0x0B, 2, (uint32_t[]){2, 2}, "\x80\x00\xff\xfe\x01\x2c\x7f\xff", 8, TFC_INT32,
             (double[]){-32768, -2, 300, 32767}, 4);
    idx_case(0x0C, 1, (uint32_t[]){3}, "\x80\x00\x00\x00\xff\xff\xff\xfb\x07\x5b\xcd\x15", 12,
             TFC_INT32, (double[]){-2147483648.0, -5, 123456789}, 3);
    /* 1.5f = 0x3FC00000, -0.25f = 0xBE800000 */
    idx_case(0x0D, 1, (uint32_t[]){2}, "\x3f\xc0\x00\x00\xbe\x80\x00\x00", 8, TFC_FLOAT32,
             (double[]){1.5, -0.25}, 2);
    /* pi = 0x400921FB54442D18, -1e300 = 0xFE37E43C8800759C */
    idx_case(0x0E, 2, (uint32_t[]){2, 1}, "\x40\x09\x21\xfb\x54\x44\x2d\x18\xfe\x37\xe4\x3c\x88\x00\x75\x9c",
             16, TFC_FLOAT64, (double[]){3.141592653589793, -1e300}, 2);
    idx_case(0x08, 3, (uint32_t[]){0, 28, 28}, NULL, 0, TFC_UINT8, NULL, 0);
    /* a rank-8 int16 value of one element */
    idx_case(0x0B, 8, (uint32_t[]){1, 1, 1, 1, 1, 1, 1, 1}, "\xff\x9c", 2, TFC_INT32,
             (double[]){-100}, 1);
}

static void test_idx_bad(void)
{
    unsigned char buf[4096], img[3 * 784];
    tfc_value *v = (tfc_value *)1;
    const char *p;
    for (int i = 0; i < (int)sizeof img; i++) img[i] = (unsigned char)(i * i + i / 7);

    p = tpath("missing.idx");
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_NOT_FOUND, p, "No such file");
    v = (tfc_value *)1;
    expect_bad(tfc_idx_read(tmpdir, &v), &v, TFC_ERR_INVALID_ARGUMENT, tmpdir, "not a regular file");

    static const struct bad_bytes literal[] = {
        {"empty.idx", "", 0, TFC_ERR_INVALID_ARGUMENT, "empty file"},
        {"empty.idx.gz", "", 0, TFC_ERR_INVALID_ARGUMENT, "truncated header"}, /* valid gzip */
        {"short_magic.idx", "\x00\x00\x08", 3, TFC_ERR_INVALID_ARGUMENT, "truncated header"},
        {"short_dims.idx", "\x00\x00\x08\x03\x00\x00\xea\x60\x00\x00", 10,
         TFC_ERR_INVALID_ARGUMENT, "truncated header"},
        {"magic.idx", "\x12\x34\x56\x78\x00\x00\x00\x01\x05", 9, TFC_ERR_INVALID_ARGUMENT,
         "wrong magic 0x12345678"},
        {"magic.idx.gz", "GIF89a................", 22, TFC_ERR_INVALID_ARGUMENT, "wrong magic"},
        {"type.idx", "\x00\x00\x0a\x01\x00\x00\x00\x01\x05", 9, TFC_ERR_INVALID_ARGUMENT,
         "unsupported element type 0x0a"},
        {"rank0.idx", "\x00\x00\x08\x00\x05", 5, TFC_ERR_INVALID_ARGUMENT, "rank 0"},
    };
    expect_bad_files(tfc_idx_read, literal, (int)(sizeof literal / sizeof literal[0]));
    p = tpath("rank9.idx");
    memset(buf, 0, 64);
    buf[2] = 8;
    buf[3] = 9;
    write_file(p, buf, 4 + 36);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "rank 9");

    /* the header says 100 images, the file holds 3: refused before allocating */
    size_t n = idx_bytes(buf, 0x08, 3, (uint32_t[]){100, 28, 28}, img, sizeof img);
    p = tpath("wrongsize.idx");
    write_file(p, buf, n);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "truncated data");
    /* in gzip the bound is deflate's ratio, so a short stream is found while reading */
    p = tpath("wrongsize.idx.gz");
    write_gz(p, buf, n);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "truncated data");
    /* ... unless the claim exceeds even that bound (zeros compress 1000:1) */
    n = idx_bytes(buf, 0x08, 3, (uint32_t[]){100, 28, 28}, (unsigned char[784]){0}, 784);
    p = tpath("zeros.idx.gz");
    write_gz(p, buf, n);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "more than a gzip file");
    /* one label too many */
    n = idx_bytes(buf, 0x08, 1, (uint32_t[]){2}, "\x01\x02\x03", 3);
    p = tpath("trailing.idx");
    write_file(p, buf, n);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "trailing data");
    p = tpath("trailing.idx.gz");
    write_gz(p, buf, n);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "trailing data");
    /* int32 elements cut in the middle */
    n = idx_bytes(buf, 0x0C, 1, (uint32_t[]){2}, "\x00\x00\x00\x01\x00\x00", 6);
    p = tpath("cut_int32.idx.gz");
    write_gz(p, buf, n);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "truncated data");

    /* absurd dims: a size that overflows, and one of terabytes in a tiny file */
    n = idx_bytes(buf, 0x0E, 4, (uint32_t[]){0xffffffffu, 0xffffffffu, 0xffffffffu, 2}, NULL, 0);
    p = tpath("overflow.idx");
    write_file(p, buf, n);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "overflows");
    n = idx_bytes(buf, 0x0D, 3, (uint32_t[]){0xffffffffu, 1000, 1000}, img, 64);
    p = tpath("huge.idx");
    write_file(p, buf, n);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "truncated data");
    p = tpath("huge.idx.gz");
    write_gz(p, buf, n);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "more than a gzip file");

    /* a gzip file cut in half, one without its trailer, and one with a damaged CRC */
    n = idx_bytes(buf, 0x08, 3, (uint32_t[]){3, 28, 28}, img, sizeof img);
    p = tpath("good.idx.gz");
    write_gz(p, buf, n);
    CU_ASSERT_EQUAL(tfc_idx_read(p, &v), TFC_OK);
    tfc_value_destroy(v);
    size_t len;
    unsigned char *gz = read_whole(p, &len);
    p = tpath("cut.idx.gz");
    write_file(p, gz, len / 2);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "gzip stream is cut short");
    p = tpath("notrailer.idx.gz");
    write_file(p, gz, len - 8);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "gzip stream is cut short");
    gz[len - 6] ^= 0x5a; /* inside the CRC32 of the trailer */
    p = tpath("crc.idx.gz");
    write_file(p, gz, len);
    expect_bad(tfc_idx_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, "gzip");
    free(gz);

    CU_ASSERT_EQUAL(tfc_idx_read(NULL, &v), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_idx_read(p, NULL), TFC_ERR_INVALID_ARGUMENT);
}

/* ---- npy ------------------------------------------------------------------------------- */

static void test_npy_roundtrip(void)
{
    static const struct { int rank; int64_t dims[8]; } shapes[] = {
        {2, {2, 3}}, {1, {5}}, {0, {0}}, {3, {2, 0, 3}}, {8, {1, 2, 1, 2, 1, 2, 1, 2}},
        {2, {7, 11}},
    };
    for (int dt = 0; dt < TFC_NUM_DTYPES; dt++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            tfc_value *a, *b = NULL;
            CU_ASSERT_EQUAL_FATAL(tfc_value_create((enum tfc_dtype)dt,
                                                   tfc_shape_of(shapes[k].rank, shapes[k].dims), &a),
                                  TFC_OK);
            unsigned char *d = tfc_value_data(a);
            for (size_t i = 0; i < tfc_value_nbytes(a); i++)
                d[i] = dt == TFC_BOOL ? (unsigned char)(i % 3 == 0) : (unsigned char)(i * 131 + 7);
            char name[64];
            snprintf(name, sizeof name, "rt_%s_%zu.npy", tfc_dtype_name((enum tfc_dtype)dt), k);
            const char *p = tpath(name);
            CU_ASSERT_EQUAL(tfc_npy_write(p, a), TFC_OK);
            size_t len;
            unsigned char *raw = read_whole(p, &len);
            CU_ASSERT(len >= 64 && memcmp(raw, "\x93NUMPY\x01\x00", 8) == 0);
            size_t off = 10 + (raw[8] | (size_t)raw[9] << 8);
            CU_ASSERT_EQUAL(off % 64, 0);
            CU_ASSERT_EQUAL(raw[off - 1], '\n');
            CU_ASSERT_EQUAL(len, off + tfc_value_nbytes(a));
            free(raw);
            tfc_status st = tfc_npy_read(p, &b);
            CU_ASSERT_EQUAL(st, TFC_OK);
            if (st) {
                fprintf(stderr, "\n  %s\n", tfc_errmsg());
                tfc_value_destroy(a);
                continue;
            }
            CU_ASSERT_EQUAL((int)tfc_value_dtype(b), dt);
            tfc_shape sa = tfc_value_shape(a), sb = tfc_value_shape(b);
            CU_ASSERT_EQUAL(sb.rank, sa.rank);
            CU_ASSERT(memcmp(sa.dims, sb.dims, sizeof sa.dims[0] * (size_t)sa.rank) == 0);
            CU_ASSERT_EQUAL(tfc_value_nbytes(b), tfc_value_nbytes(a));
            if (tfc_value_nbytes(a))
                CU_ASSERT(memcmp(tfc_value_cdata(a), tfc_value_cdata(b), tfc_value_nbytes(a)) == 0);
            tfc_value_destroy(a);
            tfc_value_destroy(b);
        }
}

/* The exact bytes of NumPy 2.4's np.save(np.arange(6, dtype='<i8').reshape(2, 3)): the header
 * is 118 bytes of dict and padding. */
static size_t numpy_i8_bytes(unsigned char *out)
{
    static const char dict[] = "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }";
    memcpy(out, "\x93NUMPY\x01\x00\x76\x00", 10);
    size_t n = strlen(dict);
    memcpy(out + 10, dict, n);
    memset(out + 10 + n, ' ', 118 - n - 1);
    out[127] = '\n';
    for (int i = 0; i < 6; i++) {
        memset(out + 128 + 8 * i, 0, 8);
        out[128 + 8 * i] = (unsigned char)i;
    }
    return 176;
}

static void test_npy_numpy_files(void)
{
    unsigned char want[176], buf[256];
    size_t n = numpy_i8_bytes(want);
    /* our writer produces NumPy's bytes exactly */
    tfc_value *v = NULL;
    int64_t d[6] = {0, 1, 2, 3, 4, 5};
    CU_ASSERT_EQUAL_FATAL(tfc_value_from_data(TFC_INT64, tfc_shape_of(2, (int64_t[]){2, 3}), d, &v), TFC_OK);
    const char *p = tpath("np_i8.npy");
    CU_ASSERT_EQUAL(tfc_npy_write(p, v), TFC_OK);
    tfc_value_destroy(v);
    size_t len;
    unsigned char *raw = read_whole(p, &len);
    CU_ASSERT_EQUAL(len, n);
    CU_ASSERT(len == n && memcmp(raw, want, n) == 0);
    free(raw);

    /* format 2.0 (np.lib.format.write_array(..., version=(2, 0))) of float32 [[1.5, -2]] */
    static const char dict2[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }";
    memcpy(buf, "\x93NUMPY\x02\x00\x74\x00\x00\x00", 12);
    memcpy(buf + 12, dict2, strlen(dict2));
    memset(buf + 12 + strlen(dict2), ' ', 116 - strlen(dict2) - 1);
    buf[127] = '\n';
    memcpy(buf + 128, "\x00\x00\xc0\x3f\x00\x00\x00\xc0", 8);
    p = tpath("np_v2.npy");
    write_file(p, buf, 136);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(p, &v), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_dtype(v), TFC_FLOAT32);
    CU_ASSERT_EQUAL(tfc_value_shape(v).rank, 2);
    CU_ASSERT_EQUAL(tfc_value_get(v, 0), 1.5);
    CU_ASSERT_EQUAL(tfc_value_get(v, 1), -2.0);
    tfc_value_destroy(v);

    /* bool, rank 1 ("(3,)"), double quotes, no trailing comma, and a nonzero byte read as 1 */
    static const char dict3[] = "{\"descr\":\"|b1\",\"shape\":(3,),\"fortran_order\":False}";
    size_t hl = 64 - 10;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)hl;
    buf[9] = 0;
    memset(buf + 10, ' ', hl);
    memcpy(buf + 10, dict3, strlen(dict3));
    buf[63] = '\n';
    memcpy(buf + 64, "\x01\x00\x07", 3);
    p = tpath("np_b1.npy");
    write_file(p, buf, 67);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(p, &v), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_dtype(v), TFC_BOOL);
    CU_ASSERT_EQUAL(tfc_value_shape(v).dims[0], 3);
    CU_ASSERT_EQUAL(((const unsigned char *)tfc_value_cdata(v))[2], 1);
    tfc_value_destroy(v);
}

/* A v1.0 file with the given dict and `data` bytes after a 64-byte-aligned header. */
static void npy_file(const char *path, const char *dict, const void *data, size_t data_len)
{
    unsigned char buf[1024];
    size_t n = strlen(dict), total = (10 + n + 1 + 63) / 64 * 64;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)((total - 10) & 0xff);
    buf[9] = (unsigned char)((total - 10) >> 8);
    memset(buf + 10, ' ', total - 10);
    memcpy(buf + 10, dict, n);
    buf[total - 1] = '\n';
    if (data_len) memcpy(buf + total, data, data_len);
    write_file(path, buf, total + data_len);
}

static void test_npy_bad(void)
{
    tfc_value *v = (tfc_value *)1;
    const char *p;
    static const float f6[6];

    p = tpath("missing.npy");
    expect_bad(tfc_npy_read(p, &v), &v, TFC_ERR_NOT_FOUND, p, "No such file");
    static const struct bad_bytes literal[] = {
        {"empty.npy", "", 0, TFC_ERR_INVALID_ARGUMENT, "empty file"},
        {"magic.npy", "PK\x03\x04 not npy at all", 20, TFC_ERR_INVALID_ARGUMENT, "wrong magic"},
        {"short.npy", "\x93NUM", 4, TFC_ERR_INVALID_ARGUMENT, "truncated header"},
        {"version.npy", "\x93NUMPY\x04\x00\x10\x00", 10, TFC_ERR_INVALID_ARGUMENT, "version 4.0"},
        /* the length says 118 bytes of dict; 20 are there */
        {"short_header.npy", "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'f", 30,
         TFC_ERR_INVALID_ARGUMENT, "truncated header"},
    };
    expect_bad_files(tfc_npy_read, literal, (int)(sizeof literal / sizeof literal[0]));

    /* a well-formed file with this header dict and `bytes` bytes of data, and what is wrong */
    static const struct {
        const char *name, *dict;
        size_t bytes;
        const char *what;
    } headers[] = {
        {"fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24,
         "fortran_order True"},
        {"complex.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", 24,
         "unsupported dtype '<c8'"},
        {"bigendian.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", 24,
         "big-endian"},
        {"garbage.npy", "[1, 2, 3]", 24, "bad header"},
        {"nokey.npy", "{'descr': '<f4', 'fortran_order': False, }", 24, "lacks 'shape'"},
        {"badshape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 24,
         "bad header"},
        {"rank9.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }",
         1, "more than 8 dims"},
        /* the header says 6 floats, 5 are there */
        {"truncated.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20,
         "truncated data"},
        {"trailing.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 24,
         "wrong size"},
        /* terabytes claimed by a tiny file: refused before allocating */
        {"huge.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000, 100000), }",
         24, "truncated data"},
        {"overflow.npy",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4), }", 24,
         "overflows"},
        {"bigdim.npy",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", 24,
         "overflows int64"},
    };
    for (int i = 0; i < (int)(sizeof headers / sizeof headers[0]); i++) {
        p = tpath(headers[i].name);
        npy_file(p, headers[i].dict, f6, headers[i].bytes);
        expect_bad(tfc_npy_read(p, &v), &v, TFC_ERR_INVALID_ARGUMENT, p, headers[i].what);
    }

    /* writing where no directory exists */
    tfc_value *s;
    CU_ASSERT_EQUAL_FATAL(tfc_value_scalar(TFC_FLOAT32, 1.0, &s), TFC_OK);
    p = tpath("no/such/dir/x.npy");
    CU_ASSERT_NOT_EQUAL(tfc_npy_write(p, s), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), p));
    CU_ASSERT_EQUAL(tfc_npy_write(NULL, s), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_npy_write(p, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_npy_read(p, NULL), TFC_ERR_INVALID_ARGUMENT);
    tfc_value_destroy(s);
}

/* ---- Value helpers --------------------------------------------------------------------- */

static void test_normalize_reshape(void)
{
    uint8_t px[6] = {0, 51, 102, 153, 204, 255};
    tfc_value *u, *f = (tfc_value *)1, *bad;
    CU_ASSERT_EQUAL_FATAL(tfc_value_from_data(TFC_UINT8, tfc_shape_of(2, (int64_t[]){2, 3}), px, &u), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_value_normalize_u8(u, 1.0f / 255, -0.5f, &f), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_dtype(f), TFC_FLOAT32);
    CU_ASSERT_EQUAL(tfc_value_shape(f).dims[1], 3);
    for (int i = 0; i < 6; i++) CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(f, i), px[i] / 255.0 - 0.5, 1e-6);

    CU_ASSERT_EQUAL(tfc_value_reshape(f, tfc_shape_of(1, (int64_t[]){6})), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_shape(f).rank, 1);
    CU_ASSERT_EQUAL(tfc_value_shape(f).dims[0], 6);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(f, 5), 0.5, 1e-6);
    CU_ASSERT_EQUAL(tfc_value_reshape(f, tfc_shape_of(2, (int64_t[]){4, 2})), TFC_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "[6]"));
    CU_ASSERT_EQUAL(tfc_value_shape(f).rank, 1); /* unchanged on error */
    CU_ASSERT_EQUAL(tfc_value_reshape(f, tfc_shape_of(2, (int64_t[]){-2, -3})), TFC_ERR_SHAPE);
    CU_ASSERT_EQUAL(tfc_value_reshape(f, tfc_shape_of(9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 6})),
                    TFC_ERR_SHAPE);
    CU_ASSERT_EQUAL(tfc_value_reshape(f, tfc_shape_of(3, (int64_t[]){3, 1, 2})), TFC_OK);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(f, 5), 0.5, 1e-6);
    CU_ASSERT_EQUAL(tfc_value_reshape(NULL, tfc_shape_of(0, NULL)), TFC_ERR_INVALID_ARGUMENT);

    CU_ASSERT_EQUAL(tfc_value_normalize_u8(f, 1, 0, &bad), TFC_ERR_DTYPE);
    CU_ASSERT_PTR_NULL(bad);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "float32"));
    CU_ASSERT_EQUAL(tfc_value_normalize_u8(NULL, 1, 0, &bad), TFC_ERR_INVALID_ARGUMENT);
    tfc_value_destroy(u);
    tfc_value_destroy(f);
}

/* ---- Batcher --------------------------------------------------------------------------- */

/* Four sources over n rows, each row tagged by its index so that a batch can be checked: idx
 * int64 [n] = i; feat float32 [n, 3] = (i, 2i, 3i) (12-byte rows); lab uint8 [n] = i % 256;
 * w int32 [n] = 1000 + i. */
struct ds {
    int64_t n;
    tfc_value *src[4];
};

static void ds_make(struct ds *d, int64_t n)
{
    d->n = n;
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_INT64, tfc_shape_of(1, (int64_t[]){n}), &d->src[0]), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){n, 3}), &d->src[1]), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_UINT8, tfc_shape_of(1, (int64_t[]){n}), &d->src[2]), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){n}), &d->src[3]), TFC_OK);
    int64_t *a = tfc_value_data(d->src[0]);
    float *f = tfc_value_data(d->src[1]);
    uint8_t *l = tfc_value_data(d->src[2]);
    int32_t *w = tfc_value_data(d->src[3]);
    for (int64_t i = 0; i < n; i++) {
        a[i] = i;
        f[3 * i] = (float)i, f[3 * i + 1] = (float)(2 * i), f[3 * i + 2] = (float)(3 * i);
        l[i] = (uint8_t)(i % 256);
        w[i] = (int32_t)(1000 + i);
    }
}

static void ds_free(struct ds *d)
{
    for (int k = 0; k < 4; k++) tfc_value_destroy(d->src[k]);
}

/* Takes the next batch, checks that the sources agree row by row, copies its indices to idx
 * (capacity cap) and returns the row count (-1 on failure). */
static int64_t take(tfc_batcher *b, int64_t *idx, int64_t cap, int *done)
{
    tfc_value *v[8]; /* up to 8 sources; the first four are struct ds's */
    if (tfc_batcher_next(b, v, done) != TFC_OK) return -1;
    int64_t r = tfc_value_shape(v[0]).dims[0];
    CU_ASSERT(r <= cap);
    CU_ASSERT_EQUAL(tfc_value_shape(v[1]).rank, 2);
    CU_ASSERT_EQUAL(tfc_value_shape(v[1]).dims[1], 3);
    int ok = 1;
    for (int k = 1; k < 4; k++) ok &= tfc_value_shape(v[k]).dims[0] == r;
    const int64_t *a = tfc_value_cdata(v[0]);
    const float *f = tfc_value_cdata(v[1]);
    const uint8_t *l = tfc_value_cdata(v[2]);
    const int32_t *w = tfc_value_cdata(v[3]);
    for (int64_t i = 0; i < r && i < cap; i++) {
        ok &= f[3 * i] == (float)a[i] && f[3 * i + 2] == (float)(3 * a[i]);
        ok &= l[i] == (uint8_t)(a[i] % 256) && w[i] == 1000 + a[i];
        idx[i] = a[i];
    }
    CU_ASSERT(ok);
    return r;
}

static void test_batcher_order(void)
{
    struct ds d;
    ds_make(&d, 10);
    tfc_batcher *b;
    int64_t idx[16];
    int done;
    /* no shuffle: 0..9 in batches of 3, the last one partial */
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, 3, 1, 0, &b), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_steps_per_epoch(b), 4);
    for (int epoch = 0; epoch < 3; epoch++)
        for (int step = 0; step < 4; step++) {
            int64_t e, s;
            tfc_batcher_position(b, &e, &s);
            CU_ASSERT(e == epoch && s == step);
            int64_t r = take(b, idx, 16, &done);
            CU_ASSERT_EQUAL(r, step < 3 ? 3 : 1);
            CU_ASSERT_EQUAL(done, step == 3);
            for (int64_t i = 0; i < r; i++) CU_ASSERT_EQUAL(idx[i], 3 * step + i);
        }
    tfc_batcher_destroy(b);

    /* drop_last: three full batches, then the next epoch */
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, 3, 1, TFC_BATCHER_DROP_LAST, &b), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_steps_per_epoch(b), 3);
    for (int step = 0; step < 6; step++) {
        CU_ASSERT_EQUAL(take(b, idx, 16, &done), 3);
        CU_ASSERT_EQUAL(done, step % 3 == 2);
        CU_ASSERT_EQUAL(idx[0], 3 * (step % 3));
    }
    tfc_batcher_destroy(b);

    /* exact division: no partial batch; a batch larger than the data: one batch of all rows */
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, 5, 1, TFC_BATCHER_SHUFFLE, &b), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_steps_per_epoch(b), 2);
    CU_ASSERT_EQUAL(take(b, idx, 16, &done), 5);
    CU_ASSERT_EQUAL(take(b, idx, 16, &done), 5);
    CU_ASSERT_EQUAL(done, 1);
    tfc_batcher_destroy(b);
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, 64, 1, TFC_BATCHER_SHUFFLE, &b), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_steps_per_epoch(b), 1);
    for (int epoch = 0; epoch < 3; epoch++) {
        CU_ASSERT_EQUAL(take(b, idx, 16, &done), 10);
        CU_ASSERT_EQUAL(done, 1);
    }
    tfc_batcher_destroy(b);
    /* the largest batch size: one batch of all rows, no overflow in the step count */
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, INT64_MAX, 1, 0, &b), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_steps_per_epoch(b), 1);
    CU_ASSERT_EQUAL(take(b, idx, 16, &done), 10);
    CU_ASSERT_EQUAL(done, 1);
    tfc_batcher_destroy(b);
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, INT64_MAX, 1, TFC_BATCHER_DROP_LAST, &b),
                          TFC_ERR_INVALID_ARGUMENT); /* no full batch */
    ds_free(&d);
}

/* Every example exactly once per epoch; orders differ across epochs and seeds, and are the
 * same for the same (seed, epoch). */
static void test_batcher_shuffle(void)
{
    enum { N = 103, B = 8, EPOCHS = 4 };
    struct ds d;
    ds_make(&d, N);
    static int64_t order[3][EPOCHS][N];
    uint64_t seeds[3] = {7, 7, 8};
    for (int run = 0; run < 3; run++) {
        tfc_batcher *b;
        CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, B, seeds[run], TFC_BATCHER_SHUFFLE, &b), TFC_OK);
        CU_ASSERT_EQUAL(tfc_batcher_steps_per_epoch(b), (N + B - 1) / B);
        for (int e = 0; e < EPOCHS; e++) {
            int64_t pos = 0, r;
            int done = 0, steps = 0;
            while (!done) {
                r = take(b, order[run][e] + pos, N - pos, &done);
                CU_ASSERT_FATAL(r > 0);
                CU_ASSERT_EQUAL(r, done ? N % B : B);
                pos += r;
                steps++;
            }
            CU_ASSERT_EQUAL(pos, N);
            CU_ASSERT_EQUAL(steps, (N + B - 1) / B);
            int seen[N] = {0};
            for (int i = 0; i < N; i++) seen[order[run][e][i]]++;
            int once = 1;
            for (int i = 0; i < N; i++) once &= seen[i] == 1;
            CU_ASSERT(once);
        }
        tfc_batcher_destroy(b);
    }
    for (int e = 0; e < EPOCHS; e++) {
        CU_ASSERT(memcmp(order[0][e], order[1][e], sizeof order[0][e]) == 0);
        CU_ASSERT(memcmp(order[0][e], order[2][e], sizeof order[0][e]) != 0);
        if (e) CU_ASSERT(memcmp(order[0][e], order[0][e - 1], sizeof order[0][e]) != 0);
        int identity = 1;
        for (int i = 0; i < N; i++) identity &= order[0][e][i] == i;
        CU_ASSERT(!identity);
    }

    /* shuffle + drop_last: distinct rows, N % B of them left out, not always the same ones */
    tfc_batcher *b;
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, B, 7, TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST, &b), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_steps_per_epoch(b), N / B);
    int left_out[EPOCHS][N];
    for (int e = 0; e < EPOCHS; e++) {
        int64_t idx[N], pos = 0;
        int done = 0;
        while (!done) pos += take(b, idx + pos, N - pos, &done);
        CU_ASSERT_EQUAL(pos, N / B * B);
        for (int i = 0; i < N; i++) left_out[e][i] = 1;
        for (int64_t i = 0; i < pos; i++) {
            CU_ASSERT_EQUAL(left_out[e][idx[i]], 1);
            left_out[e][idx[i]] = 0;
        }
        /* the same order as without drop_last, truncated */
        CU_ASSERT(memcmp(idx, order[0][e], sizeof idx[0] * (size_t)pos) == 0);
    }
    CU_ASSERT(memcmp(left_out[0], left_out[1], sizeof left_out[0]) != 0 ||
              memcmp(left_out[1], left_out[2], sizeof left_out[0]) != 0);
    tfc_batcher_destroy(b);
    ds_free(&d);
}

/* seek(epoch, step) gives exactly the batches of an uninterrupted run from there. */
static void test_batcher_seek(void)
{
    enum { N = 23, B = 5, STEPS = 5, EPOCHS = 4, T = EPOCHS * STEPS };
    struct ds d;
    ds_make(&d, N);
    static int64_t ref[T][B], rows[T];
    tfc_batcher *b, *c;
    int done;
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, B, 99, TFC_BATCHER_SHUFFLE, &b), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_steps_per_epoch(b), STEPS);
    for (int t = 0; t < T; t++) rows[t] = take(b, ref[t], B, &done);
    CU_ASSERT_EQUAL(rows[STEPS - 1], 3);

    /* a fresh batcher sought to each position */
    for (int t0 = 0; t0 < T; t0 += 3) {
        CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, B, 99, TFC_BATCHER_SHUFFLE, &c), TFC_OK);
        CU_ASSERT_EQUAL(tfc_batcher_seek(c, t0 / STEPS, t0 % STEPS), TFC_OK);
        int64_t e, s;
        tfc_batcher_position(c, &e, &s);
        CU_ASSERT(e == t0 / STEPS && s == t0 % STEPS);
        for (int t = t0; t < T; t++) {
            int64_t idx[B];
            int64_t r = take(c, idx, B, &done);
            CU_ASSERT_EQUAL(r, rows[t]);
            CU_ASSERT(r == rows[t] && memcmp(idx, ref[t], sizeof idx[0] * (size_t)r) == 0);
            CU_ASSERT_EQUAL(done, t % STEPS == STEPS - 1);
        }
        tfc_batcher_destroy(c);
    }

    /* seeking back and forth on a running batcher, with prefetched batches to discard */
    static const int hops[][2] = {{0, 2}, {3, 4}, {1, 0}, {1, 0}, {0, 0}, {2, 3}, {0, 4}};
    for (size_t h = 0; h < sizeof hops / sizeof hops[0]; h++) {
        CU_ASSERT_EQUAL(tfc_batcher_seek(b, hops[h][0], hops[h][1]), TFC_OK);
        int t0 = hops[h][0] * STEPS + hops[h][1];
        for (int t = t0; t < T && t < t0 + 6; t++) {
            int64_t idx[B];
            int64_t r = take(b, idx, B, &done);
            CU_ASSERT(r == rows[t] && memcmp(idx, ref[t], sizeof idx[0] * (size_t)r) == 0);
        }
    }

    /* resume from a saved position on a new batcher */
    CU_ASSERT_EQUAL(tfc_batcher_seek(b, 0, 0), TFC_OK);
    for (int t = 0; t < 7; t++) take(b, (int64_t[B]){0}, B, &done);
    int64_t e, s;
    tfc_batcher_position(b, &e, &s);
    CU_ASSERT(e == 1 && s == 2);
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, B, 99, TFC_BATCHER_SHUFFLE, &c), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_seek(c, e, s), TFC_OK);
    for (int t = 7; t < T; t++) {
        int64_t x[B], y[B];
        int64_t rx = take(b, x, B, &done), ry = take(c, y, B, &done);
        CU_ASSERT(rx == ry && rx == rows[t] && memcmp(x, y, sizeof x[0] * (size_t)rx) == 0);
    }
    tfc_batcher_destroy(c);

    /* out of range */
    CU_ASSERT_EQUAL(tfc_batcher_seek(b, 0, STEPS), TFC_ERR_OUT_OF_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_batcher_errmsg(b), "out of range"));
    CU_ASSERT_EQUAL(tfc_batcher_seek(b, -1, 0), TFC_ERR_OUT_OF_RANGE);
    CU_ASSERT_EQUAL(tfc_batcher_seek(b, 0, -1), TFC_ERR_OUT_OF_RANGE);
    CU_ASSERT_EQUAL(tfc_batcher_seek(b, INT64_MAX / 2, 0), TFC_ERR_OUT_OF_RANGE);
    tfc_batcher_destroy(b);
    ds_free(&d);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* The wait counter: within the time spent in next, grows for an eager consumer of big batches,
 * and stays flat while a slow consumer gives the loader time to prepare the next batch. */
static void test_batcher_wait(void)
{
    enum { N = 4096, ROW = 784 };
    tfc_value *x;
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){N, ROW}), &x), TFC_OK);
    tfc_batcher *b;
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(1, &x, 512, 3, TFC_BATCHER_SHUFFLE, &b), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_wait_seconds(b), 0.0);
    double in_next = 0, prev = 0;
    tfc_value *v;
    for (int i = 0; i < 40; i++) {
        double t0 = now_s();
        CU_ASSERT_EQUAL(tfc_batcher_next(b, &v, NULL), TFC_OK);
        in_next += now_s() - t0;
        double w = tfc_batcher_wait_seconds(b);
        CU_ASSERT(w >= prev);
        prev = w;
    }
    double eager = tfc_batcher_wait_seconds(b);
    CU_ASSERT(eager > 0.0);
    CU_ASSERT(eager <= in_next + 1e-6);
    /* a 30 ms "training step" after each batch: the next one is ready when asked for */
    const double step = 0.03;
    CU_ASSERT_EQUAL(tfc_batcher_next(b, &v, NULL), TFC_OK);
    double before = tfc_batcher_wait_seconds(b);
    for (int i = 0; i < 5; i++) {
        sleep_s(step);
        CU_ASSERT_EQUAL(tfc_batcher_next(b, &v, NULL), TFC_OK);
    }
    double slow = tfc_batcher_wait_seconds(b) - before;
    CU_ASSERT(slow >= 0.0 && slow < step);
    printf("\n  wait: eager %.2f ms over 40 batches (%.2f ms in next), overlapped %.3f ms over 5 ",
           1e3 * eager, 1e3 * in_next, 1e3 * slow);
    tfc_batcher_destroy(b);
    tfc_value_destroy(x);
}

/* Create, take, seek and destroy at random moments of the loader's work (for TSan and ASan);
 * every batch still equals the reference. */
static void test_batcher_races(void)
{
    enum { N = 1000, B = 64, STEPS = 16, T = 3 * STEPS };
    struct ds d;
    ds_make(&d, N);
    tfc_value *big;
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_UINT8, tfc_shape_of(2, (int64_t[]){N, 2000}), &big), TFC_OK);
    tfc_value *src[5] = {d.src[0], d.src[1], d.src[2], d.src[3], big};
    static int64_t ref[T][B];
    tfc_batcher *b;
    int done;
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(5, src, B, 5, TFC_BATCHER_SHUFFLE, &b), TFC_OK);
    for (int t = 0; t < T; t++) take(b, ref[t], B, &done);
    tfc_batcher_destroy(b);

    uint64_t rng = 12345;
    int bad = 0;
    for (int iter = 0; iter < 150; iter++) {
        CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(5, src, B, 5, TFC_BATCHER_SHUFFLE, &b), TFC_OK);
        int t = 0, ops = (int)(rng % 6);
        for (int k = 0; k < ops; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            if ((rng >> 33) % 3 == 0) {
                t = (int)((rng >> 40) % (T - 4));
                tfc_batcher_seek(b, t / STEPS, t % STEPS);
            } else {
                int64_t idx[B];
                int64_t r = take(b, idx, B, &done);
                if (t < T) bad |= r != (t % STEPS == STEPS - 1 ? N % B : B) ||
                                  memcmp(idx, ref[t], sizeof idx[0] * (size_t)r) != 0;
                t++;
            }
        }
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        tfc_batcher_destroy(b); /* possibly while the loader is mid-fill */
    }
    CU_ASSERT(!bad);
    tfc_value_destroy(big);
    ds_free(&d);
}

static void test_batcher_bad_args(void)
{
    struct ds d;
    ds_make(&d, 10);
    tfc_batcher *b = (tfc_batcher *)1;
    tfc_value *scalar, *other, *empty;
    CU_ASSERT_EQUAL_FATAL(tfc_value_scalar(TFC_FLOAT32, 1, &scalar), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){11}), &other), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){0}), &empty), TFC_OK);

    CU_ASSERT_EQUAL(tfc_batcher_create(4, d.src, 3, 0, 0, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_batcher_create(0, d.src, 3, 0, 0, &b), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(b);
    CU_ASSERT_EQUAL(tfc_batcher_create(1, NULL, 3, 0, 0, &b), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_batcher_create(2, (tfc_value *[]){d.src[0], NULL}, 3, 0, 0, &b), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_batcher_create(4, d.src, 0, 0, 0, &b), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_batcher_create(4, d.src, 3, 0, 0x80, &b), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_batcher_create(4, d.src, 11, 0, TFC_BATCHER_DROP_LAST, &b), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "drop_last"));
    CU_ASSERT_EQUAL(tfc_batcher_create(2, (tfc_value *[]){d.src[0], other}, 3, 0, 0, &b), TFC_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "source 1"));
    CU_ASSERT_EQUAL(tfc_batcher_create(2, (tfc_value *[]){d.src[0], scalar}, 3, 0, 0, &b), TFC_ERR_SHAPE);
    CU_ASSERT_EQUAL(tfc_batcher_create(1, &empty, 3, 0, 0, &b), TFC_ERR_SHAPE);
    CU_ASSERT_PTR_NULL(b);

    CU_ASSERT_EQUAL(tfc_batcher_next(NULL, (tfc_value *[1]){0}, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(4, d.src, 3, 0, 0, &b), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_next(b, NULL, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_batcher_errmsg(b), "batch_values"));
    tfc_batcher_destroy(b);
    tfc_batcher_destroy(NULL);
    CU_ASSERT_EQUAL(tfc_batcher_steps_per_epoch(NULL), 0);
    CU_ASSERT_EQUAL(tfc_batcher_seek(NULL, 0, 0), TFC_ERR_INVALID_ARGUMENT);
    tfc_value_destroy(scalar);
    tfc_value_destroy(other);
    tfc_value_destroy(empty);
    ds_free(&d);
}

/* A zero dimension after dimensions whose product overflows int64 (found by tests/fuzz/fuzz_idx):
 * no elements, so a valid empty value, not a count of -1 taken as a size (2^64 - 4 bytes). */
static void test_zero_dim_after_large_dims(void)
{
    static const uint32_t dims[5] = {0xC7000D05u, 0xC7000009u, 0, 0x18C00080u, 0x80000000u};
    int64_t d64[5];
    for (int i = 0; i < 5; i++) d64[i] = dims[i];
    tfc_shape s = tfc_shape_of(5, d64);
    CU_ASSERT_EQUAL(tfc_shape_numel(&s), 0);
    idx_case(0x0D, 5, dims, NULL, 0, TFC_FLOAT32, NULL, 0);

    const char *p = tpath("zero_after_large.npy");
    npy_file(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (3338669317, 3338665993, 0, "
             "415236224, 2147483648), }", NULL, 0);
    tfc_value *v = NULL;
    tfc_status st = tfc_npy_read(p, &v);
    CU_ASSERT_EQUAL(st, TFC_OK);
    if (st) fprintf(stderr, "\n  %s\n", tfc_errmsg());
    if (!v) return;
    tfc_shape got = tfc_value_shape(v);
    CU_ASSERT_EQUAL(got.rank, 5);
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(got.dims[i], d64[i]);
    CU_ASSERT_EQUAL(tfc_value_numel(v), 0);
    CU_ASSERT_EQUAL(tfc_value_nbytes(v), 0);
    tfc_value_destroy(v);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite suite = CU_add_suite("data", suite_init, suite_clean);
    TEST_ADD(test_fashion_train);
    TEST_ADD(test_fashion_t10k);
    TEST_ADD(test_fashion_pipeline);
    TEST_ADD(test_idx_types);
    TEST_ADD(test_idx_bad);
    TEST_ADD(test_npy_roundtrip);
    TEST_ADD(test_npy_numpy_files);
    TEST_ADD(test_npy_bad);
    TEST_ADD(test_zero_dim_after_large_dims);
    TEST_ADD(test_normalize_reshape);
    TEST_ADD(test_batcher_order);
    TEST_ADD(test_batcher_shuffle);
    TEST_ADD(test_batcher_seek);
    TEST_ADD(test_batcher_wait);
    TEST_ADD(test_batcher_races);
    TEST_ADD(test_batcher_bad_args);
    return test_main();
}
