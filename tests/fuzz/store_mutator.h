/* store_mutator.h: a libFuzzer custom mutator for the store targets. Flipping bytes of an
 * SQLite file mostly breaks its b-trees (SQLite then reports the file as corrupt, which is
 * worth fuzzing too, and is one mutation in four here); a longer or shorter text in a row,
 * such as "shape=[2]" growing into "shape=[99999999999]", needs the file rewritten. So the
 * other three in four open the input as an in-memory database (sqlite3_deserialize), change
 * one value of one row of the columns the target names (its text or blob mutated by
 * libFuzzer, an integer or real set to an edge value), delete or copy a row, half the time
 * give the data chunks the CRC-32 of their new bytes (so that changed data gets past the CRC
 * check to the size checks), and write the database back out (sqlite3_serialize). A target
 * defines LLVMFuzzerCustomMutator as a call of fuzz_store_mutate with its columns. */
#ifndef TFC_FUZZ_STORE_MUTATOR_H
#define TFC_FUZZ_STORE_MUTATOR_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

struct fuzz_column {
    const char *table, *column;
};

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static uint64_t mut_rng(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull; /* splitmix64 */
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const int64_t mut_edges[] = {0, 1, -1, 2, 7, 255, 256, 65536, INT32_MAX,
                                    (int64_t)INT32_MAX + 1, INT64_MAX, INT64_MIN,
                                    (int64_t)1 << 40, -(int64_t)1 << 40, (int64_t)1 << 62};

static int mut_digit(char c) { return c >= '0' && c <= '9'; }
static int mut_run_starts(const char *t, int i) { return mut_digit(t[i]) && (!i || !mut_digit(t[i - 1])); }

/* Text with one run of digits (a dimension, an axis, an output index) replaced by an edge
 * value; 0 when it has none. */
static int mut_number_in_text(sqlite3_stmt *q, const char *text, int n, uint64_t *rng)
{
    int runs = 0;
    for (int i = 0; i < n; i++) runs += mut_run_starts(text, i);
    if (!runs) return 0;
    int pick = (int)(mut_rng(rng) % (uint64_t)runs), at = -1, end;
    for (int i = 0; i < n && at < 0; i++)
        if (mut_run_starts(text, i) && !pick--) at = i;
    for (end = at; end < n && mut_digit(text[end]); end++) {}
    char num[32], *buf = malloc((size_t)n + sizeof num);
    if (!buf) return 0;
    int len = snprintf(num, sizeof num, "%lld",
                       (long long)mut_edges[mut_rng(rng) % (sizeof mut_edges / sizeof *mut_edges)]);
    memcpy(buf, text, (size_t)at);
    memcpy(buf + at, num, (size_t)len);
    memcpy(buf + at + len, text + end, (size_t)(n - end));
    sqlite3_bind_text(q, 1, buf, at + len + n - end, SQLITE_TRANSIENT);
    free(buf);
    return 1;
}

/* A value of old's type, changed: text and blobs through libFuzzer's own mutations (or, for
 * text, a number in it set to an edge value), numbers to edge values or a small step away.
 * Binds it as parameter 1 of q. */
static void mut_bind_new(sqlite3_stmt *q, sqlite3_value *old, uint64_t *rng)
{
    const int64_t *edges = mut_edges;
    int type = sqlite3_value_type(old);
    if (type == SQLITE_TEXT && mut_rng(rng) % 3 == 0 &&
        mut_number_in_text(q, (const char *)sqlite3_value_text(old), sqlite3_value_bytes(old),
                           rng))
        return;
    if (type == SQLITE_TEXT || type == SQLITE_BLOB) {
        int n = sqlite3_value_bytes(old);
        size_t cap = (size_t)n * 2 + 64;
        uint8_t *buf = malloc(cap);
        if (!buf) return;
        if (n) memcpy(buf, type == SQLITE_TEXT ? sqlite3_value_text(old) : sqlite3_value_blob(old),
                      (size_t)n);
        size_t m = LLVMFuzzerMutate(buf, (size_t)n, cap);
        if (type == SQLITE_TEXT) sqlite3_bind_text(q, 1, (const char *)buf, (int)m, SQLITE_TRANSIENT);
        else sqlite3_bind_blob(q, 1, buf, (int)m, SQLITE_TRANSIENT);
        free(buf);
        return;
    }
    int64_t v = sqlite3_value_int64(old);
    switch (mut_rng(rng) % 4) {
    case 0: v = edges[mut_rng(rng) % (sizeof mut_edges / sizeof *mut_edges)]; break;
    case 1: v = (int64_t)((uint64_t)v + mut_rng(rng) % 5 - 2); break; /* wraps */
    case 2: v = (int64_t)mut_rng(rng); break;
    default: sqlite3_bind_null(q, 1); return;
    }
    if (type == SQLITE_FLOAT && mut_rng(rng) % 2) sqlite3_bind_double(q, 1, (double)v / 3);
    else sqlite3_bind_int64(q, 1, v);
}

/* One change to one row of table.column in db; nonzero when nothing changed. */
static int mut_row(sqlite3 *db, const struct fuzz_column *c, uint64_t *rng)
{
    char sql[256];
    sqlite3_stmt *q;
    int64_t n = 0;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", c->table);
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) return -1;
    if (sqlite3_step(q) == SQLITE_ROW) n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    if (n <= 0) return -1;
    snprintf(sql, sizeof sql, "SELECT %s FROM %s LIMIT 1 OFFSET %lld", c->column, c->table,
             (long long)(mut_rng(rng) % (uint64_t)n));
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) return -1;
    int rc = -1;
    if (sqlite3_step(q) == SQLITE_ROW) {
        sqlite3_value *old = sqlite3_value_dup(sqlite3_column_value(q, 0));
        sqlite3_stmt *u = NULL;
        unsigned what = (unsigned)(mut_rng(rng) % 8);
        /* 0: delete the row, 1: copy it (where no key forbids), else: change the value */
        if (what == 0)
            snprintf(sql, sizeof sql, "DELETE FROM %s WHERE %s IS ?2", c->table, c->column);
        else if (what == 1)
            snprintf(sql, sizeof sql, "INSERT INTO %s SELECT * FROM %s WHERE %s IS ?2 LIMIT 1",
                     c->table, c->table, c->column);
        else
            snprintf(sql, sizeof sql, "UPDATE %s SET %s = ?1 WHERE %s IS ?2", c->table,
                     c->column, c->column);
        if (old && sqlite3_prepare_v2(db, sql, -1, &u, NULL) == SQLITE_OK) {
            if (what >= 2) mut_bind_new(u, old, rng);
            sqlite3_bind_value(u, 2, old);
            rc = sqlite3_step(u) == SQLITE_DONE && sqlite3_changes(db) > 0 ? 0 : -1;
        }
        sqlite3_finalize(u);
        sqlite3_value_free(old);
    }
    sqlite3_finalize(q);
    return rc;
}

/* fuzz_crc32(blob): the CRC-32 the store keeps with each chunk. */
static void mut_crc32(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const void *p = sqlite3_value_blob(argv[0]);
    int n = sqlite3_value_bytes(argv[0]);
    sqlite3_result_int64(ctx, (sqlite3_int64)crc32_z(0, p, p ? (size_t)n : 0));
}

/* The input as a database, changed by mut_row; 0 when it is not one (or nothing changed). */
static size_t mut_database(uint8_t *data, size_t size, size_t max_size, uint64_t *rng,
                           const struct fuzz_column *cols, size_t n_cols)
{
    sqlite3 *db;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
        sqlite3_close(db);
        return 0;
    }
    size_t out = 0;
    unsigned char *img = sqlite3_malloc64(size ? size : 1);
    if (img) {
        memcpy(img, data, size);
        int rc = sqlite3_deserialize(db, "main", img, (sqlite3_int64)size, (sqlite3_int64)size,
                                     SQLITE_DESERIALIZE_FREEONCLOSE |
                                         SQLITE_DESERIALIZE_RESIZEABLE);
        int changed = 0;
        for (int tries = 0; rc == SQLITE_OK && tries < 4 && !changed; tries++)
            changed = !mut_row(db, &cols[mut_rng(rng) % n_cols], rng);
        if (changed && mut_rng(rng) % 2 &&
            sqlite3_create_function(db, "fuzz_crc32", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                                    NULL, mut_crc32, NULL, NULL) == SQLITE_OK) {
            sqlite3_exec(db, "UPDATE node_data SET crc32 = fuzz_crc32(data)", NULL, NULL, NULL);
            sqlite3_exec(db, "UPDATE variable_chunks SET crc32 = fuzz_crc32(data)", NULL, NULL,
                         NULL);
        }
        sqlite3_int64 n = 0;
        unsigned char *ser = changed ? sqlite3_serialize(db, "main", &n, 0) : NULL;
        if (ser && n > 0 && (size_t)n <= max_size) {
            memcpy(data, ser, (size_t)n);
            out = (size_t)n;
        }
        sqlite3_free(ser);
    }
    sqlite3_close(db);
    return out;
}

/* The body of a target's LLVMFuzzerCustomMutator: cols are the (table, column) pairs whose
 * rows it changes. */
static size_t fuzz_store_mutate(uint8_t *data, size_t size, size_t max_size, unsigned int seed,
                                const struct fuzz_column *cols, size_t n_cols)
{
    uint64_t rng = seed;
    if (mut_rng(&rng) % 4) {
        size_t n = mut_database(data, size, max_size, &rng, cols, n_cols);
        if (n) return n;
    }
    return LLVMFuzzerMutate(data, size, max_size);
}

#endif
