/* dnnl_thread.h: one oneDNN CPU engine and stream per thread, shared by the oneDNN codelets
 * (conv_dnnl.c, matmul_dnnl.c), each of which hangs its own cache of primitives on it. The
 * state is made on the thread's first oneDNN task and freed when the thread ends (StarPU joins
 * its workers at shutdown): the users' caches first, then the stream and the engine. Only built
 * with oneDNN (TFC_HAVE_DNNL). */
#ifndef TFC_DNNL_THREAD_H
#define TFC_DNNL_THREAD_H

#include <oneapi/dnnl/dnnl.h>

enum tfc_dnnl_user { TFC_DNNL_CONV, TFC_DNNL_MATMUL, TFC_DNNL_USERS };

struct tfc_dnnl_thread {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    void *cache[TFC_DNNL_USERS];                /* each user's state, made by the user */
    void (*cache_free[TFC_DNNL_USERS])(void *); /* how it is freed at thread exit */
};

/* The calling thread's state, created on first use; NULL when it cannot be (out of memory,
 * oneDNN refused an engine). */
struct tfc_dnnl_thread *tfc_dnnl_thread(void);

/* User u's cache on the calling thread, made by calloc(1, size) on first use and released
 * with free_fn (which frees what it holds and then the block) at thread exit; NULL when the
 * thread state or the block cannot be made. *t receives the thread's state. */
void *tfc_dnnl_thread_cache(enum tfc_dnnl_user u, size_t size, void (*free_fn)(void *),
                            struct tfc_dnnl_thread **t);

/* Threads holding a state now (tests: it falls back when the workers end). */
int tfc_dnnl_live_threads(void);

#endif
