/* forsetti/version.h — ABI version numbers. */
#ifndef FORSETTI_VERSION_H
#define FORSETTI_VERSION_H

#include <stdint.h>

/* A module built against major M, minor N runs on a host with the same major M and a minor
 * of at least N. Majors change only when existing fields change meaning; minors only add
 * fields at the end of tables or add services.
 * 1.1 added the services secure_storage, file_export, crypto_utilities, diagnostics and the role
 * services (forsetti/services/), and element sizes for the arrays of forsetti/ui.h.
 * 1.2 added the services an embedding application offers (forsetti/services/application.h).
 * 1.3 added to forsetti_role_service a provider's declared concurrency (`serve_concurrently`),
 * a caller's own deadline (`call_within`) and the time left of the call a handler serves
 * (`time_left_ns`), and the status FORSETTI_ERR_BUSY. */
#define FORSETTI_ABI_MAJOR 1u
#define FORSETTI_ABI_MINOR 3u

/* The packed form used in tables: major in the high 16 bits, minor in the low 16 bits. */
#define FORSETTI_ABI_VERSION_MAKE(major, minor) ((uint32_t)(((major) << 16) | ((minor) & 0xFFFFu)))
#define FORSETTI_ABI_VERSION FORSETTI_ABI_VERSION_MAKE(FORSETTI_ABI_MAJOR, FORSETTI_ABI_MINOR)
#define FORSETTI_ABI_VERSION_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define FORSETTI_ABI_VERSION_MINOR_OF(v) ((uint32_t)(v) & 0xFFFFu)

#endif
