/* thread_scratch.h: per-thread scratch memory for kernels that need more than their buffers
 * (the Winograd transforms' tiles, a row chain's intermediates). Each user has its own buffer
 * per thread, grown on demand, kept between tasks (a worker reuses it: no allocation per task)
 * and freed when the thread exits. */
#ifndef TFC_THREAD_SCRATCH_H
#define TFC_THREAD_SCRATCH_H

#include <stddef.h>

enum tfc_scratch_user {
    TFC_SCRATCH_WINOGRAD, /* codelets/conv_winograd.c */
    TFC_SCRATCH_CHAIN,    /* codelets/chain.c: may call a kernel that uses another user's */
    TFC_SCRATCH_USERS
};

/* The calling thread's scratch of user u, at least `bytes` long and 64-byte aligned (its
 * content is not kept when it grows); NULL without memory. */
void *tfc_thread_scratch(enum tfc_scratch_user u, size_t bytes);
/* Threads holding scratch now (tests: worker threads free theirs when they exit). */
int tfc_thread_scratch_live(void);

#endif
