/* forsetti/services/log.h — logging is part of the host table itself (forsetti_host.log);
 * this header only adds a convenience macro. */
#ifndef FORSETTI_SERVICES_LOG_H
#define FORSETTI_SERVICES_LOG_H

#include "forsetti/host.h"

/* FORSETTI_LOG(host, FORSETTI_LOG_INFO, "started") */
#define FORSETTI_LOG(host, level, message) ((host)->log((level), (message)))

#endif
