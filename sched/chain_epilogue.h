/* chain_epilogue.h: a matmul and the bias add after it (a dense layer) as one step of a chain
 * task (sched/chain_epilogue.c; the kernel: codelets/matmul_epilogue.h). */
#ifndef TFC_CHAIN_EPILOGUE_H
#define TFC_CHAIN_EPILOGUE_H

#include "plan.h"

/* How step e adds a bias to the product of step mm: buffer indices in the steps' buffers. */
struct tfc_epilogue {
    int product;    /* mm's output buffer, which e reads */
    int bias_in;    /* e's input (descriptor) that is the bias */
    int act;        /* the unary kind e applies after the add, or 0 */
    double p0, p1;  /* its float attributes */
};

/* Whether step e (the next one in a chain) is a bias add of step mm's product with at most
 * one unary after it, all float32: mm a 2-D matmul, e's other input a row vector ([n] or
 * [1, n]) read whole, e's one output the product's shape. Fills *ep. The caller checks that
 * no other step of the chain reads the product. */
int tfc_epilogue_match(const struct step *mm, const struct step *e, struct tfc_epilogue *ep);

/* The bytes of a merged step's kargs. */
size_t tfc_epilogue_args_size(void);

/* Writes the merged step's kargs (codelets/matmul_epilogue.h) to out
 * (tfc_epilogue_args_size() bytes): buffers 0 to 3 are mm's A and B, e's bias and e's output. */
void tfc_epilogue_args(const struct step *mm, const struct step *e, const struct tfc_epilogue *ep,
                       struct tfc_kargs *out);

/* The buffer of step mm (which = 0, 1) or of step e (which = 2, 3) behind the merged step's
 * buffer `which`, as an index into that step's buffers. */
int tfc_epilogue_buf(const struct step *mm, const struct step *e, const struct tfc_epilogue *ep,
                     int which);

#endif
