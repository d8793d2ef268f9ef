/* testing.h: hooks for the test programs (they link the convenience library, so they see
 * hidden symbols). Not part of the public API. `where` is a StarPU worker mask (STARPU_CPU,
 * STARPU_CUDA, STARPU_OPENCL). Both drop the session's cached plans. */
#ifndef TFC_TESTING_H
#define TFC_TESTING_H

#include <stdint.h>
#include "../src/tfc.h"

/* Copies every value a node produces through a copy task pinned to `where` workers, so every
 * edge of the graph crosses memory nodes (device coherence tests). on = 0 turns it off. */
void tfc_session_set_hop(tfc_session *s, int on, uint32_t where);
/* Pins every op task to `where` workers (0: no pinning), e.g. to run every CUDA codelet. */
void tfc_session_set_where(tfc_session *s, uint32_t where);

#endif
