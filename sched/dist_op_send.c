/* dist_op_send.c: rank 0's variables to the other ranks after a step of `mpirun tfc train`
 * (sched/dist_op.c: every variable with TFC_DIST_OWNERS_RANK0=1; sched/dist_op_shard.c: those
 * no update writes), packed in one message per rank, whatever their dtypes. */
#include <stdlib.h>
#include <string.h>
#include "dist_op.h"

static void free_values(tfc_value **v, int n)
{
    for (int i = 0; i < n; i++) tfc_value_destroy(v[i]), v[i] = NULL;
}

tfc_status tfc_dist_op_send(tfc_dist_op *d, tfc_session *s, int me, int ranks, int n,
                            tfc_tensor **list)
{
    tfc_value *vals[n > 0 ? n : 1];
    memset(vals, 0, sizeof vals);
    tfc_status st = TFC_OK;
    if (me == 0 && n && tfc_session_read_variables(s, n, list, vals) != TFC_OK)
        st = tfc_fail(d->msg, TFC_ERR_RUNTIME, "dist_op: reading the variables: %s",
                      tfc_session_errmsg(s));
    for (int i = 0; !st && me != 0 && i < n; i++)
        if (tfc_value_create(tfc_tensor_dtype(list[i]), tfc_tensor_shape(list[i]), &vals[i]))
            st = tfc_fail(d->msg, TFC_ERR_OUT_OF_MEMORY, "dist_op: no memory for '%s'",
                          tfc_tensor_name(list[i]));
    size_t bytes = 0;
    for (int i = 0; !st && i < n; i++) bytes += tfc_value_nbytes(vals[i]);
    char *pack = st || !bytes ? NULL : malloc(bytes);
    if (!st && bytes && !pack) st = tfc_fail(d->msg, TFC_ERR_OUT_OF_MEMORY, "dist_op: no memory");
    size_t at = 0;
    for (int i = 0; !st && me == 0 && i < n; at += tfc_value_nbytes(vals[i++]))
        memcpy(pack + at, tfc_value_data(vals[i]), tfc_value_nbytes(vals[i]));
    for (int r = 1; !st && bytes && r < ranks; r++) st = tfc_dist_copy(pack, bytes, 0, r, d->msg);
    at = 0;
    for (int i = 0; !st && me != 0 && i < n; at += tfc_value_nbytes(vals[i++])) {
        memcpy(tfc_value_data(vals[i]), pack + at, tfc_value_nbytes(vals[i]));
        if (tfc_session_write_variable(s, list[i], vals[i]))
            st = tfc_fail(d->msg, TFC_ERR_RUNTIME, "dist_op: '%s': %s",
                          tfc_tensor_name(list[i]), tfc_session_errmsg(s));
    }
    free(pack);
    free_values(vals, n);
    return st;
}
