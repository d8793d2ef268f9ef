/* batcher.c: mini-batches over parallel sources (images, labels) with a deterministic shuffle
 * per (seed, epoch) and a loader thread that gathers batch k+1 into a double buffer while the
 * caller trains on batch k; also the value helpers that prepare sources (normalize, reshape).
 *
 * Batches are numbered by a global index = epoch * steps_per_epoch + step. The loader fills the
 * free slot with the next index; the caller takes the ready slot holding the index it wants.
 * A seek bumps a generation so that a fill started before it is dropped when it finishes. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "../sched/dist_bind.h"

/* ---- Value helpers ---------------------------------------------------------------------- */

/* ---- Permutations ----------------------------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t splitmix64(uint64_t *state)
{
    return mix64(*state += 0x9E3779B97F4A7C15ull);
}

/* Uniform in [0, bound) without bias (Lemire's multiply-and-reject). */
static uint64_t below(uint64_t *state, uint64_t bound)
{
    __uint128_t m = (__uint128_t)splitmix64(state) * bound;
    uint64_t low = (uint64_t)m;
    if (low < bound) {
        uint64_t threshold = -bound % bound;
        while (low < threshold) {
            m = (__uint128_t)splitmix64(state) * bound;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* The row order of an epoch: a pure function of (seed, epoch). */
static void permutation(uint64_t seed, int64_t epoch, int shuffle, int64_t n, int64_t *perm)
{
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (!shuffle) return;
    uint64_t state = mix64(seed ^ mix64((uint64_t)epoch + 0x632BE59BD9B4E019ull));
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)below(&state, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* ---- The batcher ------------------------------------------------------------------------ */

enum { SLOT_EMPTY, SLOT_FILLING, SLOT_READY, SLOT_IN_USE };

struct slot {
    int state;         /* SLOT_*, under the mutex */
    int64_t index;     /* global batch index it holds or is being filled with */
    void **bufs;       /* per source: max_rows rows */
    tfc_value **full;  /* per source: wrapper of bufs, [max_rows, ...] */
    tfc_value **part;  /* per source: wrapper [last_rows, ...]; NULL when no batch is partial */
};

struct tfc_batcher {
    int n_sources;
    const unsigned char **src; /* per source: its rows, borrowed */
    size_t *row_bytes;         /* per source */
    int64_t n;                 /* rows per epoch */
    int64_t batch;             /* rows per full batch */
    int64_t max_rows;          /* rows of a full batch: min(batch, n), or a shard's slice */
    int64_t steps;             /* batches per epoch */
    int64_t last_rows;         /* rows of the last batch of an epoch */
    uint64_t seed;
    int shuffle;
    int rank, n_ranks;         /* this shard's slice of every global batch (0, 1: all of it) */
    int64_t global_last;       /* rows of the last global batch of an epoch */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int thread_started;
    struct slot slots[2];
    int stop;                  /* destroy asks the loader to return */
    uint64_t gen;              /* bumped by seek */
    int64_t load_index;        /* next index the loader fills */
    int64_t next_index;        /* index the caller's next tfc_batcher_next returns */
    int held;                  /* slot the caller holds, -1 when none */
    double wait_s;             /* seconds the caller blocked in next */

    int64_t *perm;             /* loader only: the order of perm_epoch */
    int64_t perm_epoch;
    char msg[TFC_MSG_LEN];
};

static void fill(tfc_batcher *b, struct slot *s, int64_t index)
{
    int64_t epoch = index / b->steps, step = index % b->steps;
    int64_t global_rows = step == b->steps - 1 ? b->global_last : b->batch;
    /* rank r takes rows [g r / R, g (r + 1) / R) of the global batch: the ranks' slices, in
     * rank order, are the batch one process would take */
    int64_t lo = global_rows * b->rank / b->n_ranks, hi = global_rows * (b->rank + 1) / b->n_ranks;
    int64_t rows = hi - lo;
    int64_t first = step * b->batch + lo;
    if (b->shuffle && epoch != b->perm_epoch) {
        permutation(b->seed, epoch, 1, b->n, b->perm);
        b->perm_epoch = epoch;
    }
    for (int k = 0; k < b->n_sources; k++) {
        size_t rb = b->row_bytes[k];
        const unsigned char *src = b->src[k];
        unsigned char *dst = s->bufs[k];
        if (rb == 0) continue; /* a source with an empty row shape: no data at all */
        if (!b->shuffle) {
            memcpy(dst, src + (size_t)first * rb, (size_t)rows * rb);
            continue;
        }
        const int64_t *p = b->perm + first;
        switch (rb) { /* fixed sizes let the compiler inline the copies of small rows */
        case 1: for (int64_t r = 0; r < rows; r++) dst[r] = src[p[r]]; break;
        case 4: for (int64_t r = 0; r < rows; r++) memcpy(dst + 4 * r, src + 4 * p[r], 4); break;
        case 8: for (int64_t r = 0; r < rows; r++) memcpy(dst + 8 * r, src + 8 * p[r], 8); break;
        default:
            for (int64_t r = 0; r < rows; r++)
                memcpy(dst + (size_t)r * rb, src + (size_t)p[r] * rb, rb);
        }
    }
}

static void *loader_main(void *arg)
{
    tfc_batcher *b = arg;
    tfc_dist_bind_loader_thread(); /* its own core, when a distributed rank has one for it */
    pthread_mutex_lock(&b->mu);
    for (;;) {
        struct slot *s = NULL;
        while (!b->stop) {
            for (int i = 0; i < 2 && !s; i++)
                if (b->slots[i].state == SLOT_EMPTY) s = &b->slots[i];
            if (s) break;
            pthread_cond_wait(&b->cv, &b->mu);
        }
        if (b->stop) break;
        s->state = SLOT_FILLING;
        s->index = b->load_index++;
        uint64_t gen = b->gen;
        pthread_mutex_unlock(&b->mu);
        fill(b, s, s->index); /* the slot is ours alone while FILLING */
        pthread_mutex_lock(&b->mu);
        s->state = gen == b->gen ? SLOT_READY : SLOT_EMPTY;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tfc_batcher_destroy(tfc_batcher *b)
{
    if (!b) return;
    if (b->thread_started) {
        pthread_mutex_lock(&b->mu);
        b->stop = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thread, NULL);
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
    }
    for (int i = 0; i < 2; i++) {
        struct slot *s = &b->slots[i];
        for (int k = 0; k < b->n_sources; k++) {
            if (s->full) tfc_value_destroy(s->full[k]);
            if (s->part) tfc_value_destroy(s->part[k]);
            if (s->bufs) free(s->bufs[k]);
        }
        free(s->full);
        free(s->part);
        free(s->bufs);
    }
    free(b->src);
    free(b->row_bytes);
    free(b->perm);
    free(b);
}

/* A wrapper of buf with the source's shape and `rows` leading rows. */
static tfc_status wrap_rows(const tfc_value *src, int64_t rows, void *buf, tfc_value **out)
{
    tfc_shape s = tfc_value_shape(src);
    s.dims[0] = rows;
    return tfc_value_wrap(tfc_value_dtype(src), s, buf, out);
}

/* Checks that every source has a leading dimension of rows, the same number n > 0 for all. */
static tfc_status check_sources(int n_sources, tfc_value *const *sources, int64_t *n_out)
{
    int64_t n = -1;
    for (int k = 0; k < n_sources; k++) {
        char buf[160];
        if (!sources[k])
            return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "batcher: source %d is NULL", k);
        tfc_shape s = tfc_value_shape(sources[k]);
        if (s.rank < 1)
            return tfc_fail_global(TFC_ERR_SHAPE, "batcher: source %d is a scalar (it needs a "
                                   "leading dimension of rows)", k);
        if (k == 0) n = s.dims[0];
        if (s.dims[0] != n)
            return tfc_fail_global(TFC_ERR_SHAPE, "batcher: source %d has shape %s: %lld rows, "
                                   "but source 0 has %lld", k, tfc_shape_str(&s, buf, sizeof buf),
                                   (long long)s.dims[0], (long long)n);
    }
    if (n == 0) return tfc_fail_global(TFC_ERR_SHAPE, "batcher: the sources have no rows");
    *n_out = n;
    return TFC_OK;
}

static tfc_status no_memory(const tfc_batcher *b)
{
    return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "batcher: no memory for %d sources of %lld-row "
                           "batches", b->n_sources, (long long)b->max_rows);
}

/* The per-source tables, and each slot's buffers with their full (and partial) wrappers. */
static tfc_status alloc_buffers(tfc_batcher *b, tfc_value *const *sources)
{
    int n_sources = b->n_sources;
    b->src = calloc((size_t)n_sources, sizeof *b->src);
    b->row_bytes = calloc((size_t)n_sources, sizeof *b->row_bytes);
    if (b->shuffle) b->perm = malloc((size_t)b->n * sizeof *b->perm);
    if (!b->src || !b->row_bytes || (b->shuffle && !b->perm)) return no_memory(b);
    int partial = b->last_rows != b->max_rows;
    for (int i = 0; i < 2; i++) {
        struct slot *s = &b->slots[i];
        s->bufs = calloc((size_t)n_sources, sizeof *s->bufs);
        s->full = calloc((size_t)n_sources, sizeof *s->full);
        if (partial) s->part = calloc((size_t)n_sources, sizeof *s->part);
        if (!s->bufs || !s->full || (partial && !s->part)) return no_memory(b);
    }
    for (int k = 0; k < n_sources; k++) {
        b->src[k] = tfc_value_cdata(sources[k]);
        b->row_bytes[k] = tfc_value_nbytes(sources[k]) / (size_t)b->n;
        for (int i = 0; i < 2; i++) {
            struct slot *s = &b->slots[i];
            /* a shard's slice of the last batch may be a row longer than of a full one */
            int64_t rows = b->last_rows > b->max_rows ? b->last_rows : b->max_rows;
            size_t bytes = (size_t)rows * b->row_bytes[k];
            s->bufs[k] = malloc(bytes ? bytes : 1);
            if (!s->bufs[k]) return no_memory(b);
            tfc_status st = wrap_rows(sources[k], b->max_rows, s->bufs[k], &s->full[k]);
            if (!st && partial) st = wrap_rows(sources[k], b->last_rows, s->bufs[k], &s->part[k]);
            if (st) return st;
        }
    }
    return TFC_OK;
}

static tfc_status start_loader(tfc_batcher *b)
{
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    if (pthread_create(&b->thread, NULL, loader_main, b) != 0) {
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
        return tfc_fail_global(TFC_ERR_RUNTIME, "batcher: cannot start the loader thread");
    }
    b->thread_started = 1;
    return TFC_OK;
}

tfc_status tfc_batcher_create(int n_sources, tfc_value *const *sources, int64_t batch,
                              uint64_t seed, unsigned flags, tfc_batcher **out)
{
    return tfc_batcher_create_shard(n_sources, sources, batch, seed, flags, 0, 1, out);
}

/* The shard's slice of a global batch of g rows (see fill). */
static int64_t slice_rows(int64_t g, int rank, int n_ranks)
{
    return g * (rank + 1) / n_ranks - g * rank / n_ranks;
}

static tfc_status check_shard(int64_t batch, int64_t last, int rank, int n_ranks)
{
    if (n_ranks < 1 || rank < 0 || rank >= n_ranks)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "batcher: shard rank %d of %d ranks "
                               "(rank in [0, ranks), ranks at least 1)", rank, n_ranks);
    if (slice_rows(batch, rank, n_ranks) < 1 || slice_rows(last, rank, n_ranks) < 1)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "batcher: a batch of %lld rows leaves "
                               "rank %d of %d ranks no row (a global batch needs at least one row "
                               "per rank; DROP_LAST drops a short last batch)",
                               (long long)(slice_rows(batch, rank, n_ranks) < 1 ? batch : last),
                               rank, n_ranks);
    return TFC_OK;
}

tfc_status tfc_batcher_create_shard(int n_sources, tfc_value *const *sources, int64_t batch,
                                    uint64_t seed, unsigned flags, int rank, int n_ranks,
                                    tfc_batcher **out)
{
    if (!out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "batcher: out is NULL");
    *out = NULL;
    if (n_sources < 1 || !sources)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "batcher: %d sources (at least 1)",
                               sources ? n_sources : 0);
    if (batch < 1)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "batcher: batch size %lld (at least 1)",
                               (long long)batch);
    if (flags & ~(unsigned)(TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST))
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "batcher: unknown flags 0x%x", flags);
    int64_t n = 0;
    tfc_status st = check_sources(n_sources, sources, &n);
    if (st) return st;
    int drop_last = (flags & TFC_BATCHER_DROP_LAST) != 0;
    /* (n + batch - 1) / batch would overflow for a batch near INT64_MAX */
    int64_t steps = n / batch + (!drop_last && n % batch != 0);
    if (steps == 0)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "batcher: drop_last with batch size %lld"
                               " and %lld rows leaves no batch", (long long)batch, (long long)n);
    int64_t full = batch < n ? batch : n, last = drop_last ? batch : n - (steps - 1) * batch;
    st = check_shard(full, last, rank, n_ranks);
    if (st) return st;

    tfc_batcher *b = calloc(1, sizeof *b);
    if (!b) return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "batcher: no memory");
    b->n_sources = n_sources;
    b->n = n;
    b->batch = batch;
    b->rank = rank;
    b->n_ranks = n_ranks;
    b->global_last = last;
    b->max_rows = slice_rows(full, rank, n_ranks);
    b->steps = steps;
    b->last_rows = slice_rows(last, rank, n_ranks);
    b->seed = seed;
    b->shuffle = (flags & TFC_BATCHER_SHUFFLE) != 0;
    b->held = -1;
    b->perm_epoch = -1;
    st = alloc_buffers(b, sources);
    if (!st) st = start_loader(b);
    if (st) {
        tfc_batcher_destroy(b);
        return st;
    }
    *out = b;
    return TFC_OK;
}

tfc_status tfc_batcher_next(tfc_batcher *b, tfc_value **batch_values, int *epoch_done)
{
    if (!b) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "batcher_next: batcher is NULL");
    if (!batch_values)
        return tfc_fail(b->msg, TFC_ERR_INVALID_ARGUMENT, "batcher_next: batch_values is NULL");
    pthread_mutex_lock(&b->mu);
    if (b->held >= 0) { /* the caller is done with the previous batch: the loader may reuse it */
        b->slots[b->held].state = SLOT_EMPTY;
        b->held = -1;
        pthread_cond_broadcast(&b->cv);
    }
    int64_t want = b->next_index;
    int got = -1;
    double t0 = 0;
    for (;;) {
        for (int i = 0; i < 2; i++)
            if (b->slots[i].state == SLOT_READY && b->slots[i].index == want) got = i;
        if (got >= 0) break;
        if (t0 == 0) t0 = now_s();
        pthread_cond_wait(&b->cv, &b->mu);
    }
    if (t0 != 0) b->wait_s += now_s() - t0;
    b->slots[got].state = SLOT_IN_USE;
    b->held = got;
    b->next_index = want + 1;
    pthread_mutex_unlock(&b->mu);

    int last = want % b->steps == b->steps - 1;
    struct slot *s = &b->slots[got];
    for (int k = 0; k < b->n_sources; k++)
        batch_values[k] = last && s->part ? s->part[k] : s->full[k];
    if (epoch_done) *epoch_done = last;
    return TFC_OK;
}

tfc_status tfc_batcher_seek(tfc_batcher *b, int64_t epoch, int64_t step)
{
    if (!b) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "batcher_seek: batcher is NULL");
    if (epoch < 0 || step < 0 || step >= b->steps || epoch > (INT64_MAX - step) / b->steps - 1)
        return tfc_fail(b->msg, TFC_ERR_OUT_OF_RANGE, "batcher_seek: position (epoch %lld, step "
                        "%lld) is out of range (steps per epoch: %lld)", (long long)epoch,
                        (long long)step, (long long)b->steps);
    pthread_mutex_lock(&b->mu);
    b->gen++;
    for (int i = 0; i < 2; i++) /* a FILLING slot is dropped by the loader (gen changed) */
        if (b->slots[i].state == SLOT_READY || b->slots[i].state == SLOT_IN_USE)
            b->slots[i].state = SLOT_EMPTY;
    b->held = -1;
    b->next_index = b->load_index = epoch * b->steps + step;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return TFC_OK;
}

void tfc_batcher_position(const tfc_batcher *b, int64_t *epoch, int64_t *step)
{
    int64_t index = 0;
    if (b) {
        pthread_mutex_lock((pthread_mutex_t *)&b->mu);
        index = b->next_index;
        pthread_mutex_unlock((pthread_mutex_t *)&b->mu);
    }
    if (epoch) *epoch = b ? index / b->steps : 0;
    if (step) *step = b ? index % b->steps : 0;
}

int64_t tfc_batcher_steps_per_epoch(const tfc_batcher *b)
{
    return b ? b->steps : 0;
}

double tfc_batcher_wait_seconds(const tfc_batcher *b)
{
    double w = 0;
    if (b) {
        pthread_mutex_lock((pthread_mutex_t *)&b->mu);
        w = b->wait_s;
        pthread_mutex_unlock((pthread_mutex_t *)&b->mu);
    }
    return w;
}

const char *tfc_batcher_errmsg(const tfc_batcher *b)
{
    return b ? b->msg : "batcher is NULL";
}
