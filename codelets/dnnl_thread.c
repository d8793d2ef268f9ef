/* dnnl_thread.c: the per-thread oneDNN engine and stream of dnnl_thread.h. oneDNN runs on the
 * calling thread alone (Debian's build threads with OpenMP: conv_dnnl.c and matmul_dnnl.c set
 * one thread per call), so nothing here is shared between threads but the live count. */
#ifdef HAVE_CONFIG_H /* configure's; scripts/fuzz.sh builds without it: then no oneDNN */
#include "config.h"
#endif

#ifdef TFC_HAVE_DNNL
#include "dnnl_thread.h"

#include <pthread.h>
#include <stdlib.h>

static __thread struct tfc_dnnl_thread *tls_state;
static int live_threads; /* threads holding a state (atomic) */
static pthread_key_t state_key;
static pthread_once_t state_key_once = PTHREAD_ONCE_INIT;

/* The thread-exit destructor: the users' caches (their primitives need the engine), then the
 * stream and the engine. */
static void state_free(void *arg)
{
    struct tfc_dnnl_thread *t = arg;
    for (int u = 0; u < TFC_DNNL_USERS; u++)
        if (t->cache[u]) t->cache_free[u](t->cache[u]);
    if (t->stream) dnnl_stream_destroy(t->stream);
    if (t->engine) dnnl_engine_destroy(t->engine);
    free(t);
    __atomic_sub_fetch(&live_threads, 1, __ATOMIC_RELAXED);
}

static void state_key_make(void)
{
    if (pthread_key_create(&state_key, state_free)) state_key = (pthread_key_t)-1;
}

struct tfc_dnnl_thread *tfc_dnnl_thread(void)
{
    if (tls_state) return tls_state;
    pthread_once(&state_key_once, state_key_make);
    struct tfc_dnnl_thread *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    __atomic_add_fetch(&live_threads, 1, __ATOMIC_RELAXED);
    if (dnnl_engine_create(&t->engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&t->stream, t->engine, dnnl_stream_default_flags) != dnnl_success ||
        state_key == (pthread_key_t)-1 || pthread_setspecific(state_key, t)) {
        state_free(t);
        return NULL;
    }
    return tls_state = t;
}

void *tfc_dnnl_thread_cache(enum tfc_dnnl_user u, size_t size, void (*free_fn)(void *),
                            struct tfc_dnnl_thread **t)
{
    struct tfc_dnnl_thread *s = tfc_dnnl_thread();
    *t = s;
    if (!s) return NULL;
    if (!s->cache[u]) {
        s->cache[u] = calloc(1, size);
        s->cache_free[u] = free_fn;
    }
    return s->cache[u];
}

int tfc_dnnl_live_threads(void)
{
    return __atomic_load_n(&live_threads, __ATOMIC_RELAXED);
}

#else
/* ISO C forbids an empty translation unit. */
typedef int tfc_dnnl_thread_unused;
#endif
