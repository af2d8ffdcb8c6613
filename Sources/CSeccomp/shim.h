// libseccomp for worker confinement. SCMP_ACT_ERRNO is a macro, so it is wrapped here.
#ifndef FORSETTI_CSECCOMP_SHIM_H
#define FORSETTI_CSECCOMP_SHIM_H
#include <seccomp.h>

static inline uint32_t forsetti_scmp_act_errno(uint16_t e) { return SCMP_ACT_ERRNO(e); }
static inline uint32_t forsetti_scmp_act_allow(void) { return SCMP_ACT_ALLOW; }
#endif
