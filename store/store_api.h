/* store_api.h: the store's public declarations now live in src/tfc.h (section "Model store");
 * this file only forwards there. */
#ifndef TFC_STORE_API_H
#define TFC_STORE_API_H
#include "../src/tfc.h"
#endif
