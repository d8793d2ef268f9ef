/* schema.c: the store's schema, versioned with PRAGMA user_version, and the forward
 * migrations. migrations[i] takes a store from version i to i + 1; a new version appends one
 * entry (SQL, or a function for data rewrites) and never edits an old one, so stores of every
 * earlier version (tests/data keeps some) open and migrate in one transaction. */
#include <stdlib.h>
#include <string.h>
#include "store_internal.h"

/* Version 1. Tensor data is little-endian, row-major, in chunks of at most 64 MiB with a
 * CRC-32 each; shapes are JSON arrays ("[2,3]", "[]" for a scalar); uint64 seeds are stored
 * as the int64 of the same bits; times are seconds since the epoch. */
static const char schema_v1[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;\n"
    "INSERT INTO meta VALUES ('format', 'tfc-store'), ('created', julianday('now'));\n"
    /* the graph: one row; every node with its op, attributes, inputs and control edges */
    "CREATE TABLE graph(id INTEGER PRIMARY KEY CHECK (id = 1), seed INTEGER NOT NULL,\n"
    "  n_nodes INTEGER NOT NULL, saved REAL NOT NULL);\n"
    "CREATE TABLE nodes(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, op TEXT NOT NULL,\n"
    "  attrs TEXT NOT NULL, init TEXT, init_a REAL, init_b REAL, init_seed INTEGER);\n"
    "CREATE TABLE node_inputs(node INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,\n"
    "  pos INTEGER NOT NULL, tensor TEXT NOT NULL, PRIMARY KEY (node, pos)) WITHOUT ROWID;\n"
    "CREATE TABLE node_controls(node INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,\n"
    "  pos INTEGER NOT NULL, control TEXT NOT NULL, PRIMARY KEY (node, pos)) WITHOUT ROWID;\n"
    "CREATE TABLE node_data(node INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL, crc32 INTEGER NOT NULL, data BLOB NOT NULL, UNIQUE (node, seq));\n"
    /* signatures: feeds, outputs and metrics by tensor name, in order */
    "CREATE TABLE signatures(name TEXT PRIMARY KEY, loss TEXT, train_op TEXT);\n"
    "CREATE TABLE signature_tensors(\n"
    "  signature TEXT NOT NULL REFERENCES signatures(name) ON DELETE CASCADE,\n"
    "  role TEXT NOT NULL CHECK (role IN ('feed', 'output', 'metric')),\n"
    "  pos INTEGER NOT NULL, tensor TEXT NOT NULL, PRIMARY KEY (signature, role, pos))\n"
    "  WITHOUT ROWID;\n"
    /* checkpoints: every variable (optimizer slots and the global step included) */
    "CREATE TABLE checkpoints(id INTEGER PRIMARY KEY AUTOINCREMENT, step INTEGER NOT NULL,\n"
    "  time REAL NOT NULL, input_seed INTEGER NOT NULL, input_epoch INTEGER NOT NULL,\n"
    "  input_step INTEGER NOT NULL, n_variables INTEGER NOT NULL, bytes INTEGER NOT NULL);\n"
    "CREATE INDEX checkpoints_by_step ON checkpoints(step);\n"
    "CREATE TABLE variables(id INTEGER PRIMARY KEY,\n"
    "  checkpoint INTEGER NOT NULL REFERENCES checkpoints(id) ON DELETE CASCADE,\n"
    "  name TEXT NOT NULL, dtype TEXT NOT NULL, shape TEXT NOT NULL, nbytes INTEGER NOT NULL,\n"
    "  UNIQUE (checkpoint, name));\n"
    "CREATE TABLE variable_chunks(\n"
    "  variable INTEGER NOT NULL REFERENCES variables(id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL, crc32 INTEGER NOT NULL, data BLOB NOT NULL,\n"
    "  UNIQUE (variable, seq));\n"
    /* run metrics */
    "CREATE TABLE metrics(id INTEGER PRIMARY KEY, step INTEGER NOT NULL, name TEXT NOT NULL,\n"
    "  value REAL, time REAL NOT NULL);\n"
    "CREATE INDEX metrics_by_name ON metrics(name, step);\n";

struct migration {
    const char *sql;                       /* run first, when set */
    int (*fn)(sqlite3 *db, char *why);     /* then this, when set: an SQLite code */
};

static const struct migration migrations[] = {
    {schema_v1, NULL}, /* 0 -> 1 */
};
#define N_BUILTIN ((int)(sizeof migrations / sizeof migrations[0]))

static const char *test_migration; /* tfc_store_set_test_migration */

void tfc_store_set_test_migration(const char *sql)
{
    test_migration = sql;
}

int tfc_store_schema_version(void)
{
    return N_BUILTIN + (test_migration != NULL);
}

static int read_int(sqlite3 *db, const char *sql, int64_t *out)
{
    sqlite3_stmt *q;
    int rc = sqlite3_prepare_v2(db, sql, -1, &q, NULL);
    if (rc) return rc;
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(q, 0);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE)
        rc = SQLITE_NOTFOUND;
    sqlite3_finalize(q);
    return rc;
}

/* A store of ours says so in meta; anything else with tables is someone else's database. */
static tfc_status check_format(tfc_store *st)
{
    int64_t ours = 0;
    int rc = read_int(st->db, "SELECT count(*) FROM meta WHERE key = 'format' AND "
                              "value = 'tfc-store'", &ours);
    if (rc == SQLITE_OK && ours == 1) return TFC_OK;
    if (rc == SQLITE_OK || (rc & 0xff) == SQLITE_ERROR) /* no such table */
        return tfc_fail(st->msg, TFC_ERR_STORE,
                        "store '%s': an SQLite database, but not a tfc model store", st->path);
    return tfc_store_sqlfail(st, st->db, rc, st->msg, "cannot read the schema");
}

static tfc_status migrate(tfc_store *st, int from, int to)
{
    char why[TFC_MSG_LEN] = "";
    int rc = tfc_store_write_begin(st, st->db);
    if (rc) return tfc_store_sqlfail(st, st->db, rc, st->msg, "cannot migrate");
    /* another process may have migrated it meanwhile */
    int64_t v = 0;
    rc = read_int(st->db, "PRAGMA user_version", &v);
    if (rc == SQLITE_OK) from = (int)v;
    int64_t n_tables = 0;
    if (rc == SQLITE_OK && from == 0)
        rc = read_int(st->db, "SELECT count(*) FROM sqlite_schema", &n_tables);
    if (rc == SQLITE_OK && from == 0 && n_tables > 0) {
        tfc_store_write_rollback(st, st->db);
        return tfc_fail(st->msg, TFC_ERR_STORE,
                        "store '%s': an SQLite database, but not a tfc model store (it has "
                        "tables and no schema version)", st->path);
    }
    int at = from;
    for (; rc == SQLITE_OK && at < to; at++) {
        const char *sql = at < N_BUILTIN ? migrations[at].sql : test_migration;
        if (sql) rc = tfc_store_exec(st->db, sql);
        if (rc == SQLITE_OK && at < N_BUILTIN && migrations[at].fn)
            rc = migrations[at].fn(st->db, why);
        if (rc) break;
    }
    if (rc == SQLITE_OK) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", to);
        rc = tfc_store_exec(st->db, sql);
    }
    if (rc == SQLITE_OK) rc = tfc_store_write_commit(st, st->db);
    if (rc) {
        tfc_status status = tfc_store_sqlfail(st, st->db, rc, st->msg,
                                              "migrating the schema from version %d to %d failed "
                                              "at version %d%s%s (the store is unchanged)",
                                              from, to, at + 1, *why ? ": " : "", why);
        tfc_store_write_rollback(st, st->db);
        return status;
    }
    return TFC_OK;
}

tfc_status tfc_store_schema_inspect(tfc_store *st, int *version)
{
    int64_t v = 0, n_tables = 0;
    int cur = tfc_store_schema_version();
    int rc = read_int(st->db, "PRAGMA user_version", &v);
    if (rc) return tfc_store_sqlfail(st, st->db, rc, st->msg, "cannot read the schema version");
    if (v > cur)
        return tfc_fail(st->msg, TFC_ERR_STORE,
                        "store '%s': schema version %lld is newer than this library's (%d): "
                        "written by a newer tfc-starpu; upgrade it to open this store",
                        st->path, (long long)v, cur);
    if (v < 0)
        return tfc_fail(st->msg, TFC_ERR_STORE, "store '%s': invalid schema version %lld",
                        st->path, (long long)v);
    if (v == 0) {
        rc = read_int(st->db, "SELECT count(*) FROM sqlite_schema", &n_tables);
        if (rc) return tfc_store_sqlfail(st, st->db, rc, st->msg, "cannot read the schema");
        if (n_tables > 0)
            return tfc_fail(st->msg, TFC_ERR_STORE,
                            "store '%s': an SQLite database, but not a tfc model store (it has "
                            "tables and no schema version)", st->path);
        if (st->readonly)
            return tfc_fail(st->msg, TFC_ERR_STORE, "store '%s': an empty database, not a tfc "
                            "model store", st->path);
    } else {
        tfc_status status = check_format(st);
        if (status) return status;
        if (v < cur && st->readonly)
            return tfc_fail(st->msg, TFC_ERR_STORE,
                            "store '%s': schema version %lld is older than this library's (%d); "
                            "open it once read-write to migrate it", st->path, (long long)v, cur);
    }
    *version = (int)v;
    return TFC_OK;
}

tfc_status tfc_store_schema_upgrade(tfc_store *st, int version)
{
    int cur = tfc_store_schema_version();
    if (version >= cur) return TFC_OK;
    tfc_status status = migrate(st, version, cur);
    return status ? status : check_format(st);
}
