/* test_bad_store_rows.c: a small real model store (graph, signatures, one checkpoint), then
 * one table row per damaged store: each applies its SQL to a fresh copy, then tries one load
 * (open, graph, a signature, or restoring the checkpoint into a session) on the copy opened
 * read-only, and asserts the status, a message that names the problem, that the file's bytes
 * are unchanged, and (when it opens) that SQLite's integrity check passes. */
#define _GNU_SOURCE /* nftw, posix_spawn in bad_input.h and the programs */
#include "testutil.h"
#include <zlib.h>
#include "bad_input.h"
#include "../store/store_testing.h"

enum load {
    OPEN,          /* tfc_store_open read-only, nothing more */
    GRAPH,         /* tfc_store_load_graph */
    SIG_PREDICT,   /* tfc_store_get_signature "predict" */
    SIG_TRAIN,     /* tfc_store_get_signature "train" */
    RESTORE,       /* tfc_store_restore (latest checkpoint) into a session of the original graph */
};

struct row_case {
    const char *what;
    const char *sql;     /* applied with foreign keys off; {zcrc:N} is the CRC-32 of N zero bytes */
    enum load load;
    tfc_status want;
    const char *msg, *msg2; /* substrings the message must hold (msg2 may be NULL) */
    int pending;         /* a known defect in code another engineer owns: XFAIL */
};

/* the node id of a name, in SQL */
#define ID(name) "(SELECT id FROM nodes WHERE name = '" name "')"
#define VAR(name) "(SELECT id FROM variables WHERE name = '" name "')"
/* nodes rebuilt without UNIQUE(name), so that a name can be stored twice */
#define NO_UNIQUE_NAMES                                                                      \
    "CREATE TABLE nodes2(id INTEGER PRIMARY KEY, name TEXT NOT NULL, op TEXT NOT NULL, "     \
    "attrs TEXT NOT NULL, init TEXT, init_a REAL, init_b REAL, init_seed INTEGER); "         \
    "INSERT INTO nodes2 SELECT * FROM nodes; DROP TABLE nodes; "                             \
    "ALTER TABLE nodes2 RENAME TO nodes; "

static const struct row_case cases[] = {
    /* ---- the store itself ---- */
    {"schema version from the future", "PRAGMA user_version = 99", OPEN, TFC_ERR_STORE,
     "schema version 99 is newer", NULL},
    {"negative schema version", "PRAGMA user_version = -3", OPEN, TFC_ERR_STORE,
     "invalid schema version -3", NULL},
    {"schema version 0 with tables", "PRAGMA user_version = 0", OPEN, TFC_ERR_STORE,
     "not a tfc model store", NULL},
    {"meta names another format", "UPDATE meta SET value = 'other' WHERE key = 'format'", OPEN,
     TFC_ERR_STORE, "not a tfc model store", NULL},
    {"meta row missing", "DELETE FROM meta WHERE key = 'format'", OPEN, TFC_ERR_STORE,
     "not a tfc model store", NULL},
    {"meta table missing", "DROP TABLE meta", OPEN, TFC_ERR_STORE, "not a tfc model store", NULL},
    /* ---- the graph row and the tables ---- */
    {"no graph row", "DELETE FROM graph", GRAPH, TFC_ERR_NOT_FOUND, "holds no graph", NULL},
    {"graph table missing", "DROP TABLE graph", GRAPH, TFC_ERR_STORE, "no such table: graph",
     "loading the graph"},
    {"nodes table missing", "DROP TABLE nodes", GRAPH, TFC_ERR_STORE, "no such table: nodes",
     "loading the graph"},
    {"node_inputs table missing", "DROP TABLE node_inputs", GRAPH, TFC_ERR_STORE,
     "no such table: node_inputs", NULL},
    {"node_controls table missing", "DROP TABLE node_controls", GRAPH, TFC_ERR_STORE,
     "no such table: node_controls", NULL},
    {"node_data table missing", "DROP TABLE node_data", GRAPH, TFC_ERR_STORE,
     "no such table: node_data", NULL},
    {"graph row counts more nodes than are stored", "UPDATE graph SET n_nodes = n_nodes + 5",
     GRAPH, TFC_ERR_STORE, "the graph row records", "are stored"},
    {"a node row deleted", "DELETE FROM nodes WHERE name = 'tot'", GRAPH, TFC_ERR_STORE,
     "the graph row records", "are stored"},
    {"a node row added", "INSERT INTO nodes(id, name, op, attrs) VALUES (99, 'extra', 'relu', '');"
     "INSERT INTO node_inputs VALUES (99, 0, 'r')", GRAPH, TFC_ERR_STORE,
     "the graph row records", "are stored"},
    /* ---- ops and input counts ---- */
    {"unknown op", "UPDATE nodes SET op = 'frobnicate' WHERE name = 'r'", GRAPH,
     TFC_ERR_NOT_FOUND, "node 'r'", "unknown op 'frobnicate'"},
    {"empty op name", "UPDATE nodes SET op = '' WHERE name = 'r'", GRAPH, TFC_ERR_NOT_FOUND,
     "node 'r'", "unknown op ''"},
    {"op name in another case", "UPDATE nodes SET op = 'MatMul' WHERE name = 'mm'", GRAPH,
     TFC_ERR_NOT_FOUND, "unknown op 'MatMul'", NULL},
    {"op of another arity", "UPDATE nodes SET op = 'matmul', attrs = '' WHERE name = 'r'",
     GRAPH, TFC_ERR_INVALID_ARGUMENT, "node 'r'", "takes 2 inputs, got 1"},
    {"an input missing", "DELETE FROM node_inputs WHERE node = " ID("mm") " AND pos = 1", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "node 'mm'", "takes 2 inputs, got 1"},
    {"every input missing", "DELETE FROM node_inputs WHERE node = " ID("r"), GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "node 'r'", "takes 1 inputs, got 0"},
    {"an input too many", "INSERT INTO node_inputs VALUES (" ID("r") ", 1, 'a')", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "node 'r'", "takes 1 inputs, got 2"},
    {"a variadic op with no input", "DELETE FROM node_inputs WHERE node = " ID("cat"), GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "node 'cat'", "takes 1 to 64 inputs, got 0"},
    {"a variadic op with 65 inputs",
     "WITH RECURSIVE k(n) AS (SELECT 3 UNION ALL SELECT n + 1 FROM k WHERE n < 64) "
     "INSERT INTO node_inputs SELECT " ID("cat") ", n, 'sp' FROM k",
     GRAPH, TFC_ERR_INVALID_ARGUMENT, "node 'cat'", "65"},
    {"a variable op given an input", "INSERT INTO node_inputs VALUES (" ID("w") ", 0, 'x')",
     GRAPH, TFC_ERR_INVALID_ARGUMENT, "'w'", "input"},
    /* ---- input references ---- */
    {"dangling input", "UPDATE node_inputs SET tensor = 'nosuch' WHERE node = " ID("r"), GRAPH,
     TFC_ERR_NOT_FOUND, "node 'r'", "input 'nosuch' does not exist"},
    {"empty input name", "UPDATE node_inputs SET tensor = '' WHERE node = " ID("r"), GRAPH,
     TFC_ERR_NOT_FOUND, "node 'r'", "input '' does not exist"},
    {"input output index out of range",
     "UPDATE node_inputs SET tensor = 'sp:3' WHERE node = " ID("cat") " AND pos = 0", GRAPH,
     TFC_ERR_NOT_FOUND, "node 'cat'", "input 'sp:3'"},
    {"input output index negative",
     "UPDATE node_inputs SET tensor = 'sp:-1' WHERE node = " ID("cat") " AND pos = 0", GRAPH,
     TFC_ERR_NOT_FOUND, "node 'cat'", "input 'sp:-1'"},
    {"input output index that wraps to 0 in 32 bits",
     "UPDATE node_inputs SET tensor = 'sp:4294967296' WHERE node = " ID("cat") " AND pos = 0",
     GRAPH, TFC_ERR_NOT_FOUND, "node 'cat'", "input 'sp:4294967296'"},
    {"input output index that is no number",
     "UPDATE node_inputs SET tensor = 'sp:one' WHERE node = " ID("cat") " AND pos = 0", GRAPH,
     TFC_ERR_NOT_FOUND, "node 'cat'", "input 'sp:one'"},
    {"input with an empty output index",
     "UPDATE node_inputs SET tensor = 'sp:' WHERE node = " ID("cat") " AND pos = 0", GRAPH,
     TFC_ERR_NOT_FOUND, "node 'cat'", "input 'sp:'"},
    {"input with a signed output index",
     "UPDATE node_inputs SET tensor = 'sp:+1' WHERE node = " ID("cat") " AND pos = 0", GRAPH,
     TFC_ERR_NOT_FOUND, "node 'cat'", "input 'sp:+1'"},
    {"a node reading itself (a cycle)", "UPDATE node_inputs SET tensor = 'r' WHERE node = " ID("r"),
     GRAPH, TFC_ERR_CYCLE, "node 'r'", "input 'r'"},
    {"a cycle through two nodes (forward reference)",
     "UPDATE node_inputs SET tensor = 'r' WHERE node = " ID("a") " AND pos = 0", GRAPH,
     TFC_ERR_CYCLE, "node 'a'", "input 'r'"},
    {"an input defined after its reader, which it depends on (a cycle)",
     "UPDATE node_inputs SET tensor = 'probs' WHERE node = " ID("r"), GRAPH, TFC_ERR_CYCLE,
     "node 'r'", "input 'probs' depends on 'r'"},
    {"an input stored after its reader (no cycle)",
     "UPDATE node_inputs SET tensor = 'one' WHERE node = " ID("r"), GRAPH, TFC_ERR_STORE,
     "node 'r'", "input 'one' is stored after it"},
    /* ---- control edges ---- */
    {"dangling control input", "UPDATE node_controls SET control = 'nosuch'", GRAPH,
     TFC_ERR_NOT_FOUND, "node 'cls'", "control input 'nosuch' does not exist"},
    {"a node waiting for itself", "INSERT INTO node_controls VALUES (" ID("r") ", 0, 'r')",
     GRAPH, TFC_ERR_CYCLE, "'r'", "cycle"},
    {"a control cycle through data edges",
     "INSERT INTO node_controls VALUES (" ID("h") ", 0, 'cls')", GRAPH, TFC_ERR_CYCLE,
     "cycle through node", NULL},
    {"two nodes waiting for each other",
     "INSERT INTO node_controls VALUES (" ID("r") ", 0, 'a'); "
     "INSERT INTO node_controls VALUES (" ID("a") ", 0, 'r')",
     GRAPH, TFC_ERR_CYCLE, "cycle", NULL},
    /* ---- names ---- */
    {"a name stored twice",
     NO_UNIQUE_NAMES "UPDATE nodes SET name = 'r' WHERE name = 'tot'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "'r'", "already used"},
    {"a name that reads as another after a NUL byte",
     "UPDATE nodes SET name = 'r' || char(0) || 'x' WHERE name = 'tot'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "'r'", "already used"},
    {"a name with ':'", "UPDATE nodes SET name = 'to:t' WHERE name = 'tot'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "'to:t'", "invalid name"},
    {"an empty name", "UPDATE nodes SET name = '' WHERE name = 'tot'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "reduce_sum", "invalid name"},
    {"a name of 300 characters",
     "UPDATE nodes SET name = printf('%.300c', 'n') WHERE name = 'tot'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "nnnnnnnn", "invalid name"},
    {"a placeholder name with a quote", "UPDATE nodes SET name = 'x\"' WHERE name = 'x'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "x\"", "invalid name"},
    /* ---- dtypes ---- */
    {"unknown placeholder dtype",
     "UPDATE nodes SET attrs = 'dtype=float33,shape=[-1,4]' WHERE name = 'x'", GRAPH,
     TFC_ERR_DTYPE, "node 'x'", "unknown dtype 'float33'"},
    {"empty variable dtype", "UPDATE nodes SET attrs = 'dtype=,shape=[4,3]' WHERE name = 'w'",
     GRAPH, TFC_ERR_DTYPE, "node 'w'", "unknown dtype ''"},
    {"unknown cast dtype", "UPDATE nodes SET attrs = 'dtype=complex64' WHERE name = 'cls32'",
     GRAPH, TFC_ERR_DTYPE, "node 'cls32'", "'complex64'"},
    {"a variable of another dtype than its readers take",
     "UPDATE nodes SET attrs = 'dtype=int32,shape=[4,3]' WHERE name = 'w'", GRAPH,
     TFC_ERR_DTYPE, "'mm'", NULL},
    {"an input of the wrong dtype",
     "UPDATE node_inputs SET tensor = 'tot' WHERE node = " ID("inc") " AND pos = 1", GRAPH,
     TFC_ERR_DTYPE, "'inc'", NULL},
    {"an optimizer-style update of a non-variable",
     "UPDATE node_inputs SET tensor = 'one' WHERE node = " ID("inc") " AND pos = 0", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "node 'inc'", "must be a variable"},
    /* ---- shapes ---- */
    {"negative variable dimension",
     "UPDATE nodes SET attrs = 'dtype=float32,shape=[-4,3]' WHERE name = 'w'", GRAPH,
     TFC_ERR_SHAPE, "'w'", "-4"},
    {"unknown (-1) variable dimension",
     "UPDATE nodes SET attrs = 'dtype=float32,shape=[-1,3]' WHERE name = 'w'", GRAPH,
     TFC_ERR_SHAPE, "'w'", NULL},
    {"a placeholder dimension below -1",
     "UPDATE nodes SET attrs = 'dtype=float32,shape=[-2,4]' WHERE name = 'x'", GRAPH,
     TFC_ERR_SHAPE, "'x'", "-2"},
    {"a variable whose bytes overflow",
     "UPDATE nodes SET attrs = 'dtype=float32,shape=[4294967296,4294967296]' WHERE name = 'b'",
     GRAPH, TFC_ERR_SHAPE, "'b'", NULL},
    {"a placeholder whose elements overflow int64",
     "UPDATE nodes SET attrs = 'dtype=float32,shape=[-1,9223372036854775807,4]' "
     "WHERE name = 'x'", GRAPH, TFC_ERR_SHAPE, "'x'", NULL},
    {"a dimension beyond int64",
     "UPDATE nodes SET attrs = 'dtype=float32,shape=[99999999999999999999,3]' WHERE name = 'w'",
     GRAPH, TFC_ERR_INVALID_ARGUMENT, "'w'", "99999999999999999999 is outside int64"},
    {"nine dimensions",
     "UPDATE nodes SET attrs = 'dtype=float32,shape=[1,1,1,1,1,1,1,4,3]' WHERE name = 'w'",
     GRAPH, TFC_ERR_INVALID_ARGUMENT, "'w'", "at most 8"},
    {"a shape of another size than its readers take",
     "UPDATE nodes SET attrs = 'dtype=float32,shape=[5,3]' WHERE name = 'w'", GRAPH,
     TFC_ERR_SHAPE, "'mm'", NULL},
    {"an input of the wrong shape",
     "UPDATE node_inputs SET tensor = 'b' WHERE node = " ID("mm") " AND pos = 1", GRAPH,
     TFC_ERR_SHAPE, "'mm'", NULL},
    {"a reshape with two unknown dimensions",
     "UPDATE nodes SET attrs = 'shape=[-1,-1]' WHERE name = 'flat'", GRAPH, TFC_ERR_SHAPE,
     "'flat'", "more than one -1"},
    {"an axis out of range", "UPDATE nodes SET attrs = 'axis=5' WHERE name = 'cls'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "'cls'", "5"},
    {"an axis beyond int64",
     "UPDATE nodes SET attrs = 'axis=99999999999999999999' WHERE name = 'cls'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "'cls'", "99999999999999999999 is outside int64"},
    {"a split into 0 parts", "UPDATE nodes SET attrs = 'num=0,axis=1' WHERE name = 'sp'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "'sp'", NULL},
    {"a split into parts that do not divide",
     "UPDATE nodes SET attrs = 'num=2,axis=1' WHERE name = 'sp'", GRAPH, TFC_ERR_SHAPE, "'sp'",
     NULL},
    {"a split into 65 parts", "UPDATE nodes SET attrs = 'num=65,axis=1' WHERE name = 'sp'",
     GRAPH, TFC_ERR_INVALID_ARGUMENT, "'sp'", NULL},
    /* ---- attribute text ---- */
    {"attributes without '='", "UPDATE nodes SET attrs = 'transpose_a' WHERE name = 'mm'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "node 'mm'", "expected name=value"},
    {"an unknown attribute", "UPDATE nodes SET attrs = 'transpose_c=1' WHERE name = 'mm'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "node 'mm'", "no attribute 'transpose_c'"},
    {"an attribute name of 100 characters",
     "UPDATE nodes SET attrs = printf('%.100c=1', 'a') WHERE name = 'mm'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "node 'mm'", "too long"},
    {"an integer attribute that is a word", "UPDATE nodes SET attrs = 'axis=one' WHERE name = 'cls'",
     GRAPH, TFC_ERR_INVALID_ARGUMENT, "node 'cls'", "needs an integer"},
    {"trailing text after a value", "UPDATE nodes SET attrs = 'axis=1x' WHERE name = 'cls'",
     GRAPH, TFC_ERR_INVALID_ARGUMENT, "node 'cls'", "unexpected"},
    {"a float attribute that is no number",
     "UPDATE nodes SET attrs = 'alpha=abc' WHERE name = 'r'", GRAPH, TFC_ERR_INVALID_ARGUMENT,
     "node 'r'", "needs a number"},
    {"a float attribute that is empty", "UPDATE nodes SET attrs = 'alpha=' WHERE name = 'r'",
     GRAPH, TFC_ERR_INVALID_ARGUMENT, "node 'r'", "needs a number"},
    {"a list attribute without brackets",
     "UPDATE nodes SET attrs = 'axes=1,keepdims=0' WHERE name = 'tot'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "node 'tot'", "needs a list"},
    {"a list attribute not closed",
     "UPDATE nodes SET attrs = 'axes=[1,keepdims=0' WHERE name = 'tot'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "node 'tot'", "bad list at \"keepdims=0\""},
    {"a list attribute holding a word",
     "UPDATE nodes SET attrs = 'axes=[one],keepdims=0' WHERE name = 'tot'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "node 'tot'", "bad list at \"one]"},
    {"a reduction axis out of range",
     "UPDATE nodes SET attrs = 'axes=[7],keepdims=0' WHERE name = 'tot'", GRAPH,
     TFC_ERR_INVALID_ARGUMENT, "'tot'", "7"},
    {"attribute text longer than a record holds (its tail would be cut)",
     "UPDATE nodes SET attrs = 'transpose_a=0' || printf('%.1100c', ' ') || ',transpose_b=1' "
     "WHERE name = 'mm'", GRAPH, TFC_ERR_STORE, "node 'mm'", "attributes of 1127 characters"},
    {"attributes of another op", "UPDATE nodes SET attrs = 'transpose_a=1' WHERE name = 'w'",
     GRAPH, TFC_ERR_INVALID_ARGUMENT, "node 'w'", "no attribute 'transpose_a'"},
    /* ---- variable initializers ---- */
    {"unknown initializer", "UPDATE nodes SET init = 'xavier' WHERE name = 'w'", GRAPH,
     TFC_ERR_STORE, "variable 'w'", "unknown initializer 'xavier'"},
    {"empty initializer", "UPDATE nodes SET init = '' WHERE name = 'w'", GRAPH, TFC_ERR_STORE,
     "variable 'w'", "unknown initializer ''"},
    {"an initializer given as a number", "UPDATE nodes SET init = 3 WHERE name = 'w'", GRAPH,
     TFC_ERR_STORE, "variable 'w'", "unknown initializer '3'"},
    /* ---- constants and their data ---- */
    {"constant data with a wrong CRC",
     "UPDATE node_data SET crc32 = crc32 + 1 WHERE node = " ID("c"), GRAPH, TFC_ERR_STORE,
     "constant 'c'", "CRC-32"},
    {"constant data shorter than its shape",
     "UPDATE node_data SET data = zeroblob(4), crc32 = {zcrc:4} WHERE node = " ID("c"), GRAPH,
     TFC_ERR_STORE, "constant 'c'", "4 bytes of data where 12"},
    {"constant data empty", "UPDATE node_data SET data = x'', crc32 = 0 WHERE node = " ID("c"),
     GRAPH, TFC_ERR_STORE, "constant 'c'", "0 bytes of data where 12"},
    {"constant data missing", "DELETE FROM node_data WHERE node = " ID("c"), GRAPH,
     TFC_ERR_STORE, "constant 'c'", "0 bytes of data where 12"},
    {"constant data longer than its shape",
     "INSERT INTO node_data VALUES (" ID("c") ", 1, {zcrc:4}, zeroblob(4))", GRAPH,
     TFC_ERR_STORE, "constant 'c'", "more data"},
    {"constant chunk numbered from 1", "UPDATE node_data SET seq = 1 WHERE node = " ID("c"),
     GRAPH, TFC_ERR_STORE, "constant 'c'", "chunk 0 is missing"},
    {"constant of a wider dtype than its data",
     "UPDATE nodes SET attrs = 'dtype=float64,shape=[3]' WHERE name = 'c'", GRAPH,
     TFC_ERR_STORE, "constant 'c'", "12 bytes of data where 24"},
    {"constant of an unknown dtype",
     "UPDATE nodes SET attrs = 'dtype=float16,shape=[3]' WHERE name = 'c'", GRAPH,
     TFC_ERR_STORE, "constant 'c'", "unknown dtype 'float16'"},
    {"constant with a negative dimension",
     "UPDATE nodes SET attrs = 'dtype=float32,shape=[-3]' WHERE name = 'c'", GRAPH,
     TFC_ERR_STORE, "constant 'c'", "negative dimension"},
    {"constant whose bytes overflow",
     "UPDATE nodes SET attrs = 'dtype=float32,shape=[4611686018427387904]' WHERE name = 'c'",
     GRAPH, TFC_ERR_STORE, "constant 'c'", "more bytes than 64 bits"},
    {"constant data stored as text",
     "UPDATE node_data SET data = 'abcdefghijkl' WHERE node = " ID("c"), GRAPH, TFC_ERR_STORE,
     "constant 'c'", "CRC-32"},
    /* ---- signatures ---- */
    {"signature missing", "DELETE FROM signatures WHERE name = 'predict'", SIG_PREDICT,
     TFC_ERR_NOT_FOUND, "no signature 'predict'", NULL},
    {"signature feed names no node",
     "UPDATE signature_tensors SET tensor = 'nosuch' WHERE signature = 'predict' AND role = 'feed'",
     SIG_PREDICT, TFC_ERR_STORE, "feed 'nosuch'", "signature 'predict'"},
    {"signature output names no node",
     "UPDATE signature_tensors SET tensor = 'gone:1' WHERE signature = 'predict' AND "
     "role = 'output' AND pos = 1", SIG_PREDICT, TFC_ERR_STORE, "output 'gone:1'", NULL},
    {"signature output that is empty",
     "UPDATE signature_tensors SET tensor = '' WHERE signature = 'predict' AND role = 'output' "
     "AND pos = 0", SIG_PREDICT, TFC_ERR_STORE, "output ''", NULL},
    {"signature output that is NULL (a table rebuilt without its NOT NULL; found by fuzzing)",
     "CREATE TABLE st_copy AS SELECT * FROM signature_tensors; DROP TABLE signature_tensors; "
     "ALTER TABLE st_copy RENAME TO signature_tensors; "
     "UPDATE signature_tensors SET tensor = NULL WHERE signature = 'predict' AND role = 'output' "
     "AND pos = 0", SIG_PREDICT, TFC_ERR_STORE, "output ''", NULL},
    {"signature loss names no node", "UPDATE signatures SET loss = 'lost' WHERE name = 'train'",
     SIG_TRAIN, TFC_ERR_STORE, "loss 'lost'", "signature 'train'"},
    {"signature train_op names no node",
     "UPDATE signatures SET train_op = 'step_op' WHERE name = 'train'", SIG_TRAIN, TFC_ERR_STORE,
     "train_op 'step_op'", NULL},
    {"signature metric names no node",
     "UPDATE signature_tensors SET tensor = 'acc' WHERE signature = 'train' AND role = 'metric'",
     SIG_TRAIN, TFC_ERR_STORE, "metric 'acc'", NULL},
    {"signature names a node of a deleted graph", "DELETE FROM nodes WHERE name = 'probs'",
     SIG_PREDICT, TFC_ERR_STORE, "output 'probs'", NULL},
    {"signature_tensors table missing", "DROP TABLE signature_tensors", SIG_PREDICT,
     TFC_ERR_STORE, "no such table: signature_tensors", "signature 'predict'"},
    {"signatures table missing", "DROP TABLE signatures", SIG_PREDICT, TFC_ERR_STORE,
     "no such table: signatures", NULL},
    /* ---- checkpoints ---- */
    {"no checkpoint", "DELETE FROM checkpoints", RESTORE, TFC_ERR_NOT_FOUND, "has no checkpoint",
     NULL},
    {"a variable missing from the checkpoint", "DELETE FROM variables WHERE name = 'w'", RESTORE,
     TFC_ERR_NOT_FOUND, "lacks 1 variable", ": w"},
    {"a variable moved to another checkpoint",
     "UPDATE variables SET checkpoint = 999 WHERE name = 'b'", RESTORE, TFC_ERR_NOT_FOUND,
     "lacks 1 variable", ": b"},
    {"a variable stored under another name",
     "UPDATE variables SET name = 'W' WHERE name = 'w'", RESTORE, TFC_ERR_NOT_FOUND,
     "lacks 1 variable", ": w"},
    {"a variable of another dtype", "UPDATE variables SET dtype = 'float64' WHERE name = 'w'",
     RESTORE, TFC_ERR_SHAPE, "variable 'w'", "float64"},
    {"a variable of an unknown dtype", "UPDATE variables SET dtype = 'float33' WHERE name = 'w'",
     RESTORE, TFC_ERR_SHAPE, "variable 'w'", "float33"},
    {"a counter of a narrower dtype",
     "UPDATE variables SET dtype = 'int32', nbytes = 4 WHERE name = 'global_step'", RESTORE,
     TFC_ERR_SHAPE, "variable 'global_step'", "int32"},
    {"a variable of another shape", "UPDATE variables SET shape = '[3,4]' WHERE name = 'w'",
     RESTORE, TFC_ERR_SHAPE, "variable 'w'", "[3,4]"},
    {"a variable of another rank", "UPDATE variables SET shape = '[12]' WHERE name = 'w'",
     RESTORE, TFC_ERR_SHAPE, "variable 'w'", "[12]"},
    {"a shape that does not parse", "UPDATE variables SET shape = '[4,' WHERE name = 'w'",
     RESTORE, TFC_ERR_SHAPE, "variable 'w'", "'[4,'"},
    {"a shape that is no list", "UPDATE variables SET shape = 'four by three' WHERE name = 'w'",
     RESTORE, TFC_ERR_SHAPE, "variable 'w'", "four by three"},
    {"a negative dimension", "UPDATE variables SET shape = '[-4,3]' WHERE name = 'w'", RESTORE,
     TFC_ERR_SHAPE, "variable 'w'", "-4"},
    {"a dimension beyond int64",
     "UPDATE variables SET shape = '[99999999999999999999,3]' WHERE name = 'w'", RESTORE,
     TFC_ERR_SHAPE, "variable 'w'", "99999999999999999999"},
    {"a shape of nine dimensions",
     "UPDATE variables SET shape = '[1,1,1,1,1,1,1,4,3]' WHERE name = 'w'", RESTORE,
     TFC_ERR_SHAPE, "variable 'w'", "1,1,1,1,1,1,1,4,3"},
    {"recorded bytes that differ", "UPDATE variables SET nbytes = 47 WHERE name = 'w'", RESTORE,
     TFC_ERR_STORE, "variable 'w'", "47 bytes recorded for 48"},
    {"recorded bytes negative", "UPDATE variables SET nbytes = -48 WHERE name = 'w'", RESTORE,
     TFC_ERR_STORE, "variable 'w'", "-48 bytes"},
    {"a chunk with a wrong CRC",
     "UPDATE variable_chunks SET crc32 = crc32 + 1 WHERE variable = " VAR("w"), RESTORE,
     TFC_ERR_STORE, "variable 'w'", "chunk 0 fails its CRC-32"},
    {"a chunk whose bytes changed",
     "UPDATE variable_chunks SET data = zeroblob(48) WHERE variable = " VAR("w"), RESTORE,
     TFC_ERR_STORE, "variable 'w'", "CRC-32"},
    {"a chunk shorter than the variable (its CRC right)",
     "UPDATE variable_chunks SET data = zeroblob(8), crc32 = {zcrc:8} WHERE variable = " VAR("w"),
     RESTORE, TFC_ERR_STORE, "variable 'w'", "8 bytes of data where 48"},
    {"a chunk emptied", "UPDATE variable_chunks SET data = x'', crc32 = 0 WHERE variable = " VAR("w"),
     RESTORE, TFC_ERR_STORE, "variable 'w'", "0 bytes of data where 48"},
    {"a chunk missing", "DELETE FROM variable_chunks WHERE variable = " VAR("b"), RESTORE,
     TFC_ERR_STORE, "variable 'b'", "0 bytes of data where 12"},
    {"a chunk too many",
     "INSERT INTO variable_chunks VALUES (" VAR("b") ", 1, {zcrc:4}, zeroblob(4))", RESTORE,
     TFC_ERR_STORE, "variable 'b'", "more data than its 12 bytes"},
    {"a chunk numbered from 1", "UPDATE variable_chunks SET seq = 1 WHERE variable = " VAR("b"),
     RESTORE, TFC_ERR_STORE, "variable 'b'", "chunk 0 is missing"},
    {"a chunk numbered negative", "UPDATE variable_chunks SET seq = -1 WHERE variable = " VAR("b"),
     RESTORE, TFC_ERR_STORE, "variable 'b'", "chunk 0 is missing"},
    {"a chunk stored as text",
     "UPDATE variable_chunks SET data = 'abcdefghijkl' WHERE variable = " VAR("b"), RESTORE,
     TFC_ERR_STORE, "variable 'b'", "CRC-32"},
    {"a CRC stored as text", "UPDATE variable_chunks SET crc32 = 'abc' WHERE variable = " VAR("b"),
     RESTORE, TFC_ERR_STORE, "variable 'b'", "CRC-32"},
    {"checkpoints table missing", "DROP TABLE checkpoints", RESTORE, TFC_ERR_STORE,
     "no such table: checkpoints", NULL},
    {"variables table missing", "DROP TABLE variables", RESTORE, TFC_ERR_STORE,
     "no such table: variables", NULL},
    {"variable_chunks table missing", "DROP TABLE variable_chunks", RESTORE, TFC_ERR_STORE,
     "no such table: variable_chunks", NULL},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- the base store ------------------------------------------------------------------------ */

static tfc_graph *base_graph;
static tfc_session *session;
static tfc_value *w_initial;   /* w as initialized: a failed restore must leave it so */
static const char *base_path;

static tfc_shape S1(int64_t a) { return tfc_shape_of(1, (int64_t[]){a}); }
static tfc_shape S2(int64_t a, int64_t b) { return tfc_shape_of(2, (int64_t[]){a, b}); }

/* x[-1,4] -> matmul w[4,3] -> bias_add b -> add constant c -> leaky_relu -> split in 3 ->
 * concat (reversed) -> softmax "probs" -> argmax "cls" (waits for h: a control edge) -> cast;
 * a reshape and a reduction of probs; global_step += 1 as "inc". */
static tfc_graph *build_graph(void)
{
    tfc_graph *g;
    if (tfc_graph_create(&g)) return NULL;
    tfc_graph_set_seed(g, 11);
    tfc_value *cv = NULL, *onev = NULL;
    tfc_value_from_data(TFC_FLOAT32, S1(3), (float[]){0.5f, -1.0f, 2.0f}, &cv);
    tfc_value_from_data(TFC_INT64, tfc_shape_of(0, NULL), (int64_t[]){1}, &onev);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 4));
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, S2(4, 3), tfc_init_glorot_uniform(1));
    tfc_tensor *b = tfc_variable(g, "b", TFC_FLOAT32, S1(3), tfc_init_uniform(-0.1, 0.1, 2));
    tfc_tensor *c = tfc_constant(g, "c", cv);
    tfc_tensor *mm = tfc_matmul(g, x, w, 0, 0), *h = tfc_bias_add(g, mm, b);
    tfc_tensor *a = tfc_add(g, h, c), *r = tfc_leaky_relu(g, a, 0.2);
    tfc_tensor *parts[3] = {NULL, NULL, NULL};
    tfc_split(g, r, 3, 1, parts);
    tfc_tensor *cat = tfc_concat(g, 3, (tfc_tensor *[]){parts[2], parts[1], parts[0]}, 1);
    tfc_tensor *probs = tfc_softmax(g, cat, -1), *cls = tfc_argmax(g, probs, 1);
    tfc_tensor_add_control_input(cls, h);
    tfc_tensor *cls32 = tfc_cast(g, cls, TFC_INT32);
    tfc_tensor *flat = tfc_reshape(g, probs, S1(-1));
    tfc_tensor *tot = tfc_reduce_sum(g, probs, 1, (int64_t[]){1}, 0);
    tfc_tensor *one = tfc_constant(g, "one", onev);
    tfc_tensor *inc = tfc_assign_add(g, tfc_global_step(g), one);
    const char *names[] = {"mm", "h", "a", "r", "sp", "cat", "probs", "cls", "cls32", "flat",
                           "tot", "inc"};
    tfc_tensor *named[] = {mm, h, a, r, parts[0], cat, probs, cls, cls32, flat, tot, inc};
    for (int i = 0; i < 12; i++) tfc_tensor_set_name(named[i], names[i]);
    tfc_value_destroy(cv);
    tfc_value_destroy(onev);
    if (tfc_graph_status(g)) {
        fprintf(stderr, "build_graph: %s\n", tfc_graph_errmsg(g));
        tfc_graph_destroy(g);
        return NULL;
    }
    return g;
}

/* The graph, signatures "predict" and "train", and one checkpoint (step 1) into path. */
static int write_base(const char *path)
{
    const char *feeds[1] = {"x"}, *outputs[2] = {"probs", "cls"}, *metrics[1] = {"flat"};
    tfc_signature predict = {.n_feeds = 1, .feeds = feeds, .n_outputs = 2, .outputs = outputs};
    tfc_signature train = {.n_feeds = 1, .feeds = feeds, .n_metrics = 1, .metrics = metrics,
                           .loss = "tot", .train_op = "inc"};
    tfc_store *st;
    if (tfc_store_open(path, TFC_STORE_CREATE, &st)) {
        fprintf(stderr, "write_base: %s\n", tfc_errmsg());
        return -1;
    }
    tfc_tensor *inc = tfc_graph_find(base_graph, "inc"), *w = tfc_graph_find(base_graph, "w");
    tfc_value *quarter = NULL; /* stored w differs from the initialized one */
    int rc = tfc_value_from_data(TFC_FLOAT32, S2(4, 3), (float[12]){0.25f, 0.25f, 0.25f, 0.25f,
                                 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f},
                                 &quarter) ||
             tfc_session_write_variable(session, w, quarter) ||
             tfc_store_save_graph(st, base_graph) ||
             tfc_store_set_signature(st, "predict", &predict) ||
             tfc_store_set_signature(st, "train", &train) ||
             tfc_session_run(session, 0, NULL, NULL, 0, NULL, NULL, 1, &inc) ||
             tfc_store_checkpoint(st, session, 1, NULL) || tfc_store_flush(st);
    if (rc) fprintf(stderr, "write_base: %s / %s\n", tfc_store_errmsg(st),
                    tfc_session_errmsg(session));
    tfc_value_destroy(quarter);
    tfc_store_close(st);
    return rc ? -1 : 0;
}

static int suite_init(void)
{
    if (bad_dir_create("tfc-bad-rows") || test_ctx_open()) return -1;
    base_path = strdup(bad_path("base.db"));
    if (!(base_graph = build_graph())) return -1;
    if (tfc_session_create(test_ctx, base_graph, &session) ||
        tfc_session_init_variables(session) || write_base(base_path) ||
        tfc_session_init_variables(session) ||
        tfc_session_read_variable(session, tfc_graph_find(base_graph, "w"), &w_initial))
        return -1;
    return 0;
}

static int suite_clean(void)
{
    tfc_value_destroy(w_initial);
    tfc_session_destroy(session);
    tfc_graph_destroy(base_graph);
    free((char *)base_path);
    bad_dir_remove();
    return test_ctx_close();
}

/* ---- one case -------------------------------------------------------------------------------- */

/* sql with each {zcrc:N} replaced by the CRC-32 of N zero bytes (a chunk whose CRC is right). */
static char *expand_sql(const char *sql)
{
    size_t cap = strlen(sql) + 64, n = 0;
    char *out = malloc(cap);
    for (const char *p = sql; out && *p;) {
        unsigned len;
        int used = 0;
        if (sscanf(p, "{zcrc:%u}%n", &len, &used) == 1 && used > 0) {
            unsigned char *zeros = calloc(len + 1, 1);
            n += (size_t)snprintf(out + n, cap - n, "%lu",
                                  zeros ? crc32(0, zeros, len) : 0ul);
            free(zeros);
            p += used;
        } else {
            out[n++] = *p++;
        }
        out[n] = 0;
    }
    return out;
}

/* Applies the case's SQL to the store at path (foreign keys off: rows are edited raw). */
static int tamper(const char *path, const char *sql)
{
    if (!sql || !*sql) return 0;
    tfc_store *st;
    if (tfc_store_open(path, 0, &st)) {
        fprintf(stderr, "tamper: open: %s\n", tfc_errmsg());
        return -1;
    }
    char *x = expand_sql(sql);
    int rc = !x || tfc_store_exec_sql(st, "PRAGMA foreign_keys = OFF") ||
             tfc_store_exec_sql(st, x);
    if (rc) fprintf(stderr, "tamper: %s\n", tfc_store_errmsg(st));
    free(x);
    tfc_store_close(st);
    return rc ? -1 : 0;
}

/* Tries the case's load on the store at path, opened read-only; the message into msg. */
static tfc_status attempt(enum load load, const char *path, char *msg, size_t len)
{
    tfc_store *st;
    tfc_status s = tfc_store_open(path, TFC_STORE_READONLY, &st);
    if (s) {
        snprintf(msg, len, "%s", tfc_errmsg());
        return s;
    }
    tfc_graph *g = NULL;
    tfc_signature *sig = NULL;
    switch (load) {
    case OPEN: break;
    case GRAPH: s = tfc_store_load_graph(st, &g); break;
    case SIG_PREDICT: s = tfc_store_get_signature(st, "predict", &sig); break;
    case SIG_TRAIN: s = tfc_store_get_signature(st, "train", &sig); break;
    case RESTORE: s = tfc_store_restore(st, session, NULL, NULL); break;
    }
    snprintf(msg, len, "%s", s ? tfc_store_errmsg(st) : "(no error)");
    tfc_graph_destroy(g);
    tfc_signature_free(sig);
    tfc_store_close(st);
    return s;
}

/* After a read-only use: SQLite's integrity check, when the store opens at all. */
static int integrity_ok(const char *path)
{
    tfc_store *st;
    if (tfc_store_open(path, TFC_STORE_READONLY, &st)) return 1; /* the bytes check covers it */
    int64_t bad = -1;
    tfc_status s = tfc_store_query_int(st, "SELECT count(*) FROM pragma_integrity_check "
                                           "WHERE integrity_check <> 'ok'", &bad);
    tfc_store_close(st);
    return s == TFC_OK && bad == 0;
}

/* A failed restore leaves the session's variables as they were. */
static int w_unchanged(void)
{
    tfc_value *now = NULL;
    if (tfc_session_read_variable(session, tfc_graph_find(base_graph, "w"), &now)) return 0;
    int same = tfc_value_nbytes(now) == tfc_value_nbytes(w_initial) &&
               !memcmp(tfc_value_cdata(now), tfc_value_cdata(w_initial), tfc_value_nbytes(now));
    tfc_value_destroy(now);
    return same;
}

/* Runs case i; 1 when it counts as a failure. */
static int run_case(int i, const struct row_case *c)
{
    char name[64], msg[1024] = "";
    snprintf(name, sizeof name, "case-%03d.db", i);
    const char *path = bad_path(name);
    bad_remove_store(path);
    if (bad_copy_file(base_path, path) || tamper(path, c->sql))
        return bad_verdict("rows", i, c->what, 0, 0, "could not prepare the damaged store");
    size_t n;
    unsigned char *before = bad_read_file(path, &n);
    tfc_status s = attempt(c->load, path, msg, sizeof msg);
    int wal_ok = bad_check_wal_shm(path);
    int same = before && bad_same_bytes(path, before, n);
    int intact = integrity_ok(path);
    bad_check_wal_shm(path); /* the integrity check's own open, if any */
    int vars_ok = c->load != RESTORE || w_unchanged();
    int msg_ok = strstr(msg, c->msg) && (!c->msg2 || strstr(msg, c->msg2));
    int passed = s == c->want && msg_ok && same && intact && wal_ok && vars_ok;
    free(before);
    bad_remove_store(path);
    return bad_verdict("rows", i, c->what, c->pending, passed, "%s%s%s%s%s%s [%s] %s",
                       s != c->want ? "WRONG STATUS " : "", !msg_ok ? "MESSAGE LACKS THE "
                       "PROBLEM " : "", !same ? "BYTES CHANGED " : "",
                       !intact ? "INTEGRITY CHECK FAILS " : "", !wal_ok ? "-wal/-shm LEFT " : "",
                       !vars_ok ? "VARIABLES CHANGED " : "", tfc_status_string(s), msg);
}

/* The harness itself: the undamaged store loads every way (so each failure below comes from
 * its row's damage). */
static void test_undamaged(void)
{
    static const enum load loads[] = {OPEN, GRAPH, SIG_PREDICT, SIG_TRAIN, RESTORE};
    for (int k = 0; k < 5; k++) {
        char msg[1024];
        tfc_status s = attempt(loads[k], base_path, msg, sizeof msg);
        if (s) printf("    undamaged load %d: %s\n", k, msg);
        CU_ASSERT_EQUAL(s, TFC_OK);
    }
    tfc_session_init_variables(session); /* the restore above changed them */
    bad_check_wal_shm(base_path);
}

static void test_damaged_rows(void)
{
    int failed = 0;
    printf("\n");
    for (int i = 0; i < N_CASES; i++) failed += run_case(i, &cases[i]);
    bad_summary("test_bad_store_rows");
    CU_ASSERT_EQUAL(failed, 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("bad store rows", suite_init, suite_clean);
    TEST_ADD(test_undamaged);
    TEST_ADD(test_damaged_rows);
    return test_main();
}
