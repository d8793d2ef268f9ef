/* bad_input.h: what the table-driven bad-input programs share (tests/test_bad_store_rows.c,
 * test_bad_files.c, test_bad_flags.c): a scratch directory, whole files as bytes (to show that
 * a read-only use changed nothing), the -wal/-shm check, and one verdict line per table row
 * ("ok", "FAIL", or "XFAIL" for a row marked pending: a known defect in code another engineer
 * owns, reported without failing the program). */
#ifndef TFC_BAD_INPUT_H
#define TFC_BAD_INPUT_H

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char bad_dir[PATH_MAX];
static int bad_n_ok, bad_n_fail, bad_n_xfail, bad_n_xpass;

static int bad_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* A fresh scratch directory under $TMPDIR (or /tmp) named after the program. */
static int bad_dir_create(const char *prog)
{
    const char *base = getenv("TMPDIR");
    snprintf(bad_dir, sizeof bad_dir, "%s/%s-XXXXXX", base && *base ? base : "/tmp", prog);
    return mkdtemp(bad_dir) ? 0 : -1;
}

static void bad_dir_remove(void)
{
    if (bad_dir[0]) nftw(bad_dir, bad_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* bad_dir/name in one of 8 rotating buffers. */
static const char *bad_path(const char *name)
{
    static char buf[8][2 * PATH_MAX];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 2 * PATH_MAX, "%s/%s", bad_dir, name);
    return p;
}

/* The whole file (malloc'd, *n bytes and a NUL after them), or NULL when it cannot be read. */
static unsigned char *bad_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 65536;
            unsigned char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = b;
        }
        size_t got = fread(buf + *n, 1, cap - *n, f);
        *n += got;
        if (got == 0) break;
    }
    fclose(f);
    buf[*n] = 0; /* the loop ends with *n < cap */
    return buf;
}

static int bad_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static int bad_copy_file(const char *from, const char *to)
{
    size_t n;
    unsigned char *b = bad_read_file(from, &n);
    int rc = b ? bad_write_file(to, b, n) : -1;
    free(b);
    return rc;
}

/* Whether the file now holds exactly these bytes. */
static int bad_same_bytes(const char *path, const unsigned char *before, size_t n)
{
    size_t m;
    unsigned char *now = bad_read_file(path, &m);
    int same = now && m == n && (n == 0 || memcmp(now, before, n) == 0);
    free(now);
    return same;
}

static void bad_remove_store(const char *path)
{
    char b[PATH_MAX + 8];
    unlink(path);
    snprintf(b, sizeof b, "%s-wal", path);
    unlink(b);
    snprintf(b, sizeof b, "%s-shm", path);
    unlink(b);
}

/* Whether a -wal or -shm file lies beside path. */
static int bad_wal_shm_left(const char *path)
{
    char b[PATH_MAX + 8];
    struct stat sb;
    snprintf(b, sizeof b, "%s-wal", path);
    int left = stat(b, &sb) == 0;
    snprintf(b, sizeof b, "%s-shm", path);
    return left || stat(b, &sb) == 0;
}

/* The -wal/-shm check of a read-only use (the store must stay one file): 1 when it passes.
 * Leftover files are removed either way, so that the next case starts clean. */
static int bad_check_wal_shm(const char *path)
{
    int left = bad_wal_shm_left(path);
    if (left) {
        char b[PATH_MAX + 8];
        snprintf(b, sizeof b, "%s-wal", path);
        unlink(b);
        snprintf(b, sizeof b, "%s-shm", path);
        unlink(b);
    }
    return !left;
}

/* Records the verdict of one table row and prints it: passed is whether every check held;
 * pending rows that fail are XFAIL (not a failure), pending rows that pass are XPASS (a
 * failure: the row's mark should go). why says what went wrong. Returns 1 when the row
 * counts as a failure. */
static int bad_verdict(const char *table, int i, const char *what, int pending, int passed,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int bad_verdict(const char *table, int i, const char *what, int pending, int passed,
                       const char *fmt, ...)
{
    char why[2048] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const char *tag = passed ? (pending ? "XPASS" : "ok") : (pending ? "XFAIL" : "FAIL");
    printf("  %-5s %s %3d: %s%s%s\n", tag, table, i, what, *why ? ": " : "", why);
    if (passed && !pending) bad_n_ok++;
    else if (!passed && pending) bad_n_xfail++;
    else if (passed) bad_n_xpass++;
    else bad_n_fail++;
    return (passed && pending) || (!passed && !pending);
}

/* The totals, once at the end; the program's result is bad_n_fail + bad_n_xpass == 0. */
static void bad_summary(const char *prog)
{
    printf("%s: %d ok, %d FAIL, %d XFAIL (pending), %d XPASS\n", prog, bad_n_ok, bad_n_fail,
           bad_n_xfail, bad_n_xpass);
}

#endif
