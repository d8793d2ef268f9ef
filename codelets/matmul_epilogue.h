/* matmul_epilogue.h: a float32 product and the bias add that reads it (with at most one unary
 * activation after the add: a dense layer) as one CPU kernel, for chain tasks
 * (sched/chain_epilogue.c merges the two steps). The product is written straight into the
 * add's output, then each row chunk gets its bias and activation while it is in cache: the
 * same values as the two steps (the same product, then the same float formulas, ew_math.h).
 *
 * Its kargs: kind TFC_K_MATMUL, inputs A, B and the bias ([n] or [1, n]), one output [m, n];
 * attrs MATMUL_TRANSPOSE_A/B as the matmul's, MATMUL_EPILOGUE_ACT (.i: the unary kind or 0,
 * .f: its p0) and MATMUL_EPILOGUE_P1 (.f: its p1). */
#ifndef TFC_MATMUL_EPILOGUE_H
#define TFC_MATMUL_EPILOGUE_H

void tfc_matmul_epilogue_cpu(void *buffers[], void *cl_arg);

/* Products with an epilogue run in this process (for tests: whether the merge happened). */
long tfc_matmul_epilogue_runs(void);

#endif
