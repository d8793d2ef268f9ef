/* lock.h: the store's training lock (lock.c): one training writer per store, across processes
 * and hosts, and the process-wide table of open store files that keeps our descriptors on a
 * database file open while any store of this process uses it. Only store/ includes it. */
#ifndef TFC_STORE_LOCK_H
#define TFC_STORE_LOCK_H

#include <stddef.h>
#include <sqlite3.h>
#include "store_api.h"

/* Registers the store's file (after SQLite has opened it) in the process's table of open store
 * files. Allocates st->lock; TFC_ERR_OUT_OF_MEMORY with a message in st->msg. */
tfc_status tfc_store_lock_attach(tfc_store *st);
/* Called once the store's SQLite connections are closed: drops an OS lock still held, and
 * closes our descriptors on the file when no store of this process has it open any more
 * (closing one earlier would drop the POSIX locks of the other stores' SQLite connections).
 * Frees st->lock; NULL is a no-op. */
void tfc_store_lock_detach(tfc_store *st);

/* Takes the store's training lock: an OS lock that dies with the process, and a record of
 * the holder (process id, host, boot, start time) in the store's meta table. A record whose
 * holder has ended (its OS lock is free; on a file system without locks: same host and the
 * process is gone, or the host has restarted) is taken over. TFC_ERR_STORE naming the holder
 * when another writer trains the store; TFC_OK at once when st holds it already. */
tfc_status tfc_store_train_lock(tfc_store *st);
/* Deletes the record (when it is still ours) and drops the OS lock; nothing when not held. */
void tfc_store_train_unlock(tfc_store *st);

/* The training writer recorded in the database db ("process P on host 'H' since T"): 0 when
 * one is recorded, else -1 (none, or unreadable). For messages: takes no lock of ours. */
int tfc_store_train_holder(sqlite3 *db, char *who, size_t len);

#endif
