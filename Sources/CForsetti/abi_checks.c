// Compile-time checks of the ABI's promises: fixed layouts that only grow at the end.
#include "forsetti.h"

_Static_assert(offsetof(forsetti_module, abi_version) == 0, "abi_version comes first");
_Static_assert(offsetof(forsetti_module, struct_size) == 4, "struct_size comes second");
_Static_assert(offsetof(forsetti_host, abi_version) == 0, "abi_version comes first");
_Static_assert(offsetof(forsetti_host, struct_size) == 4, "struct_size comes second");
_Static_assert(sizeof(forsetti_status) == 4, "status codes are int32_t");

// The ABI 1.1 element sizes follow every ABI 1.0 field of forsetti_ui_contributions.
_Static_assert(offsetof(forsetti_ui_contributions, toolbar_item_size) >
                   offsetof(forsetti_ui_contributions, theme_token_count),
               "forsetti_ui_contributions grows only at the end");
_Static_assert(offsetof(forsetti_ui_contributions, view_injection_size) >
                   offsetof(forsetti_ui_contributions, toolbar_item_size),
               "forsetti_ui_contributions grows only at the end");
_Static_assert(offsetof(forsetti_ui_contributions, theme_token_size) >
                   offsetof(forsetti_ui_contributions, view_injection_size),
               "forsetti_ui_contributions grows only at the end");

// The host takes its own sizeof of each UI element as the ABI 1.0 size, the smallest element a
// module may declare (ModuleTableReader). These fail when a field is added to an element: then
// give the reader the ABI 1.0 size explicitly and read the new field only when the module's
// element size holds it.
#define FORSETTI_ENDS_WITH(T, last)                                                                \
  (sizeof(T) == (offsetof(T, last) + sizeof(((T *)0)->last) + _Alignof(T) - 1) / _Alignof(T) *     \
                    _Alignof(T))
_Static_assert(FORSETTI_ENDS_WITH(forsetti_toolbar_item, action_route_id),
               "forsetti_toolbar_item is its ABI 1.0 layout");
_Static_assert(FORSETTI_ENDS_WITH(forsetti_view_injection, priority),
               "forsetti_view_injection is its ABI 1.0 layout");
_Static_assert(FORSETTI_ENDS_WITH(forsetti_theme_token, color), "forsetti_theme_token is its ABI 1.0 layout");

/// The ABI version this copy of forsetti.h describes; lets tools ask a built library.
uint32_t forsetti_header_abi_version(void) { return FORSETTI_ABI_VERSION; }
