/* thread_scratch.c: per-thread scratch buffers (thread_scratch.h). A thread-local pointer for
 * the fast path; a pthread key whose destructor frees the buffers when the thread exits (StarPU
 * joins its workers at starpu_shutdown: nothing is left for LeakSanitizer). */
#include <pthread.h>
#include <stdlib.h>
#include "thread_scratch.h"

struct scratch {
    void *buf[TFC_SCRATCH_USERS];
    size_t bytes[TFC_SCRATCH_USERS];
};

static __thread struct scratch *tls_scratch;
static int live_threads;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *arg)
{
    struct scratch *s = arg;
    for (int u = 0; u < TFC_SCRATCH_USERS; u++) free(s->buf[u]);
    free(s);
    __atomic_sub_fetch(&live_threads, 1, __ATOMIC_RELAXED);
}

static void scratch_key_make(void)
{
    if (pthread_key_create(&scratch_key, scratch_free)) scratch_key = (pthread_key_t)-1;
}

int tfc_thread_scratch_live(void)
{
    return __atomic_load_n(&live_threads, __ATOMIC_RELAXED);
}

/* The calling thread's record, made on its first use; NULL without memory. */
static struct scratch *thread_record(void)
{
    struct scratch *s = tls_scratch;
    if (s) return s;
    pthread_once(&scratch_once, scratch_key_make);
    if (scratch_key == (pthread_key_t)-1 || !(s = calloc(1, sizeof *s))) return NULL;
    if (pthread_setspecific(scratch_key, s)) {
        free(s);
        return NULL;
    }
    __atomic_add_fetch(&live_threads, 1, __ATOMIC_RELAXED);
    tls_scratch = s;
    return s;
}

void *tfc_thread_scratch(enum tfc_scratch_user u, size_t bytes)
{
    struct scratch *s = thread_record();
    if (!s || u < 0 || u >= TFC_SCRATCH_USERS) return NULL;
    if (s->bytes[u] < bytes) {
        void *p = NULL;
        if (posix_memalign(&p, 64, bytes)) return NULL;
        free(s->buf[u]);
        s->buf[u] = p, s->bytes[u] = bytes;
    }
    return s->buf[u];
}
