/* graph_store.c: a graph in the store, written from the node records of graph/serialize.h
 * (op name, attributes as text from the op's attribute table, inputs and control edges by
 * name, constants' data, variables' initializers), so that a loaded graph runs without the
 * C code that built it. */
#include <stdlib.h>
#include <string.h>
#include "store_internal.h"
#include "../graph/serialize.h"

static const char *const init_names[] = {
    [TFC_INIT_ZEROS] = "zeros",
    [TFC_INIT_ONES] = "ones",
    [TFC_INIT_CONSTANT] = "constant",
    [TFC_INIT_UNIFORM] = "uniform",
    [TFC_INIT_NORMAL] = "normal",
    [TFC_INIT_TRUNCATED_NORMAL] = "truncated_normal",
    [TFC_INIT_GLOROT_UNIFORM] = "glorot_uniform",
    [TFC_INIT_HE_NORMAL] = "he_normal",
    [TFC_INIT_HE_UNIFORM] = "he_uniform",
};
#define N_INITS ((int)(sizeof init_names / sizeof init_names[0]))

/* A variable left out of the trainable set has this after its initializer's name in the init
 * column ("zeros;trainable=0"): the nodes table has no column for it, and stores written
 * before the flag existed (no suffix) load with every variable trainable, as they were. */
static const char untrainable_suffix[] = ";trainable=0";

/* The initializer kind named by text (with or without the suffix, *untrainable says which);
 * -1 when unknown. */
static int init_parse(const char *text, int *untrainable)
{
    size_t len = text ? strlen(text) : 0, slen = sizeof untrainable_suffix - 1;
    *untrainable = len > slen && !strcmp(text + len - slen, untrainable_suffix);
    if (*untrainable) len -= slen;
    for (int i = 0; text && i < N_INITS; i++)
        if (init_names[i] && strlen(init_names[i]) == len && !strncmp(init_names[i], text, len))
            return i;
    return -1;
}

static int insert_node(sqlite3 *db, sqlite3_stmt *const q[4], int id,
                       const struct tfc_node_record *rec, const struct tfc_node *n)
{
    sqlite3_stmt *node = q[0], *in = q[1], *ctrl = q[2], *data = q[3];
    int rc;
    sqlite3_reset(node);
    sqlite3_clear_bindings(node);
    sqlite3_bind_int(node, 1, id);
    sqlite3_bind_text(node, 2, rec->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(node, 3, rec->op, -1, SQLITE_STATIC);
    sqlite3_bind_text(node, 4, rec->attrs, -1, SQLITE_STATIC);
    if (n->op == &tfc_op_variable && (int)rec->init.kind >= 0 && (int)rec->init.kind < N_INITS) {
        char init[64];
        snprintf(init, sizeof init, "%s%s", init_names[rec->init.kind],
                 rec->untrainable ? untrainable_suffix : "");
        sqlite3_bind_text(node, 5, init, -1, SQLITE_TRANSIENT);
        sqlite3_bind_double(node, 6, rec->init.a);
        sqlite3_bind_double(node, 7, rec->init.b);
        sqlite3_bind_int64(node, 8, (int64_t)rec->init.seed);
    }
    rc = sqlite3_step(node);
    if (rc != SQLITE_DONE) return rc;
    for (int k = 0; k < rec->n_inputs; k++) {
        sqlite3_reset(in);
        sqlite3_bind_int(in, 1, id);
        sqlite3_bind_int(in, 2, k);
        sqlite3_bind_text(in, 3, rec->inputs[k], -1, SQLITE_STATIC);
        if ((rc = sqlite3_step(in)) != SQLITE_DONE) return rc;
    }
    for (int k = 0; k < rec->n_ctrl; k++) {
        sqlite3_reset(ctrl);
        sqlite3_bind_int(ctrl, 1, id);
        sqlite3_bind_int(ctrl, 2, k);
        sqlite3_bind_text(ctrl, 3, rec->ctrl[k], -1, SQLITE_STATIC);
        if ((rc = sqlite3_step(ctrl)) != SQLITE_DONE) return rc;
    }
    if (n->op == &tfc_op_constant && rec->value)
        return tfc_store_put_chunks(db, data, id, tfc_value_cdata(rec->value),
                                    tfc_value_nbytes(rec->value),
                                    tfc_dtype_size(tfc_value_dtype(rec->value)));
    return SQLITE_OK;
}

tfc_status tfc_store_save_graph(tfc_store *st, tfc_graph *g)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "save_graph: store is NULL");
    if (!g) return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT, "save_graph: graph is NULL");
    tfc_status status = tfc_store_check_writable(st, "save_graph");
    if (status) return status;
    if (tfc_graph_status(g))
        return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT,
                        "save_graph: the graph has a build error: %s", tfc_graph_errmsg(g));
    static const char *const sql[4] = {
        "INSERT INTO nodes(id, name, op, attrs, init, init_a, init_b, init_seed) "
        "VALUES (?,?,?,?,?,?,?,?)",
        "INSERT INTO node_inputs(node, pos, tensor) VALUES (?,?,?)",
        "INSERT INTO node_controls(node, pos, control) VALUES (?,?,?)",
        "INSERT INTO node_data(node, seq, crc32, data) VALUES (?,?,?,?)",
    };
    sqlite3_stmt *q[4] = {NULL};
    sqlite3 *db = st->db;
    int rc = tfc_store_write_begin(st, db);
    if (rc) return tfc_store_sqlfail(st, db, rc, st->msg, "saving the graph");
    /* saving replaces the stored graph (ON DELETE CASCADE takes inputs, edges and data) */
    rc = tfc_store_exec(db, "DELETE FROM nodes; DELETE FROM graph");
    for (int i = 0; i < 4 && rc == SQLITE_OK; i++)
        rc = sqlite3_prepare_v2(db, sql[i], -1, &q[i], NULL);
    if (rc == SQLITE_OK) {
        sqlite3_stmt *gq;
        rc = sqlite3_prepare_v2(db, "INSERT INTO graph(id, seed, n_nodes, saved) "
                                    "VALUES (1, ?, ?, ?)", -1, &gq, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(gq, 1, (int64_t)g->seed);
            sqlite3_bind_int(gq, 2, g->n_nodes);
            sqlite3_bind_double(gq, 3, tfc_store_now());
            rc = sqlite3_step(gq);
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
            sqlite3_finalize(gq);
        }
    }
    int failed_node = -1;
    for (int i = 0; i < g->n_nodes && rc == SQLITE_OK && !status; i++) {
        struct tfc_node_record rec;
        tfc_status exported = tfc_graph_export_node(g, i, &rec);
        if (exported) { /* its own status and message (a node that cannot be stored, memory) */
            status = tfc_fail(st->msg, exported, "store '%s': saving the graph: %s (the stored "
                              "graph is unchanged)", st->path, tfc_errmsg());
            break;
        }
        rc = insert_node(db, q, i, &rec, g->nodes[i]);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        if (rc) failed_node = i;
        tfc_node_record_clear(&rec);
    }
    if (status) tfc_store_write_rollback(st, db);
    if (rc == SQLITE_OK && !status) rc = tfc_store_write_commit(st, db);
    if (rc) { /* the message first: finalizing a statement resets the connection's error */
        status = tfc_store_sqlfail(st, db, rc, st->msg, "saving the graph%s%s%s (the stored "
                                   "graph is unchanged)", failed_node >= 0 ? " at node '" : "",
                                   failed_node >= 0 ? g->nodes[failed_node]->name : "",
                                   failed_node >= 0 ? "'" : "");
        tfc_store_write_rollback(st, db);
    }
    for (int i = 0; i < 4; i++) sqlite3_finalize(q[i]);
    return status;
}

/* ---- loading --------------------------------------------------------------------------------- */

struct loaded {
    struct tfc_node_record rec;
    char *name, *op;
    char **in, **ctrl;
    tfc_value *value;
};

static void loaded_free(struct loaded *l, int n)
{
    for (int i = 0; l && i < n; i++) {
        free(l[i].name);
        free(l[i].op);
        for (int k = 0; l[i].in && k < l[i].rec.n_inputs; k++) free(l[i].in[k]);
        for (int k = 0; l[i].ctrl && k < l[i].rec.n_ctrl; k++) free(l[i].ctrl[k]);
        free(l[i].in);
        free(l[i].ctrl);
        tfc_value_destroy(l[i].value);
    }
    free(l);
}

/* Column 0 of the rows of q (bound to node id) as a new array of strings. */
static int read_names(sqlite3_stmt *q, int id, char ***out, int *n)
{
    int cap = 0, rc;
    *out = NULL;
    *n = 0;
    sqlite3_reset(q);
    sqlite3_bind_int(q, 1, id);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 4;
            char **a = realloc(*out, (size_t)cap * sizeof *a);
            if (!a) return SQLITE_NOMEM;
            *out = a;
        }
        const char *t = (const char *)sqlite3_column_text(q, 0);
        if (!((*out)[*n] = strdup(t ? t : ""))) return SQLITE_NOMEM;
        (*n)++;
    }
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* The bytes of a constant's stored chunks (sq: their total length), which its attributes'
 * size must match before anything of that size is allocated. */
static int stored_bytes(sqlite3_stmt *sq, int id, int64_t *bytes)
{
    sqlite3_reset(sq);
    sqlite3_bind_int(sq, 1, id);
    int rc = sqlite3_step(sq);
    if (rc != SQLITE_ROW) return rc == SQLITE_DONE ? SQLITE_CORRUPT : rc;
    *bytes = sqlite3_column_int64(sq, 0);
    sqlite3_reset(sq);
    return SQLITE_OK;
}

static tfc_status load_constant(tfc_store *st, sqlite3_stmt *dq, sqlite3_stmt *sq, int id,
                                struct loaded *l, int *rc)
{
    const struct tfc_op *op = tfc_op_lookup(l->op);
    struct tfc_kattr attrs[TFC_MAX_ATTRS];
    char why[TFC_MSG_LEN] = "not a constant";
    if (!op || tfc_attrs_parse(op, l->rec.attrs, attrs, why))
        return tfc_fail(st->msg, TFC_ERR_STORE, "store '%s': constant '%s': bad attributes "
                        "'%s': %s", st->path, l->name, l->rec.attrs, why);
    const struct tfc_kattr *dtype = &attrs[SOURCE_DTYPE], *dims = &attrs[SOURCE_SHAPE];
    tfc_shape shape = tfc_shape_of(dims->n, dims->v);
    /* the value's own checks (below) name a bad dtype, a negative dimension or a size that
     * overflows; a damaged shape must not become a huge allocation: too little stored data is
     * refused first (too much is found while reading it) */
    if (tfc_dtype_valid((int)dtype->i) && tfc_shape_numel(&shape) >= 0 &&
        !tfc_shape_too_large(&shape, (enum tfc_dtype)dtype->i)) {
        int64_t stored = 0;
        uint64_t want = (uint64_t)tfc_shape_numel(&shape) * tfc_dtype_size((enum tfc_dtype)dtype->i);
        if ((*rc = stored_bytes(sq, id, &stored))) return TFC_OK;
        if ((uint64_t)stored < want)
            return tfc_fail(st->msg, TFC_ERR_STORE, "store '%s': constant '%s': %lld bytes of "
                            "data where %llu are needed (its attributes '%s')", st->path,
                            l->name, (long long)stored, (unsigned long long)want, l->rec.attrs);
    }
    if (tfc_value_alloc((enum tfc_dtype)dtype->i, &shape, &l->value))
        return tfc_fail(st->msg, TFC_ERR_STORE, "store '%s': constant '%s': bad attributes "
                        "'%s': %s", st->path, l->name, l->rec.attrs, tfc_errmsg());
    sqlite3_reset(dq);
    sqlite3_bind_int(dq, 1, id);
    *rc = tfc_store_get_chunks(dq, tfc_value_data(l->value), tfc_value_nbytes(l->value),
                               tfc_dtype_size(tfc_value_dtype(l->value)), why, sizeof why);
    if (*rc == -1) {
        *rc = SQLITE_OK;
        return tfc_fail(st->msg, TFC_ERR_STORE, "store '%s': the data of constant '%s': %s",
                        st->path, l->name, why);
    }
    return TFC_OK;
}

/* The graph row: a new graph with the stored seed, and the node count it records;
 * TFC_ERR_NOT_FOUND when none is stored. *rc receives an SQLite failure. */
static tfc_status load_graph_row(tfc_store *st, sqlite3_stmt **gq, tfc_graph **g,
                                 int64_t *n_nodes, int *rc)
{
    *rc = sqlite3_prepare_v2(st->db, "SELECT seed, n_nodes FROM graph WHERE id = 1", -1, gq,
                             NULL);
    if (*rc != SQLITE_OK) return TFC_OK;
    *rc = sqlite3_step(*gq);
    if (*rc == SQLITE_DONE) {
        *rc = SQLITE_OK;
        return tfc_fail(st->msg, TFC_ERR_NOT_FOUND,
                        "store '%s' holds no graph (tfc_store_save_graph stores one)", st->path);
    }
    if (*rc != SQLITE_ROW) return TFC_OK;
    *rc = SQLITE_OK;
    if (tfc_graph_create(g))
        return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "load_graph: %s", tfc_errmsg());
    tfc_graph_set_seed(*g, (uint64_t)sqlite3_column_int64(*gq, 0));
    *n_nodes = sqlite3_column_int64(*gq, 1);
    return TFC_OK;
}

/* Why input `input` of node x (stored as node id) is not in the graph loaded so far, when the
 * store holds its node: stored after x (nodes are stored after their inputs), and whether
 * that is a cycle (x reachable from it along inputs and control edges). TFC_OK when the
 * store lacks the node too (the import's "does not exist" stands); *rc: an SQLite failure. */
static tfc_status explain_missing_input(tfc_store *st, const struct loaded *x, int id,
                                        const char *input, int *rc)
{
    static const char sql[] =
        "WITH RECURSIVE edge(node, dep) AS ("
        "  SELECT node, CASE WHEN instr(tensor, ':') > 0"
        "                    THEN substr(tensor, 1, instr(tensor, ':') - 1) ELSE tensor END"
        "  FROM node_inputs UNION ALL SELECT node, control FROM node_controls),"
        " reach(id) AS (SELECT id FROM nodes WHERE name = ?1"
        "  UNION SELECT n.id FROM reach JOIN edge e ON e.node = reach.id"
        "  JOIN nodes n ON n.name = e.dep)"
        "SELECT (SELECT id FROM nodes WHERE name = ?1), EXISTS (SELECT 1 FROM reach WHERE id = ?2)";
    const char *colon = strrchr(input, ':');
    int len = colon ? (int)(colon - input) : (int)strlen(input);
    sqlite3_stmt *q;
    *rc = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
    if (*rc) return TFC_OK;
    sqlite3_bind_text(q, 1, input, len, SQLITE_STATIC);
    sqlite3_bind_int(q, 2, id);
    tfc_status status = TFC_OK;
    *rc = sqlite3_step(q);
    if (*rc == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL) {
        int64_t at = sqlite3_column_int64(q, 0);
        if (sqlite3_column_int(q, 1))
            status = tfc_fail(st->msg, TFC_ERR_CYCLE,
                              "store '%s': loading the graph: node '%s': input '%s' depends on "
                              "'%s' (a cycle)", st->path, x->name, input, x->name);
        else if (at >= id)
            status = tfc_fail(st->msg, TFC_ERR_STORE,
                              "store '%s': loading the graph: node '%s': input '%s' is stored "
                              "after it (node %lld; a node's inputs come before it)", st->path,
                              x->name, input, (long long)at);
    }
    *rc = *rc == SQLITE_ROW || *rc == SQLITE_DONE ? SQLITE_OK : *rc;
    sqlite3_finalize(q);
    return status;
}

/* The node at the current row of q[0] (the nodes query) into x: its name, op, attributes,
 * initializer, inputs and control inputs (q[1], q[2]), and a constant's data (q[3], and q[4]
 * their size). */
static tfc_status load_node(tfc_store *st, sqlite3_stmt *const *q, struct loaded *x, int *rc)
{
    memset(x, 0, sizeof *x);
    int id = sqlite3_column_int(q[0], 0);
    const char *name = (const char *)sqlite3_column_text(q[0], 1);
    const char *opn = (const char *)sqlite3_column_text(q[0], 2);
    const char *attrs = (const char *)sqlite3_column_text(q[0], 3);
    x->name = strdup(name ? name : "");
    x->op = strdup(opn ? opn : "");
    if (!x->name || !x->op)
        return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "load_graph: no memory");
    size_t attrs_len = attrs ? strlen(attrs) : 0;
    if (attrs_len >= sizeof x->rec.attrs) /* cut, its last attributes would read as defaults */
        return tfc_fail(st->msg, TFC_ERR_STORE, "store '%s': node '%s': attributes of %zu "
                        "characters (at most %zu)", st->path, x->name, attrs_len,
                        sizeof x->rec.attrs - 1);
    snprintf(x->rec.attrs, sizeof x->rec.attrs, "%s", attrs ? attrs : "");
    x->rec.name = x->name;
    x->rec.op = x->op;
    if (sqlite3_column_type(q[0], 4) != SQLITE_NULL) {
        int kind = init_parse((const char *)sqlite3_column_text(q[0], 4), &x->rec.untrainable);
        if (kind < 0)
            return tfc_fail(st->msg, TFC_ERR_STORE,
                            "store '%s': variable '%s': unknown initializer '%s'", st->path,
                            x->name, (const char *)sqlite3_column_text(q[0], 4));
        x->rec.init = (tfc_init){(tfc_init_kind)kind, sqlite3_column_double(q[0], 5),
                                 sqlite3_column_double(q[0], 6),
                                 (uint64_t)sqlite3_column_int64(q[0], 7)};
    }
    *rc = read_names(q[1], id, &x->in, &x->rec.n_inputs);
    if (*rc == SQLITE_OK) *rc = read_names(q[2], id, &x->ctrl, &x->rec.n_ctrl);
    if (*rc) return TFC_OK;
    x->rec.inputs = (const char **)x->in;
    x->rec.ctrl = (const char **)x->ctrl;
    if (!strcmp(x->op, "constant")) {
        tfc_status status = load_constant(st, q[3], q[4], id, x, rc);
        if (status || *rc) return status;
        x->rec.value = x->value;
    }
    return TFC_OK;
}

/* Every node, in id order, into g as it is read; *l keeps the records (n of them) for the
 * control edges, which are added once every node exists. An import failure is left on g. */
static tfc_status load_nodes(tfc_store *st, sqlite3_stmt *const *q, tfc_graph *g,
                             struct loaded **l, int *n, int *rc)
{
    int cap = 0;
    tfc_status status = TFC_OK;
    while ((*rc = sqlite3_step(q[0])) == SQLITE_ROW) {
        *rc = SQLITE_OK;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            struct loaded *m = realloc(*l, (size_t)cap * sizeof *m);
            if (!m) return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "load_graph: no memory");
            *l = m;
        }
        struct loaded *x = &(*l)[(*n)++];
        status = load_node(st, q, x, rc);
        if (status || *rc) break;
        for (int k = 0; k < x->rec.n_inputs && !status && !*rc; k++)
            if (!tfc_graph_find(g, x->rec.inputs[k]))
                status = explain_missing_input(st, x, sqlite3_column_int(q[0], 0),
                                               x->rec.inputs[k], rc);
        if (status || *rc || tfc_graph_import_node(g, &x->rec)) break;
    }
    if (*rc == SQLITE_DONE) *rc = SQLITE_OK;
    return status;
}

tfc_status tfc_store_load_graph(tfc_store *st, tfc_graph **out)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "load_graph: store is NULL");
    if (!out) return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT, "load_graph: out is NULL");
    *out = NULL;
    static const char *const sql[5] = {
        "SELECT id, name, op, attrs, init, init_a, init_b, init_seed FROM nodes ORDER BY id",
        "SELECT tensor FROM node_inputs WHERE node = ? ORDER BY pos",
        "SELECT control FROM node_controls WHERE node = ? ORDER BY pos",
        "SELECT seq, crc32, data FROM node_data WHERE node = ? ORDER BY seq",
        "SELECT coalesce(sum(length(CAST(data AS BLOB))), 0) FROM node_data WHERE node = ?",
    };
    sqlite3_stmt *q[5] = {NULL}, *gq = NULL;
    struct loaded *l = NULL;
    int n = 0;
    tfc_graph *g = NULL;
    tfc_status status = TFC_OK;
    int64_t n_nodes = 0;
    pthread_mutex_lock(&st->db_mu);
    int rc = tfc_store_exec(st->db, "BEGIN"); /* one snapshot */
    if (rc == SQLITE_OK) status = load_graph_row(st, &gq, &g, &n_nodes, &rc);
    for (int i = 0; i < 5 && rc == SQLITE_OK && !status; i++)
        rc = sqlite3_prepare_v2(st->db, sql[i], -1, &q[i], NULL);
    if (rc == SQLITE_OK && !status) status = load_nodes(st, q, g, &l, &n, &rc);
    for (int i = 0; i < n && rc == SQLITE_OK && !status && !tfc_graph_status(g); i++)
        tfc_graph_import_ctrl(g, &l[i].rec);
    if (rc == SQLITE_OK && !status && !tfc_graph_status(g)) tfc_graph_import_check(g);
    if (rc == SQLITE_OK && !status && !tfc_graph_status(g) && n != n_nodes)
        status = tfc_fail(st->msg, TFC_ERR_STORE, "store '%s': the graph row records %lld "
                          "nodes but %d are stored (node rows missing or added)", st->path,
                          (long long)n_nodes, n);
    if (rc) status = tfc_store_sqlfail(st, st->db, rc, st->msg, "loading the graph");
    else if (!status && g && tfc_graph_status(g))
        status = tfc_fail(st->msg, tfc_graph_status(g), "store '%s': loading the graph: %s",
                          st->path, tfc_graph_errmsg(g));
    sqlite3_finalize(gq);
    for (int i = 0; i < 5; i++) sqlite3_finalize(q[i]);
    if (!sqlite3_get_autocommit(st->db)) tfc_store_exec(st->db, "COMMIT");
    pthread_mutex_unlock(&st->db_mu);
    loaded_free(l, n);
    if (status) {
        tfc_graph_destroy(g);
        return status;
    }
    *out = g;
    return TFC_OK;
}
