/* chain_records.c: the records of the steps inside a profiled run's chain tasks
 * (chain_records.h). */
#include <math.h>
#include "chain_records.h"
#include "../codelets/chain.h"

static const struct tfc_chain *plan_chain(const struct plan *p, int i)
{
    return p->steps[i].cl == &tfc_cl_chain ? tfc_chain_of(p->steps[i].args) : NULL;
}

size_t tfc_chain_times_len(const struct plan *p)
{
    size_t n = 0;
    for (int i = 0; i < p->n_steps; i++) {
        const struct tfc_chain *c = plan_chain(p, i);
        if (c) n += 2 * (size_t)c->n_steps;
    }
    return n;
}

void tfc_chain_times_attach(const struct plan *p, struct instance *in, double *times)
{
    size_t at = 0;
    for (int i = 0; i < p->n_steps; i++) {
        if (!plan_chain(p, i)) continue;
        struct tfc_kargs *a = (struct tfc_kargs *)(void *)(in->args + in->args_off[i]);
        struct tfc_chain *c = tfc_chain_of(a);
        c->step_us = times ? times + at : NULL;
        at += 2 * (size_t)c->n_steps;
    }
}

/* A chained step's op: its node's, or what the plan made of it (as tfc_step_op_name). */
static const char *sub_op_name(const tfc_graph *g, const struct tfc_kargs *a)
{
    if (a->kind == TFC_K_MATMUL && a->n_in == 3) return "matmul+bias"; /* chain_epilogue.h */
    return a->kind == TFC_K_FUSED ? "fused" : a->kind == TFC_K_COPY ? "hop"
                                                                     : g->nodes[a->node]->op->name;
}

int tfc_chain_step_records(const struct plan *p, const tfc_graph *g,
                           const tfc_task_record *task_records, const double *times,
                           tfc_task_record *out)
{
    int n = 0;
    size_t at = 0;
    for (int i = 0; i < p->n_steps; i++) {
        const struct tfc_chain *c = plan_chain(p, i);
        if (!c) continue;
        for (int k = 0; k < c->n_steps; k++, at += 2) {
            if (!(times[at + 1] > 0)) continue; /* not run: an earlier step failed */
            const struct tfc_kargs *a = tfc_chain_args(p->steps[i].args, k);
            tfc_task_record *r = &out[n++];
            *r = (tfc_task_record){.node = g->nodes[a->node]->name, .op = sub_op_name(g, a),
                                   .worker = task_records[i].worker, .start_us = times[at],
                                   .end_us = times[at + 1], .predicted_us = NAN};
            snprintf(r->worker_name, sizeof r->worker_name, "%s", task_records[i].worker_name);
        }
    }
    return n;
}
