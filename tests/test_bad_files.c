/* test_bad_files.c: bad files through the library's readers, one table row each: idx files
 * (tfc_idx_read), .npy files (tfc_npy_read), and files given as a model store that are no
 * store (tfc_store_open, and loading the graph of a damaged one). Each row asserts the
 * status, a message that names the file and the problem, and that the file's bytes are
 * unchanged (for a store: also no -wal/-shm left, see bad_input.h). StarPU is not started. */
#define _GNU_SOURCE /* nftw in bad_input.h */
#include "testutil.h"
#include <zlib.h>
#include "bad_input.h"
#include "../store/store_testing.h"

enum reader {
    IDX,          /* tfc_idx_read */
    NPY,          /* tfc_npy_read */
    STORE_RO,     /* tfc_store_open read-only */
    STORE_RW,     /* tfc_store_open read-write, without CREATE */
    STORE_CREATE, /* tfc_store_open with CREATE */
    STORE_LOAD,   /* tfc_store_open read-only, then tfc_store_load_graph */
};

enum make {
    RAW,          /* bytes as given */
    GZIP,         /* bytes gzip-compressed; arg > 0 cuts arg bytes off the end, arg < 0
                   * flips the byte at size + arg (-8: the CRC-32 of the trailer) */
    NPY_DICT,     /* "\x93NUMPY", version, header length, bytes as the dict (padded to 64),
                   * then arg zero bytes of data */
    MISSING,      /* no file */
    DIRECTORY,    /* a directory */
    STORE_PREFIX, /* the first arg bytes of a real store */
    STORE_PAGE,   /* a real store whose page 2 (bytes 4096..8191) is overwritten with 0x5a */
    FOREIGN_DB,   /* an SQLite database with a table of its own, no tfc schema */
};

struct file_case {
    const char *what;
    enum reader reader;
    enum make make;
    const char *bytes;
    size_t len;
    long arg;
    tfc_status want;
    const char *msg, *msg2; /* substrings the message must hold (msg2 may be NULL) */
    int pending;
};

#define B(s) s, sizeof(s) - 1
#define NONE NULL, 0
/* an idx header: magic 0x0000 <type> <rank>, then big-endian uint32 dims */
#define IDX_U8_2x3 "\0\0\x08\x02\0\0\0\x02\0\0\0\x03"

static const struct file_case cases[] = {
    /* ---- idx ---- */
    {"idx: missing file", IDX, MISSING, NONE, 0, TFC_ERR_NOT_FOUND, "cannot open",
     "No such file"},
    {"idx: empty file", IDX, RAW, B(""), 0, TFC_ERR_INVALID_ARGUMENT, "empty file", NULL},
    {"idx: a directory", IDX, DIRECTORY, NONE, 0, TFC_ERR_INVALID_ARGUMENT,
     "not a regular file", NULL},
    {"idx: 3 bytes", IDX, RAW, B("\0\0\x08"), 0, TFC_ERR_INVALID_ARGUMENT,
     "truncated header: 3 of the 4 magic bytes", NULL},
    {"idx: wrong magic (text)", IDX, RAW, B("P5 28 28 255\n"), 0, TFC_ERR_INVALID_ARGUMENT,
     "wrong magic 0x50352032", NULL},
    {"idx: wrong magic (a .npy file)", IDX, RAW, B("\x93NUMPY\x01\0v\0{}"), 0,
     TFC_ERR_INVALID_ARGUMENT, "wrong magic", NULL},
    {"idx: unknown element type", IDX, RAW, B("\0\0\x07\x01\0\0\0\x01" "a"), 0,
     TFC_ERR_INVALID_ARGUMENT, "unsupported element type 0x07", NULL},
    {"idx: rank 0", IDX, RAW, B("\0\0\x08\0" "abcd"), 0, TFC_ERR_INVALID_ARGUMENT,
     "rank 0", "outside [1, 8]"},
    {"idx: rank 9", IDX, RAW, B("\0\0\x08\x09\0\0\0\x01"), 0, TFC_ERR_INVALID_ARGUMENT, "rank 9",
     "outside [1, 8]"},
    {"idx: dims cut short", IDX, RAW, B("\0\0\x08\x03\0\0\0\x02\0\0"), 0,
     TFC_ERR_INVALID_ARGUMENT, "truncated header: 6 of the 12 bytes of 3 dims", NULL},
    {"idx: dims whose size overflows", IDX, RAW,
     B("\0\0\x0e\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), 0,
     TFC_ERR_INVALID_ARGUMENT, "too large (the size overflows)", "float64"},
    {"idx: dims of 2^48 bytes in a small file", IDX, RAW,
     B("\0\0\x08\x03\0\x01\0\0\0\x01\0\0\0\x01\0\0" "abc"), 0, TFC_ERR_INVALID_ARGUMENT,
     "truncated data: the header says [65536, 65536, 65536] uint8 (281474976710656 bytes)",
     "holds 3 bytes"},
    {"idx: data shorter than the header says", IDX, RAW, B(IDX_U8_2x3 "abcde"), 0,
     TFC_ERR_INVALID_ARGUMENT, "truncated data", "holds 5 bytes"},
    {"idx: no data at all", IDX, RAW, B(IDX_U8_2x3), 0, TFC_ERR_INVALID_ARGUMENT,
     "truncated data", "holds 0 bytes"},
    {"idx: data longer than the header says", IDX, RAW, B(IDX_U8_2x3 "abcdefg"), 0,
     TFC_ERR_INVALID_ARGUMENT, "trailing data after the 6 elements", NULL},
    {"idx: float32 data not a whole element", IDX, RAW, B("\0\0\x0d\x01\0\0\0\x02" "abcdefg"), 0,
     TFC_ERR_INVALID_ARGUMENT, "truncated data", "[2] float32 (8 bytes)"},
    {"idx: int16 data of an odd length", IDX, RAW, B("\0\0\x0b\x01\0\0\0\x02" "abcde"), 0,
     TFC_ERR_INVALID_ARGUMENT, "trailing data", "int16"},
    {"idx: gzip cut short in the data", IDX, GZIP, B(IDX_U8_2x3 "abcdef"), 12,
     TFC_ERR_INVALID_ARGUMENT, "idx '", "gzip"},
    {"idx: gzip without its trailer", IDX, GZIP, B(IDX_U8_2x3 "abcdef"), 8,
     TFC_ERR_INVALID_ARGUMENT, "idx '", "gzip"},
    {"idx: gzip with a wrong CRC", IDX, GZIP, B(IDX_U8_2x3 "abcdef"), -8,
     TFC_ERR_INVALID_ARGUMENT, "corrupt gzip data", "incorrect data check"},
    {"idx: gzip of a wrong magic", IDX, GZIP, B("\x1f\x8b\x08\x02" "abcdef"), 0,
     TFC_ERR_INVALID_ARGUMENT, "wrong magic 0x1f8b0802", NULL},
    {"idx: gzip of a short header", IDX, GZIP, B("\0\0"), 0, TFC_ERR_INVALID_ARGUMENT,
     "truncated header: 2 of the 4 magic bytes", NULL},
    {"idx: gzip claiming more than deflate can hold", IDX, GZIP,
     B("\0\0\x08\x02\x7f\xff\xff\xff\x7f\xff\xff\xff" "abc"), 0, TFC_ERR_INVALID_ARGUMENT,
     "more than a gzip file of", NULL},
    {"idx: gzip with data shorter than the header", IDX, GZIP, B(IDX_U8_2x3 "ab"), 0,
     TFC_ERR_INVALID_ARGUMENT, "truncated data", "holds 2"},
    {"idx: gzip with trailing data", IDX, GZIP, B(IDX_U8_2x3 "abcdefgh"), 0,
     TFC_ERR_INVALID_ARGUMENT, "trailing data after the 6 elements", NULL},
    /* ---- npy ---- */
    {"npy: missing file", NPY, MISSING, NONE, 0, TFC_ERR_NOT_FOUND, "cannot open",
     "No such file"},
    {"npy: empty file", NPY, RAW, B(""), 0, TFC_ERR_INVALID_ARGUMENT, "empty file", NULL},
    {"npy: a directory", NPY, DIRECTORY, NONE, 0, TFC_ERR_INVALID_ARGUMENT,
     "not a regular file", NULL},
    {"npy: wrong magic", NPY, RAW, B("\x93NUMPX\x01\0\x10\0"), 0, TFC_ERR_INVALID_ARGUMENT,
     "wrong magic", "\\x93NUMPY"},
    {"npy: an idx file", NPY, RAW, B(IDX_U8_2x3 "abcdef"), 0, TFC_ERR_INVALID_ARGUMENT,
     "wrong magic", NULL},
    {"npy: magic only", NPY, RAW, B("\x93NUM"), 0, TFC_ERR_INVALID_ARGUMENT,
     "truncated header: 4 of the 8 bytes", NULL},
    {"npy: format version 4.0", NPY, RAW, B("\x93NUMPY\x04\0\x10\0"), 0,
     TFC_ERR_INVALID_ARGUMENT, "unsupported format version 4.0", NULL},
    {"npy: header length missing", NPY, RAW, B("\x93NUMPY\x01\0"), 0, TFC_ERR_INVALID_ARGUMENT,
     "the header length is missing", NULL},
    {"npy: header length past the end", NPY, RAW, B("\x93NUMPY\x01\0\xff\xff{}"), 0,
     TFC_ERR_INVALID_ARGUMENT, "truncated header: it says 65535 bytes", NULL},
    {"npy: a 4 GiB header length (format 2.0)", NPY, RAW, B("\x93NUMPY\x02\0\xff\xff\xff\xff{}"),
     0, TFC_ERR_INVALID_ARGUMENT, "truncated header: it says 4294967295 bytes", NULL},
    {"npy: header that is no dict", NPY, NPY_DICT, B("[1, 2, 3]"), 0, TFC_ERR_INVALID_ARGUMENT,
     "bad header", "expected '{'"},
    {"npy: header that is empty", NPY, NPY_DICT, B(""), 0, TFC_ERR_INVALID_ARGUMENT,
     "bad header", "expected '{'"},
    {"npy: dict without descr", NPY, NPY_DICT, B("{'fortran_order': False, 'shape': (2,), }"),
     8, TFC_ERR_INVALID_ARGUMENT, "lacks 'descr'", NULL},
    {"npy: dict without shape", NPY, NPY_DICT, B("{'descr': '<f4', 'fortran_order': False}"), 8,
     TFC_ERR_INVALID_ARGUMENT, "lacks 'shape'", NULL},
    {"npy: dict with an unknown key", NPY, NPY_DICT,
     B("{'descr': '<f4', 'order': 'C', 'fortran_order': False, 'shape': (2,)}"), 8,
     TFC_ERR_INVALID_ARGUMENT, "unexpected key 'order'", NULL},
    {"npy: dict not closed", NPY, NPY_DICT, B("{'descr': '<f4', 'fortran_order': False"), 8,
     TFC_ERR_INVALID_ARGUMENT, "bad header", "'}'"},
    {"npy: text after the dict", NPY, NPY_DICT,
     B("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} extra"), 8,
     TFC_ERR_INVALID_ARGUMENT, "unexpected text after the header dict", NULL},
    {"npy: unterminated string", NPY, RAW, B("\x93NUMPY\x01\0\x0c\0{'descr': 'b"), 0,
     TFC_ERR_INVALID_ARGUMENT, "bad header", "unterminated string"},
    {"npy: a descr longer than 31 characters", NPY, NPY_DICT,
     B("{'descr': '<f4444444444444444444444444444444444', 'fortran_order': False}"), 8,
     TFC_ERR_INVALID_ARGUMENT, "bad header", "a string longer than 31 characters at offset 10"},
    {"npy: a key that is no string", NPY, NPY_DICT, B("{descr: '<f4'}"), 8,
     TFC_ERR_INVALID_ARGUMENT, "bad header", "expected a quoted string"},
    {"npy: escaped string", NPY, NPY_DICT,
     B("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,)}"), 8,
     TFC_ERR_INVALID_ARGUMENT, "an escaped string at offset", NULL},
    {"npy: fortran order", NPY, NPY_DICT, B("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }"),
     16, TFC_ERR_INVALID_ARGUMENT, "fortran_order True is not supported", NULL},
    {"npy: fortran_order neither True nor False", NPY, NPY_DICT,
     B("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }"), 8, TFC_ERR_INVALID_ARGUMENT,
     "fortran_order is neither True nor False", NULL},
    {"npy: big-endian float32", NPY, NPY_DICT,
     B("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }"), 8,
     TFC_ERR_INVALID_ARGUMENT, "unsupported dtype '>f4', big-endian", NULL},
    {"npy: float16", NPY, NPY_DICT, B("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }"),
     4, TFC_ERR_INVALID_ARGUMENT, "unsupported dtype '<f2'", "<f4"},
    {"npy: complex64", NPY, NPY_DICT, B("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }"),
     16, TFC_ERR_INVALID_ARGUMENT, "unsupported dtype '<c8'", NULL},
    {"npy: an object array", NPY, NPY_DICT, B("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }"),
     16, TFC_ERR_INVALID_ARGUMENT, "unsupported dtype '|O'", NULL},
    {"npy: a structured dtype", NPY, NPY_DICT,
     B("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }"), 8,
     TFC_ERR_INVALID_ARGUMENT, "bad header", "quoted string"},
    {"npy: shape that is no tuple", NPY, NPY_DICT,
     B("{'descr': '<f4', 'fortran_order': False, 'shape': 2, }"), 8, TFC_ERR_INVALID_ARGUMENT,
     "bad header", "expected '('"},
    {"npy: negative dimension", NPY, NPY_DICT,
     B("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2), }"), 8,
     TFC_ERR_INVALID_ARGUMENT, "shape: expected a non-negative integer", NULL},
    {"npy: dimension beyond int64", NPY, NPY_DICT,
     B("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"), 8,
     TFC_ERR_INVALID_ARGUMENT, "a dimension overflows int64", NULL},
    {"npy: dimensions whose size overflows", NPY, NPY_DICT,
     B("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }"),
     8, TFC_ERR_INVALID_ARGUMENT, "too large (the size overflows)", "'<f8'"},
    {"npy: nine dimensions", NPY, NPY_DICT,
     B("{'descr': '|u1', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }"), 1,
     TFC_ERR_INVALID_ARGUMENT, "more than 8 dims", NULL},
    {"npy: dimensions without a comma", NPY, NPY_DICT,
     B("{'descr': '<f4', 'fortran_order': False, 'shape': (2 2), }"), 16,
     TFC_ERR_INVALID_ARGUMENT, "shape: expected ',' or ')'", NULL},
    {"npy: data shorter than the header says", NPY, NPY_DICT,
     B("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), 20,
     TFC_ERR_INVALID_ARGUMENT, "truncated data", "[2, 3] '<f4' (24 bytes) but the file holds 20"},
    {"npy: data longer than the header says", NPY, NPY_DICT,
     B("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }"), 17,
     TFC_ERR_INVALID_ARGUMENT, "wrong size: 17 bytes of data", "takes 16"},
    {"npy: a shape of 2^60 elements", NPY, NPY_DICT,
     B("{'descr': '|u1', 'fortran_order': False, 'shape': (1152921504606846976,), }"), 4,
     TFC_ERR_INVALID_ARGUMENT, "truncated data", "1152921504606846976 bytes"},
    /* ---- files given as a store ---- */
    {"store: missing, read-only", STORE_RO, MISSING, NONE, 0, TFC_ERR_NOT_FOUND,
     "does not exist", NULL},
    {"store: missing, read-write without create", STORE_RW, MISSING, NONE, 0, TFC_ERR_NOT_FOUND,
     "does not exist", "TFC_STORE_CREATE"},
    {"store: create in a missing directory", STORE_CREATE, MISSING, NONE, 1, TFC_ERR_STORE,
     "nodir", "cannot open"},
    {"store: a directory", STORE_RO, DIRECTORY, NONE, 0, TFC_ERR_STORE, "is a directory", NULL},
    {"store: a directory, with create", STORE_CREATE, DIRECTORY, NONE, 0, TFC_ERR_STORE,
     "is a directory", NULL},
    {"store: empty file, read-only", STORE_RO, RAW, B(""), 0, TFC_ERR_STORE,
     "an empty file (0 bytes), not a model store", NULL},
    {"store: text file, read-only", STORE_RO, RAW,
     B("not a database, just text, long enough to be read as a header by SQLite\n"), 0,
     TFC_ERR_STORE, "not an SQLite database", NULL},
    {"store: text file, read-write", STORE_RW, RAW,
     B("not a database, just text, long enough to be read as a header by SQLite\n"), 0,
     TFC_ERR_STORE, "not an SQLite database", NULL},
    {"store: text file, with create", STORE_CREATE, RAW,
     B("not a database, just text, long enough to be read as a header by SQLite\n"), 0,
     TFC_ERR_STORE, "not an SQLite database", NULL},
    {"store: an idx file", STORE_RO, RAW, B(IDX_U8_2x3 "abcdef"), 0, TFC_ERR_STORE,
     "not an SQLite database", NULL},
    {"store: the SQLite header only", STORE_RO, STORE_PREFIX, NONE, 100, TFC_ERR_STORE,
     "store '", "truncated", 0},
    {"store: a store cut after its first page, read-only", STORE_RO, STORE_PREFIX, NONE, 4096,
     TFC_ERR_STORE, "store '", "truncated", 0},
    {"store: a store cut after its first page, read-write", STORE_RW, STORE_PREFIX, NONE, 4096,
     TFC_ERR_STORE, "store '", "truncated", 0},
    {"store: a page overwritten", STORE_LOAD, STORE_PAGE, NONE, 0, TFC_ERR_STORE, "store '",
     "corrupted", 0},
    {"store: another program's SQLite database, read-only", STORE_RO, FOREIGN_DB, NONE, 0,
     TFC_ERR_STORE, "an SQLite database, but not a tfc model store", NULL},
    {"store: another program's SQLite database, read-write", STORE_RW, FOREIGN_DB, NONE, 0,
     TFC_ERR_STORE, "an SQLite database, but not a tfc model store", NULL},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static char base_store[PATH_MAX];

/* A small real store: one graph of two nodes, no checkpoint. */
static int write_base_store(const char *path)
{
    tfc_graph *g;
    tfc_store *st;
    if (tfc_graph_create(&g)) return -1;
    tfc_relu(g, tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){-1})));
    int rc = tfc_store_open(path, TFC_STORE_CREATE, &st);
    if (!rc) {
        rc = tfc_store_save_graph(st, g);
        tfc_store_close(st);
    }
    tfc_graph_destroy(g);
    return rc ? -1 : 0;
}

/* An SQLite database of someone else: a store emptied of our tables and version. */
static int write_foreign_db(const char *path)
{
    tfc_store *st;
    if (bad_copy_file(base_store, path) || tfc_store_open(path, 0, &st)) return -1;
    int rc = tfc_store_exec_sql(st, "PRAGMA foreign_keys = OFF; CREATE TABLE photos(id, name);"
                                    "INSERT INTO photos VALUES (1, 'cat.jpg');"
                                    "DROP TABLE node_inputs; DROP TABLE node_controls; "
                                    "DROP TABLE node_data; DROP TABLE nodes; DROP TABLE graph; "
                                    "DROP TABLE signature_tensors; DROP TABLE signatures; "
                                    "DROP TABLE variable_chunks; DROP TABLE variables; "
                                    "DROP TABLE checkpoints; DROP TABLE metrics; DROP TABLE meta; "
                                    "PRAGMA user_version = 0");
    tfc_store_close(st);
    return rc ? -1 : 0;
}

static int write_gzip(const char *path, const struct file_case *c)
{
    gzFile gz = gzopen(path, "wb");
    if (!gz || gzwrite(gz, c->bytes, (unsigned)c->len) != (int)c->len || gzclose(gz) != Z_OK)
        return -1;
    struct stat sb;
    if (stat(path, &sb)) return -1;
    if (c->arg > 0) return truncate(path, sb.st_size - c->arg);
    if (c->arg < 0) {
        size_t n;
        unsigned char *b = bad_read_file(path, &n);
        if (!b) return -1;
        b[(long)n + c->arg] ^= 0xff;
        int rc = bad_write_file(path, b, n);
        free(b);
        return rc;
    }
    return 0;
}

/* "\x93NUMPY", version 1.0, the header length, the dict padded with blanks to a multiple of
 * 64 bytes and ended by a newline (as NumPy writes it), then c->arg zero bytes of data. */
static int write_npy(const char *path, const struct file_case *c)
{
    size_t hlen = (10 + c->len + 1 + 63) / 64 * 64 - 10, n = 10 + hlen + (size_t)c->arg;
    unsigned char *b = calloc(n, 1);
    if (!b) return -1;
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(hlen & 0xff);
    b[9] = (unsigned char)(hlen >> 8);
    memset(b + 10, ' ', hlen - 1);
    memcpy(b + 10, c->bytes, c->len);
    b[10 + hlen - 1] = '\n';
    int rc = bad_write_file(path, b, n);
    free(b);
    return rc;
}

/* Makes the case's file at path (nothing for MISSING). */
static int make_file(const char *path, const struct file_case *c)
{
    size_t n;
    unsigned char *b;
    int rc;
    switch (c->make) {
    case RAW: return bad_write_file(path, c->bytes, c->len);
    case GZIP: return write_gzip(path, c);
    case NPY_DICT: return write_npy(path, c);
    case MISSING: return 0;
    case DIRECTORY: return mkdir(path, 0755);
    case STORE_PREFIX:
        if (!(b = bad_read_file(base_store, &n)) || n < (size_t)c->arg) return free(b), -1;
        rc = bad_write_file(path, b, (size_t)c->arg);
        free(b);
        return rc;
    case STORE_PAGE:
        if (!(b = bad_read_file(base_store, &n)) || n < 8192) return free(b), -1;
        memset(b + 4096, 0x5a, 4096);
        rc = bad_write_file(path, b, n);
        free(b);
        return rc;
    case FOREIGN_DB: return write_foreign_db(path);
    }
    return -1;
}

/* Reads path as the case says; the message into msg. */
static tfc_status attempt(const struct file_case *c, const char *path, char *msg, size_t len)
{
    tfc_value *v = NULL;
    tfc_store *st = NULL;
    tfc_graph *g = NULL;
    tfc_status s = TFC_OK;
    static const unsigned flags[] = {[STORE_RO] = TFC_STORE_READONLY, [STORE_RW] = 0,
                                     [STORE_CREATE] = TFC_STORE_CREATE,
                                     [STORE_LOAD] = TFC_STORE_READONLY};
    switch (c->reader) {
    case IDX: s = tfc_idx_read(path, &v); break;
    case NPY: s = tfc_npy_read(path, &v); break;
    default: s = tfc_store_open(path, flags[c->reader], &st); break;
    }
    snprintf(msg, len, "%s", s ? tfc_errmsg() : "(no error)");
    if (!s && c->reader == STORE_LOAD && (s = tfc_store_load_graph(st, &g)))
        snprintf(msg, len, "%s", tfc_store_errmsg(st));
    if (!s && (v == NULL) != (c->reader != IDX && c->reader != NPY)) s = TFC_ERR_INTERNAL;
    tfc_graph_destroy(g);
    tfc_store_close(st);
    tfc_value_destroy(v);
    return s;
}

static int is_store(const struct file_case *c)
{
    return c->reader != IDX && c->reader != NPY;
}

/* Runs case i; 1 when it counts as a failure. */
static int run_case(int i, const struct file_case *c)
{
    char name[64], msg[1024] = "";
    if (c->reader == STORE_CREATE && c->make == MISSING)
        snprintf(name, sizeof name, "nodir/case-%03d", i);
    else
        snprintf(name, sizeof name, "case-%03d", i);
    const char *path = bad_path(name);
    if (make_file(path, c))
        return bad_verdict("files", i, c->what, 0, 0, "could not make the file");
    size_t n = 0;
    unsigned char *before = c->make == MISSING || c->make == DIRECTORY ? NULL
                                                                       : bad_read_file(path, &n);
    tfc_status s = attempt(c, path, msg, sizeof msg);
    struct stat sb;
    int same = before ? bad_same_bytes(path, before, n)
                      : c->make == DIRECTORY || stat(path, &sb) != 0; /* nothing created */
    int wal_ok = !is_store(c) || bad_check_wal_shm(path);
    int names_file = strstr(msg, name) != NULL;
    int msg_ok = strstr(msg, c->msg) && (!c->msg2 || strstr(msg, c->msg2)) && names_file;
    int passed = s == c->want && msg_ok && same && wal_ok;
    free(before);
    if (c->make == DIRECTORY) rmdir(path);
    else bad_remove_store(path);
    return bad_verdict("files", i, c->what, c->pending, passed, "%s%s%s%s%s[%s] %s",
                       s != c->want ? "WRONG STATUS " : "",
                       !msg_ok ? "MESSAGE LACKS THE PROBLEM " : "",
                       !names_file ? "OR THE FILE " : "", !same ? "FILE CHANGED " : "",
                       !wal_ok ? "-wal/-shm LEFT " : "", tfc_status_string(s), msg);
}

/* The harness: the base store opens and loads, and each reader takes a good file. */
static void test_good_files(void)
{
    const char *p = bad_path("good.npy");
    tfc_value *v = NULL, *w = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_value_scalar(TFC_FLOAT32, 2.5, &v), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(p, v), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_read(p, &w), TFC_OK);
    tfc_value_destroy(v);
    tfc_value_destroy(w);
    static const struct file_case idx_ok = {"idx", IDX, GZIP, B(IDX_U8_2x3 "abcdef")};
    p = bad_path("good.idx.gz");
    CU_ASSERT_EQUAL(write_gzip(p, &idx_ok), 0);
    CU_ASSERT_EQUAL(tfc_idx_read(p, &v), TFC_OK);
    tfc_value_destroy(v);
    tfc_store *st;
    tfc_graph *g = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(base_store, TFC_STORE_READONLY, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_load_graph(st, &g), TFC_OK);
    tfc_graph_destroy(g);
    tfc_store_close(st);
    bad_check_wal_shm(base_store);
}

static void test_bad_files(void)
{
    int failed = 0;
    printf("\n");
    for (int i = 0; i < N_CASES; i++) failed += run_case(i, &cases[i]);
    bad_summary("test_bad_files");
    CU_ASSERT_EQUAL(failed, 0);
}

static int suite_init(void)
{
    if (bad_dir_create("tfc-bad-files")) return -1;
    snprintf(base_store, sizeof base_store, "%s", bad_path("base.db"));
    return write_base_store(base_store);
}

static int suite_clean(void)
{
    bad_dir_remove();
    return 0;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("bad files", suite_init, suite_clean);
    TEST_ADD(test_good_files);
    TEST_ADD(test_bad_files);
    return test_main();
}
