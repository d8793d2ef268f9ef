/* export_tensors.c: our values and tensor types as ONNX messages: initializers (TensorProto
 * with raw_data, little-endian as ONNX stores it) and the ValueInfoProto of a graph input or
 * output (element type and shape, a -1 dim as the symbolic dim "N"). */
#include <stdlib.h>
#include <string.h>
#include "export.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian: this exporter copies host memory as it is"
#endif

int32_t tfc_onnx_elem_type(enum tfc_dtype dt)
{
    switch (dt) {
    case TFC_FLOAT32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case TFC_FLOAT64: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    case TFC_INT32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case TFC_INT64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    case TFC_UINT8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    case TFC_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    default: break;
    }
    return ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
}

Onnx__TensorProto *tfc_onnx_tensor_proto(const char *name, const tfc_value *v)
{
    Onnx__TensorProto *t = malloc(sizeof *t);
    if (!t) return NULL;
    onnx__tensor_proto__init(t);
    tfc_shape s = tfc_value_shape(v);
    size_t bytes = (size_t)tfc_value_numel(v) * tfc_dtype_size(tfc_value_dtype(v));
    t->name = strdup(name);
    t->dims = malloc(sizeof *t->dims * (size_t)(s.rank ? s.rank : 1));
    t->raw_data.data = malloc(bytes ? bytes : 1);
    if (!t->name || !t->dims || !t->raw_data.data) {
        onnx__tensor_proto__free_unpacked(t, NULL);
        return NULL;
    }
    t->n_dims = (size_t)s.rank;
    memcpy(t->dims, s.dims, sizeof *t->dims * (size_t)s.rank);
    t->has_data_type = 1;
    t->data_type = tfc_onnx_elem_type(tfc_value_dtype(v));
    t->has_raw_data = 1;
    t->raw_data.len = bytes;
    if (bytes) memcpy(t->raw_data.data, tfc_value_cdata(v), bytes);
    return t;
}

static Onnx__TensorShapeProto *shape_proto(const tfc_shape *shape)
{
    Onnx__TensorShapeProto *sp = malloc(sizeof *sp);
    if (!sp) return NULL;
    onnx__tensor_shape_proto__init(sp);
    sp->dim = calloc((size_t)(shape->rank ? shape->rank : 1), sizeof *sp->dim);
    int ok = sp->dim != NULL;
    for (int d = 0; ok && d < shape->rank; d++) {
        Onnx__TensorShapeProto__Dimension *dim = malloc(sizeof *dim);
        if (!(ok = dim != NULL)) break;
        onnx__tensor_shape_proto__dimension__init(dim);
        sp->dim[sp->n_dim++] = dim;
        if (shape->dims[d] >= 0) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = shape->dims[d];
        } else { /* only a leading dim is unknown: the batch */
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            ok = (dim->dim_param = strdup("N")) != NULL;
        }
    }
    if (!ok) {
        onnx__tensor_shape_proto__free_unpacked(sp, NULL);
        return NULL;
    }
    return sp;
}

Onnx__ValueInfoProto *tfc_onnx_value_info(const char *name, enum tfc_dtype dt,
                                          const tfc_shape *shape)
{
    Onnx__ValueInfoProto *vi = malloc(sizeof *vi);
    Onnx__TypeProto *tp = malloc(sizeof *tp);
    Onnx__TypeProto__Tensor *tt = malloc(sizeof *tt);
    if (!vi || !tp || !tt) {
        free(vi), free(tp), free(tt);
        return NULL;
    }
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = tfc_onnx_elem_type(dt);
    vi->name = strdup(name);
    tt->shape = shape_proto(shape);
    if (!vi->name || !tt->shape) {
        onnx__value_info_proto__free_unpacked(vi, NULL);
        return NULL;
    }
    return vi;
}
