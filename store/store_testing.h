/* store_testing.h: hooks for the test programs (they link the convenience library, so they
 * see hidden symbols). Not part of the public API; free of <sqlite3.h>, which only store/
 * includes. */
#ifndef TFC_STORE_TESTING_H
#define TFC_STORE_TESTING_H

#include <stddef.h>
#include <stdint.h>
#include "store_api.h"

/* Chunk size in bytes for the tensors written from now on (0: back to TFC_STORE_CHUNK_BYTES,
 * 64 MiB); rounded down to a multiple of 8 so that no element straddles two chunks. */
void tfc_store_set_chunk_bytes(size_t bytes);
/* How long a write waits for another process's lock (ms); st NULL sets the default of the
 * stores opened from now on (0: back to TFC_STORE_BUSY_TIMEOUT_MS). */
void tfc_store_set_busy_timeout(tfc_store *st, int ms);
/* Runs SQL on the caller's connection (tests: hold a write transaction, bump user_version). */
tfc_status tfc_store_exec_sql(tfc_store *st, const char *sql);
/* The first column of the first row of a query, as an integer (after pending writes). */
tfc_status tfc_store_query_int(tfc_store *st, const char *sql, int64_t *out);
/* Adds one migration after the built-in ones (tfc_store_schema_version grows by one), to test
 * the migration path; NULL removes it. */
void tfc_store_set_test_migration(const char *sql);
/* 0: the training lock uses no OS lock, as on a file system without working locks (its
 * record alone decides whether a holder may still run); 1 (default): back to normal. */
void tfc_store_set_os_locks(int on);
/* Metrics handed to the writer per batch for the stores of this process (0: back to
 * TFC_STORE_METRIC_BATCH, 1024), so that batches commit between checkpoints. */
void tfc_store_set_metric_batch(int n);
/* Write transactions committed through this store so far (metrics come in batches). */
uint64_t tfc_store_write_transactions(tfc_store *st);

/* Fault-tolerance tests (tests/test_killnine): fn is called on the store's writer thread at
 * three moments of each checkpoint transaction, with the checkpoint's step:
 *   TFC_STORE_TXN_BEGUN       the transaction is open (BEGIN IMMEDIATE done, the checkpoint's
 *                             row inserted; its variables not written yet);
 *   TFC_STORE_TXN_COMMITTING  every row written and old checkpoints pruned, COMMIT starting;
 *   TFC_STORE_TXN_COMMITTED   COMMIT returned: the checkpoint is durable.
 * A process killed after BEGUN and before COMMITTED's call may or may not hold the checkpoint
 * (the commit may have completed); one killed before BEGUN does not. fn must not call the
 * store; it may block (holding the transaction open). One store per process at a time: set it
 * before the first checkpoint; NULL removes it, and so does closing the store. */
enum { TFC_STORE_TXN_BEGUN, TFC_STORE_TXN_COMMITTING, TFC_STORE_TXN_COMMITTED };
typedef void (*tfc_store_txn_hook)(void *arg, int64_t step, int phase);
void tfc_store_set_txn_hook(tfc_store *st, tfc_store_txn_hook fn, void *arg);

#endif
