/* signature.c: named signatures ("train", "predict", ...): which tensors to feed, fetch and
 * log, and the loss and training op, by tensor name, so that a tool can run a stored graph
 * without knowing how it was built. */
#include <stdlib.h>
#include <string.h>
#include "store_internal.h"

static const char *const roles[3] = {"feed", "output", "metric"};

/* The node part of a tensor name ("node" or "node:k") exists in the stored graph; a store
 * without a graph accepts any name. SQLite code, SQLITE_NOTFOUND when absent. */
static int tensor_known(sqlite3 *db, int have_graph, const char *name)
{
    if (!have_graph) return SQLITE_OK;
    sqlite3_stmt *q;
    const char *colon = strrchr(name, ':');
    int len = colon ? (int)(colon - name) : (int)strlen(name);
    int rc = sqlite3_prepare_v2(db, "SELECT 1 FROM nodes WHERE name = ?", -1, &q, NULL);
    if (rc) return rc;
    sqlite3_bind_text(q, 1, name, len, SQLITE_STATIC);
    rc = sqlite3_step(q);
    sqlite3_finalize(q);
    return rc == SQLITE_ROW ? SQLITE_OK : rc == SQLITE_DONE ? SQLITE_NOTFOUND : rc;
}

/* The signature's tensor lists and their lengths, in roles[] order. */
static void role_lists(const tfc_signature *sig, int counts[3], const char **lists[3])
{
    counts[0] = sig->n_feeds;
    counts[1] = sig->n_outputs;
    counts[2] = sig->n_metrics;
    lists[0] = sig->feeds;
    lists[1] = sig->outputs;
    lists[2] = sig->metrics;
}

/* Each list has a non-negative length and only non-empty names. */
static tfc_status check_lists(tfc_store *st, const char *name, const tfc_signature *sig)
{
    int counts[3];
    const char **lists[3];
    role_lists(sig, counts, lists);
    for (int r = 0; r < 3; r++) {
        if (counts[r] < 0 || (counts[r] && !lists[r]))
            return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT,
                            "signature '%s': bad %s list", name, roles[r]);
        for (int i = 0; i < counts[r]; i++)
            if (!lists[r][i] || !*lists[r][i])
                return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT,
                                "signature '%s': %s %d is NULL or empty", name, roles[r], i);
    }
    return TFC_OK;
}

/* The first name of sig that is not a tensor of the stored graph, with its role, or NULL in
 * *unknown; SQLite code. */
static int find_unknown(sqlite3 *db, const tfc_signature *sig, const char **unknown,
                        const char **unknown_role)
{
    sqlite3_stmt *sq = NULL;
    int have_graph = 0;
    int rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM graph", -1, &sq, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(sq)) == SQLITE_ROW) {
        have_graph = sqlite3_column_int(sq, 0) > 0;
        rc = SQLITE_OK;
    }
    sqlite3_finalize(sq);
    int counts[3];
    const char **lists[3];
    role_lists(sig, counts, lists);
    const char *single[2] = {sig->loss, sig->train_op};
    for (int r = 0; r < 3 && rc == SQLITE_OK && !*unknown; r++)
        for (int i = 0; i < counts[r] && rc == SQLITE_OK && !*unknown; i++)
            if ((rc = tensor_known(db, have_graph, lists[r][i])) == SQLITE_NOTFOUND) {
                *unknown = lists[r][i];
                *unknown_role = roles[r];
            }
    for (int k = 0; k < 2 && rc == SQLITE_OK && !*unknown; k++)
        if (single[k] && (rc = tensor_known(db, have_graph, single[k])) == SQLITE_NOTFOUND) {
            *unknown = single[k];
            *unknown_role = k ? "train_op" : "loss";
        }
    return rc;
}

/* Replaces the signature's row (name, loss, train_op). The insert stays in *sq for the caller
 * to finalize once it has read the connection's error message. */
static int replace_row(sqlite3 *db, const char *name, const tfc_signature *sig,
                       sqlite3_stmt **sq)
{
    int rc = sqlite3_prepare_v2(db, "DELETE FROM signatures WHERE name = ?", -1, sq, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(*sq, 1, name, -1, SQLITE_STATIC);
        rc = sqlite3_step(*sq) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
        sqlite3_finalize(*sq);
        *sq = NULL;
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "INSERT INTO signatures(name, loss, train_op) VALUES (?,?,?)",
                                -1, sq, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(*sq, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_text(*sq, 2, sig->loss, -1, SQLITE_STATIC);     /* NULL binds NULL */
        sqlite3_bind_text(*sq, 3, sig->train_op, -1, SQLITE_STATIC);
        rc = sqlite3_step(*sq) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    }
    return rc;
}

/* One row per listed tensor: (signature, role, position, tensor). The statement stays in *ins
 * for the caller to finalize once it has read the connection's error message. */
static int insert_tensors(sqlite3 *db, const char *name, const tfc_signature *sig,
                          sqlite3_stmt **ins)
{
    int counts[3];
    const char **lists[3];
    role_lists(sig, counts, lists);
    int rc = sqlite3_prepare_v2(db, "INSERT INTO signature_tensors(signature, role, pos, tensor) "
                                    "VALUES (?,?,?,?)", -1, ins, NULL);
    for (int r = 0; r < 3 && rc == SQLITE_OK; r++)
        for (int i = 0; i < counts[r] && rc == SQLITE_OK; i++) {
            sqlite3_reset(*ins);
            sqlite3_bind_text(*ins, 1, name, -1, SQLITE_STATIC);
            sqlite3_bind_text(*ins, 2, roles[r], -1, SQLITE_STATIC);
            sqlite3_bind_int(*ins, 3, i);
            sqlite3_bind_text(*ins, 4, lists[r][i], -1, SQLITE_STATIC);
            rc = sqlite3_step(*ins) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
        }
    return rc;
}

tfc_status tfc_store_set_signature(tfc_store *st, const char *name, const tfc_signature *sig)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "set_signature: store is NULL");
    if (!name || !*name || !sig)
        return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT, "set_signature: NULL argument");
    tfc_status status = tfc_store_check_writable(st, "set_signature");
    if (!status) status = check_lists(st, name, sig);
    if (status) return status;
    sqlite3 *db = st->db;
    sqlite3_stmt *ins = NULL, *sq = NULL;
    const char *unknown = NULL, *unknown_role = NULL;
    int rc = tfc_store_write_begin(st, db);
    if (rc) return tfc_store_sqlfail(st, db, rc, st->msg, "setting signature '%s'", name);
    rc = find_unknown(db, sig, &unknown, &unknown_role); /* every name must be a tensor */
    if (unknown) {
        tfc_store_write_rollback(st, db);
        return tfc_fail(st->msg, TFC_ERR_NOT_FOUND,
                        "signature '%s': %s '%s' is not a tensor of the stored graph", name,
                        unknown_role, unknown);
    }
    if (rc == SQLITE_OK) rc = replace_row(db, name, sig, &sq);
    if (rc == SQLITE_OK) rc = insert_tensors(db, name, sig, &ins);
    if (rc == SQLITE_OK) rc = tfc_store_write_commit(st, db);
    if (rc) { /* the message first: finalizing a statement resets the connection's error */
        status = tfc_store_sqlfail(st, db, rc, st->msg, "setting signature '%s'", name);
        tfc_store_write_rollback(st, db);
    }
    sqlite3_finalize(ins);
    sqlite3_finalize(sq);
    return status;
}

void tfc_signature_free(tfc_signature *sig)
{
    if (!sig) return;
    int counts[3];
    const char **lists[3];
    role_lists(sig, counts, lists);
    for (int r = 0; r < 3; r++) {
        for (int i = 0; lists[r] && i < counts[r]; i++) free((char *)lists[r][i]);
        free(lists[r]);
    }
    free((char *)sig->loss);
    free((char *)sig->train_op);
    free(sig);
}

static char *dup_col(sqlite3_stmt *q, int col, int *oom)
{
    if (sqlite3_column_type(q, col) == SQLITE_NULL) return NULL;
    const char *t = (const char *)sqlite3_column_text(q, col);
    char *c = t ? strdup(t) : NULL;
    if (!c) *oom = 1;
    return c;
}

/* Reads the signature's row (loss, train_op); *found says whether there is one. */
static int read_row(sqlite3 *db, const char *name, tfc_signature *sig, int *found, int *oom)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT loss, train_op FROM signatures WHERE name = ?", -1,
                                &q, NULL);
    if (rc != SQLITE_OK) return rc;
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        *found = 1;
        sig->loss = dup_col(q, 0, oom);
        sig->train_op = dup_col(q, 1, oom);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    sqlite3_finalize(q);
    return rc;
}

/* Appends the signature's tensors to its lists in role and position order. The statement
 * stays in *q for the caller to finalize once it has read the connection's error message. */
static int read_tensors(sqlite3 *db, const char *name, tfc_signature *sig, sqlite3_stmt **q,
                        int *oom)
{
    int rc = sqlite3_prepare_v2(db, "SELECT role, tensor FROM signature_tensors "
                                    "WHERE signature = ? ORDER BY role, pos", -1, q, NULL);
    if (rc != SQLITE_OK) return rc;
    int *counts[3] = {&sig->n_feeds, &sig->n_outputs, &sig->n_metrics};
    const char ***lists[3] = {&sig->feeds, &sig->outputs, &sig->metrics};
    int caps[3] = {0, 0, 0};
    sqlite3_bind_text(*q, 1, name, -1, SQLITE_STATIC);
    while (!*oom && (rc = sqlite3_step(*q)) == SQLITE_ROW) {
        const char *role = (const char *)sqlite3_column_text(*q, 0);
        int r = 0;
        while (r < 3 && strcmp(roles[r], role ? role : "")) r++;
        if (r == 3) continue;
        if (*counts[r] == caps[r]) {
            caps[r] = caps[r] ? 2 * caps[r] : 4;
            const char **a = realloc(*lists[r], (size_t)caps[r] * sizeof *a);
            if (!a) {
                *oom = 1;
                break;
            }
            *lists[r] = a;
        }
        /* a NULL name (a damaged row) reads as "", which find_unknown then names */
        char *t = sqlite3_column_type(*q, 1) == SQLITE_NULL ? strdup("") : dup_col(*q, 1, oom);
        if (!t) {
            *oom = 1;
            break;
        }
        (*lists[r])[(*counts[r])++] = t;
    }
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

tfc_status tfc_store_get_signature(tfc_store *st, const char *name, tfc_signature **out)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "get_signature: store is NULL");
    if (!name || !out)
        return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT, "get_signature: NULL argument");
    *out = NULL;
    tfc_signature *sig = calloc(1, sizeof *sig);
    if (!sig) return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "get_signature: no memory");
    tfc_status status = TFC_OK;
    int oom = 0, found = 0;
    const char *unknown = NULL, *unknown_role = NULL;
    sqlite3_stmt *q = NULL;
    pthread_mutex_lock(&st->db_mu);
    int rc = tfc_store_exec(st->db, "BEGIN");
    if (rc == SQLITE_OK) rc = read_row(st->db, name, sig, &found, &oom);
    if (rc == SQLITE_OK && found) rc = read_tensors(st->db, name, sig, &q, &oom);
    if (rc == SQLITE_OK && found && !oom) { /* set_signature's check, on what was stored */
        int frc = find_unknown(st->db, sig, &unknown, &unknown_role);
        if (!unknown) rc = frc;
    }
    if (rc) status = tfc_store_sqlfail(st, st->db, rc, st->msg, "reading signature '%s'", name);
    else if (oom) status = tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "get_signature: no memory");
    else if (!found)
        status = tfc_fail(st->msg, TFC_ERR_NOT_FOUND, "store '%s' has no signature '%s'",
                          st->path, name);
    else if (unknown)
        status = tfc_fail(st->msg, TFC_ERR_STORE,
                          "store '%s': signature '%s': %s '%s' is not a tensor of the stored "
                          "graph (a damaged store)", st->path, name, unknown_role, unknown);
    sqlite3_finalize(q);
    if (!sqlite3_get_autocommit(st->db)) tfc_store_exec(st->db, "COMMIT");
    pthread_mutex_unlock(&st->db_mu);
    if (status) {
        tfc_signature_free(sig);
        return status;
    }
    *out = sig;
    return TFC_OK;
}
