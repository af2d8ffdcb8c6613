// The libelf surface ForsettiBinary uses. GELF_ST_* are macros, which Swift cannot call, so they
// are wrapped here as inline functions; everything else is libelf's own API.
#ifndef FORSETTI_CLIBELF_SHIM_H
#define FORSETTI_CLIBELF_SHIM_H
#include <gelf.h>
#include <libelf.h>

static inline unsigned char forsetti_sym_type(const GElf_Sym *s) { return GELF_ST_TYPE(s->st_info); }
static inline unsigned char forsetti_sym_bind(const GElf_Sym *s) { return GELF_ST_BIND(s->st_info); }
static inline unsigned char forsetti_sym_visibility(const GElf_Sym *s) { return GELF_ST_VISIBILITY(s->st_other); }
#endif
