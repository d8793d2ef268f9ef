/* dist_backup.c: backup workers (issue 15, item 3; the TensorFlow paper's section 4.4), built
 * only with TFC_HAVE_MPI. With b backups among R ranks, rank 0 (the owner of every variable)
 * takes the gradients of the first R - b ranks to arrive each step and drops the late ones.
 * "First N of N + b" cannot be expressed with task dependencies (they are AND-only), so this
 * is point-to-point StarPU-MPI: rank 0 posts a receive per rank and step into a buffer of its
 * own and polls them; the new values go back with non-blocking sends, so a straggler delays
 * nobody. StarPU-MPI 1.3 cannot cancel a receive: late ones stay pending, are drained at later
 * steps, and waited for at shutdown. Tags live above 2^40, apart from dist_mpi.c's counter. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <starpu_mpi.h>
#include "dist.h"

/* A message in flight (a late gradient, a sent value) and its buffer, freed once complete. */
struct pending {
    starpu_mpi_req req;
    starpu_data_handle_t h;
    float *buf;
    struct pending *next;
};
static struct pending *in_flight;

static starpu_mpi_tag_t tag_of(long long step, int ranks, int r, int values)
{
    return ((starpu_mpi_tag_t)1 << 40) + (starpu_mpi_tag_t)(step * 2 * ranks + values * ranks + r);
}

static struct pending *message(size_t n)
{
    struct pending *p = calloc(1, sizeof *p);
    if (p) p->buf = malloc(n * sizeof *p->buf);
    if (p && !p->buf) free(p), p = NULL;
    if (p) starpu_vector_data_register(&p->h, STARPU_MAIN_RAM, (uintptr_t)p->buf, (uint32_t)n,
                                       sizeof(float));
    return p;
}

static void release(struct pending *p)
{
    starpu_data_unregister(p->h);
    free(p->buf);
    free(p);
}

/* Frees the messages that completed (all of them with wait). */
static void drain(int wait)
{
    for (struct pending **at = &in_flight; *at;) {
        int done = 0;
        MPI_Status status;
        if (wait) starpu_mpi_wait(&(*at)->req, &status), done = 1;
        else starpu_mpi_test(&(*at)->req, &done, &status);
        if (!done) {
            at = &(*at)->next;
            continue;
        }
        struct pending *p = *at;
        *at = p->next;
        release(p);
    }
}

void tfc_dist_backup_drain(void)
{
    drain(1);
}

static tfc_status no_memory(char *msg, size_t n)
{
    return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "backup workers: no memory for %zu floats", n);
}

/* Rank 0's side of a step: receives until `need` ranks (itself first) are in, or exactly the
 * ranks of replay (when non-zero); sums them into out; *chosen gets the mask used. */
static tfc_status gather_first(const float *mine, size_t n, int ranks, int need, long long step,
                               int64_t global_rows, unsigned long long replay,
                               unsigned long long *chosen, float *out, char *msg)
{
    struct pending *in[ranks];
    float *parts[ranks];
    memset(in, 0, sizeof in);
    parts[0] = (float *)mine;
    for (int r = 1; r < ranks; r++) {
        if (!(in[r] = message(n))) return no_memory(msg, n);
        parts[r] = in[r]->buf;
        starpu_mpi_irecv(in[r]->h, &in[r]->req, r, tag_of(step, ranks, r, 0), MPI_COMM_WORLD);
    }
    unsigned long long mask = 1, want = replay ? replay : 0;
    int have = 1;
    while (replay ? (mask & want) != want : have < need) {
        int any = 0;
        for (int r = 1; r < ranks; r++) {
            /* enough: test no more, for a request found complete is freed by StarPU-MPI
             * (its req becomes NULL), and one not counted would be tested again later */
            if (!replay && have >= need) break;
            if (mask >> r & 1 || (replay && !(want >> r & 1))) continue;
            int done = 0;
            MPI_Status status;
            starpu_mpi_test(&in[r]->req, &done, &status);
            if (done && have < (replay ? ranks : need)) mask |= 1ull << r, have++, any = 1;
        }
        if (!any) usleep(100);
    }
    tfc_dist_chosen_sum((const float *const *)parts, ranks, mask, global_rows, n, out);
    for (int r = 1; r < ranks; r++) {
        if (mask >> r & 1) { /* received: its buffer is read, done with */
            release(in[r]);
            continue;
        }
        in[r]->next = in_flight; /* late: drained later */
        in_flight = in[r];
    }
    *chosen = mask;
    return TFC_OK;
}

tfc_status tfc_dist_backup_sum(const float *mine, size_t n, int need, long long step,
                               int64_t global_rows, unsigned long long replay,
                               unsigned long long *chosen, float *out, char *msg)
{
    int me = 0, ranks = 1;
    starpu_mpi_comm_rank(MPI_COMM_WORLD, &me);
    starpu_mpi_comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks > 64)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "backup workers: %d ranks (at most 64)",
                        ranks);
    drain(0);
    if (me == 0)
        return gather_first(mine, n, ranks, need, step, global_rows, replay, chosen, out, msg);
    struct pending *p = message(n); /* a blocking send: rank 0 posted its receive already */
    if (!p) return no_memory(msg, n);
    memcpy(p->buf, mine, n * sizeof *mine);
    starpu_mpi_send(p->h, 0, tag_of(step, ranks, me, 0), MPI_COMM_WORLD);
    release(p);
    return TFC_OK;
}

tfc_status tfc_dist_backup_values(float *buf, size_t n, long long step, char *msg)
{
    int me = 0, ranks = 1;
    starpu_mpi_comm_rank(MPI_COMM_WORLD, &me);
    starpu_mpi_comm_size(MPI_COMM_WORLD, &ranks);
    if (me != 0) {
        starpu_data_handle_t h;
        starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)buf, (uint32_t)n, sizeof(float));
        starpu_mpi_recv(h, 0, tag_of(step, ranks, me, 1), MPI_COMM_WORLD, NULL);
        starpu_data_unregister(h);
        return TFC_OK;
    }
    for (int r = 1; r < ranks; r++) { /* not waited for: a straggler takes them when it can */
        struct pending *p = message(n);
        if (!p) return no_memory(msg, n);
        memcpy(p->buf, buf, n * sizeof *buf);
        starpu_mpi_isend(p->h, &p->req, r, tag_of(step, ranks, r, 1), MPI_COMM_WORLD);
        p->next = in_flight;
        in_flight = p;
    }
    return TFC_OK;
}
