/* shape.c: shape arithmetic shared by the infer functions: NumPy broadcasting (with unknown
 * leading dimensions at build time) and axis normalization. */
#include <stdio.h>
#include "graph.h"

tfc_status tfc_broadcast_shapes(int n, const tfc_shape *const *shapes, tfc_shape *out, char *msg)
{
    int rank = 0;
    for (int k = 0; k < n; k++)
        if (shapes[k]->rank > rank) rank = shapes[k]->rank;
    out->rank = rank;
    for (int d = 0; d < rank; d++) {
        int64_t dim = 1;
        for (int k = 0; k < n; k++) {
            int id = shapes[k]->rank - (rank - d);
            if (id < 0) continue;
            int64_t v = shapes[k]->dims[id];
            if (v == 1) continue;
            if (dim == 1) {
                dim = v;
            } else if (dim == -1) {
                if (v != -1) dim = v; /* the unknown dim must turn out to be v */
            } else if (v != -1 && v != dim) {
                char a[96], b[96];
                return tfc_fail(msg, TFC_ERR_SHAPE, "shapes %s and %s do not broadcast",
                                tfc_shape_str(shapes[0], a, sizeof a),
                                tfc_shape_str(shapes[k], b, sizeof b));
            }
        }
        out->dims[d] = dim;
    }
    return TFC_OK;
}

int tfc_axis_norm(int64_t axis, int rank)
{
    if (axis < 0) axis += rank;
    return axis >= 0 && axis < rank ? (int)axis : -1;
}
