/* dist_sum.c: the one sum of the ranks' gradients, run by the owner's task in distributed
 * training (sched/dist_mpi.c) and by the one-process reference (sched/dist_train.c), so both
 * round alike. */
#include <string.h>
#include "dist.h"

void tfc_dist_weighted_sum(const float *const *parts, int n_parts, int64_t global_rows, size_t n,
                           float *out)
{
    memset(out, 0, n * sizeof *out);
    for (int r = 0; r < n_parts; r++) {
        int64_t rows = global_rows * (r + 1) / n_parts - global_rows * r / n_parts;
        float w = (float)((double)rows / (double)global_rows);
        for (size_t j = 0; j < n; j++) out[j] += w * parts[r][j];
    }
}

void tfc_dist_chosen_sum(const float *const *parts, int n_parts, unsigned long long mask,
                         int64_t global_rows, size_t n, float *out)
{
    int64_t total = 0;
    for (int r = 0; r < n_parts; r++)
        if (mask >> r & 1)
            total += global_rows * (r + 1) / n_parts - global_rows * r / n_parts;
    memset(out, 0, n * sizeof *out);
    for (int r = 0; r < n_parts; r++) {
        if (!(mask >> r & 1)) continue;
        int64_t rows = global_rows * (r + 1) / n_parts - global_rows * r / n_parts;
        float w = (float)((double)rows / (double)total);
        for (size_t j = 0; j < n; j++) out[j] += w * parts[r][j];
    }
}
