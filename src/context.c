/* context.c: tfc_ctx, the process's StarPU runtime as the library sees it. Creating one starts
 * StarPU or joins the application's; OpenBLAS is set to one thread (process-wide), because
 * parallelism comes from StarPU's workers and threaded BLAS inside tasks oversubscribes.
 * Before StarPU starts, its environment is checked (src/env.c) and the directory it writes its
 * models to is made usable (src/starpu_home.c): StarPU 1.3 aborts the process on either. */
#include <stdlib.h>
#include <cblas.h>
#include "env.h"
#include "starpu_home.h"
#include "../sched/sched.h"

struct tfc_ctx {
    int joined;          /* StarPU was running before us */
    int dist_rank, dist_size; /* TFC_DIST_MPI: this rank and the number of ranks; else 0, 1 */
};

/* What StarPU reads at starpu_init, when this context is the one starting it (a StarPU that
 * runs has read its environment already). */
static tfc_status prepare_starpu(struct tfc_starpu_home **home, char *msg)
{
    struct tfc_starpu_facts facts;
    tfc_runtime_facts(&facts);
    tfc_status st = tfc_env_check_starpu(&facts, msg);
    return st ? st : tfc_starpu_home_prepare(home, msg);
}

tfc_status tfc_ctx_create(tfc_ctx **out)
{
    return tfc_ctx_create_dist(TFC_DIST_NONE, out);
}

tfc_status tfc_ctx_create_dist(tfc_dist_mode mode, tfc_ctx **out)
{
    char msg[TFC_MSG_LEN];
    if (!out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "ctx_create: out is NULL");
    *out = NULL;
    if (mode != TFC_DIST_NONE && mode != TFC_DIST_MPI)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "ctx_create: distribution mode %d "
                               "(TFC_DIST_NONE 0 or TFC_DIST_MPI 1)", (int)mode);
    if (mode == TFC_DIST_MPI && !tfc_dist_available())
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "ctx_create: distribution TFC_DIST_MPI:"
                               " this libtfc-starpu was built without StarPU-MPI (configure "
                               "--enable-mpi=yes needs libstarpumpi-1.3 and Open MPI: "
                               "openmpi-bin, libopenmpi-dev)");
    tfc_status st = tfc_env_check(msg); /* our TFC_ variables: bad values fail here */
    if (st) return tfc_fail_global(st, "ctx_create: %s", msg);
    tfc_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "ctx_create: no memory");
    ctx->dist_size = 1;
    if (mode == TFC_DIST_MPI)
        st = tfc_runtime_start_dist(&ctx->dist_rank, &ctx->dist_size, prepare_starpu, msg);
    else
        st = tfc_runtime_start(&ctx->joined, prepare_starpu, msg);
    if (st) {
        free(ctx);
        return tfc_fail_global(st, "ctx_create: %s", msg);
    }
    openblas_set_num_threads(1);
    *out = ctx;
    return TFC_OK;
}

int tfc_dist_rank(const tfc_ctx *ctx)
{
    return ctx ? ctx->dist_rank : 0;
}

int tfc_dist_size(const tfc_ctx *ctx)
{
    return ctx ? ctx->dist_size : 1;
}

void tfc_ctx_destroy(tfc_ctx *ctx)
{
    if (!ctx) return;
    tfc_runtime_stop();
    free(ctx);
}

tfc_status tfc_ctx_info_get(tfc_ctx *ctx, tfc_ctx_info *out)
{
    if (!ctx || !out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "ctx_info: NULL argument");
    tfc_runtime_info(out);
    out->joined = ctx->joined;
    return TFC_OK;
}

void tfc_ctx_describe(tfc_ctx *ctx, char *out, size_t size)
{
    if (!out || !size) return;
    out[0] = 0;
    if (ctx) tfc_runtime_describe(out, size);
}
