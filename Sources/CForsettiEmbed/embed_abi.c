/* Compiles forsetti/embed.h on its own as C: the header needs nothing but what it includes. */
#include "forsetti/embed.h"

_Static_assert(FORSETTI_EMBED_ERROR_HOST == 6, "reason codes are part of the ABI");
