/* matmul_dnnl.h: oneDNN's matmul primitive for the float32 products of the CPU matmul codelet
 * (codelets/matmul_dnnl.c), as codelets/matmul.c calls it before OpenBLAS. */
#ifndef TFC_MATMUL_DNNL_KERNEL_H
#define TFC_MATMUL_DNNL_KERNEL_H

#include <stdint.h>

/* Whether the shape rule sends C[m,n] = op(A) op(B) (op(A) [m,k]) to oneDNN under
 * TFC_MATMUL_BACKEND=auto (bench/matmul_small's figures; always 0 without oneDNN). */
int tfc_matmul_dnnl_wins(int64_t m, int64_t n, int64_t k);

/* Row-major float32 C[m,n] = op(A) op(B) with row strides lda, ldb, ldc (A is [m,k], or [k,m]
 * when ta; B [k,n], or [n,k] when tb); C is overwritten and never read. 1 when oneDNN ran it;
 * 0 when it did not (the library was built without oneDNN, or oneDNN refused the shape or
 * failed): the caller runs OpenBLAS then. */
int tfc_matmul_dnnl_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A,
                          int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc);

/* 1 when the library was built with oneDNN. */
int tfc_matmul_dnnl_present(void);

/* Products oneDNN has run in this process (for tests: which path a product took). */
long tfc_matmul_dnnl_runs(void);

#endif
