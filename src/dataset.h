/* dataset.h: the input pipeline: idx (MNIST) and NumPy .npy readers, a .npy writer, value
 * helpers (uint8 normalization, reshape) and a batcher that shuffles deterministically and
 * prefetches the next batch on its own thread. To be merged into tfc.h.
 *
 *   tfc_value *x, *y, *xf;
 *   tfc_idx_read("train-images-idx3-ubyte.gz", &x);          // uint8 [60000, 28, 28]
 *   tfc_idx_read("train-labels-idx1-ubyte.gz", &y);          // uint8 [60000]
 *   tfc_value_normalize_u8(x, 1.0f / 255, 0.0f, &xf);        // float32 [60000, 28, 28]
 *   tfc_value_reshape(&xf, tfc_shape_of(2, (int64_t[]){60000, 784}));
 *   tfc_batcher *b;
 *   tfc_batcher_create(2, (tfc_value *[]){xf, y}, 64, seed, TFC_BATCHER_SHUFFLE, &b);
 *   for (int done = 0, epochs = 0; epochs < 10; epochs += done) {
 *       tfc_value *batch[2];                                 // borrowed from the batcher
 *       tfc_batcher_next(b, batch, &done);                   // batch k+1 loads meanwhile
 *       ... feed batch[0], batch[1] ...
 *   }
 *   tfc_batcher_destroy(b);                                  // before xf and y
 */
#ifndef TFC_DATASET_H
#define TFC_DATASET_H

#include "tfc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Files ----------------------------------------------------------------------------- */

/* Reads an idx file (MNIST, Fashion-MNIST), gzip-compressed or plain (told apart by content),
 * into a new value owned by the caller. The magic is 0x00 0x00 <type> <rank>; rank 1 to 8;
 * dims are big-endian uint32. Element types: 0x08 uint8 -> TFC_UINT8, 0x0C int32 -> TFC_INT32,
 * 0x0D float32 -> TFC_FLOAT32, 0x0E float64 -> TFC_FLOAT64, and, widened without loss because
 * the runtime has no narrow signed types, 0x09 int8 and 0x0B int16 -> TFC_INT32.
 * Bad files (missing, empty, short header, wrong magic, unknown type, data shorter or longer
 * than the header says, dims whose size overflows or exceeds what the file can hold) give
 * TFC_ERR_INVALID_ARGUMENT (TFC_ERR_NOT_FOUND for a missing file, TFC_ERR_OUT_OF_MEMORY), a
 * message naming the path on tfc_errmsg(), and *out = NULL. Sizes are checked against the file
 * (or, for gzip, against the most that deflate can expand it to) before allocating. */
TFC_API tfc_status tfc_idx_read(const char *path, tfc_value **out);

/* Reads a NumPy .npy file (format 1.0, 2.0 or 3.0; C order) into a new value owned by the
 * caller. dtypes: '<f4' float32, '<f8' float64, '<i4' int32, '<i8' int64, '|u1' uint8, '|b1'
 * bool (nonzero bytes read as 1). Big-endian, other dtypes, fortran_order True, more than 8
 * dims, and files whose size does not match the header are errors with a message naming the
 * path, as for tfc_idx_read. */
TFC_API tfc_status tfc_npy_read(const char *path, tfc_value **out);
/* Writes v (any dtype, rank 0 to 8) as a .npy file, format 1.0, replacing path; the header is
 * padded to a multiple of 64 bytes as NumPy does. TFC_ERR_NOT_FOUND when the directory is
 * missing, TFC_ERR_RUNTIME when a write fails (the partial file is removed); message on
 * tfc_errmsg(). */
TFC_API tfc_status tfc_npy_write(const char *path, const tfc_value *v);

/* ---- Value helpers --------------------------------------------------------------------- */

/* A new float32 value of in's shape holding in[i] * scale + shift (in is uint8), e.g. scale
 * 1/255 and shift 0 for pixels in [0, 1]. TFC_ERR_DTYPE when in is not uint8. */
TFC_API tfc_status tfc_value_normalize_u8(const tfc_value *in, float scale, float shift,
                                          tfc_value **out);
/* Gives *v a new shape with the same number of elements (no dimension may be -1), keeping its
 * data in row-major order. *v may be replaced by a new value that owns the data (the old one is
 * destroyed, so pointers from tfc_value_data(*v) must be fetched again); on error *v is
 * unchanged. TFC_ERR_SHAPE when the element counts differ, TFC_ERR_OUT_OF_MEMORY. */
TFC_API tfc_status tfc_value_reshape(tfc_value **v, tfc_shape shape);

/* ---- Batcher --------------------------------------------------------------------------- */

typedef struct tfc_batcher tfc_batcher;

enum {
    TFC_BATCHER_SHUFFLE = 1u << 0,   /* a new permutation of the rows every epoch */
    TFC_BATCHER_DROP_LAST = 1u << 1, /* skip the last batch of an epoch when it is partial */
};

/* A batcher over n_sources values that share their leading dimension n (rows: images
 * [n, 784], labels [n], ...). Each batch holds the same rows of every source. The row order
 * of epoch e is a pure function of (seed, e): a Fisher-Yates shuffle driven by a splitmix64
 * stream keyed by both, or 0..n-1 without TFC_BATCHER_SHUFFLE. An epoch has
 * tfc_batcher_steps_per_epoch batches of `batch` rows, the last one partial unless
 * TFC_BATCHER_DROP_LAST. A loader thread gathers batch k+1 into a preallocated double buffer
 * while the caller uses batch k. The sources are borrowed, read by the loader thread: they must
 * stay alive and unchanged until tfc_batcher_destroy. Errors: TFC_ERR_INVALID_ARGUMENT (NULL,
 * n_sources < 1, batch < 1, no full batch with DROP_LAST, unknown flags), TFC_ERR_SHAPE
 * (rank 0, n == 0, leading dimensions that differ), TFC_ERR_OUT_OF_MEMORY, TFC_ERR_RUNTIME
 * (no thread); message on tfc_errmsg(). */
TFC_API tfc_status tfc_batcher_create(int n_sources, tfc_value *const *sources, int64_t batch,
                                      uint64_t seed, unsigned flags, tfc_batcher **out);
/* Joins the loader thread and frees the buffers (the batch values handed out die with them). */
TFC_API void tfc_batcher_destroy(tfc_batcher *b);
/* Hands out the batch at the current position and advances it, waiting for the loader when the
 * batch is not ready yet. batch_values[i] (n_sources entries) receives the rows of source i,
 * shape [rows, source dims 1...], owned by the batcher and valid until the next call of
 * tfc_batcher_next, tfc_batcher_seek or tfc_batcher_destroy: copy what must live longer.
 * *epoch_done (may be NULL) is set to 1 when this batch is the last of its epoch, else 0.
 * Batches go on across epochs without end. One caller thread at a time. */
TFC_API tfc_status tfc_batcher_next(tfc_batcher *b, tfc_value **batch_values, int *epoch_done);
/* The position of the batch the next tfc_batcher_next returns (epoch from 0, step in
 * [0, steps_per_epoch)). After the last batch of epoch e it is (e + 1, 0). */
TFC_API void tfc_batcher_position(const tfc_batcher *b, int64_t *epoch, int64_t *step);
/* Moves to (epoch, step), e.g. a position saved with a checkpoint: the batches that follow are
 * exactly those an uninterrupted run gives from there. Invalidates the batch handed out last
 * and discards prefetched ones. TFC_ERR_OUT_OF_RANGE for a negative epoch or a step outside
 * [0, steps_per_epoch); message on tfc_batcher_errmsg. */
TFC_API tfc_status tfc_batcher_seek(tfc_batcher *b, int64_t epoch, int64_t step);
TFC_API int64_t tfc_batcher_steps_per_epoch(const tfc_batcher *b);
/* Seconds the caller spent blocked in tfc_batcher_next waiting for the loader, in total (near
 * zero when loading keeps up with the training step). */
TFC_API double tfc_batcher_wait_seconds(const tfc_batcher *b);
TFC_API const char *tfc_batcher_errmsg(const tfc_batcher *b);

#ifdef __cplusplus
}
#endif
#endif /* TFC_DATASET_H */
