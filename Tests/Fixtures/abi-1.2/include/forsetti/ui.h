/* forsetti/ui.h — UI contributions of ui and app modules, returned by the module table's
 * `ui_contributions`. The host checks each against the module's capabilities and (template 1.1)
 * the IDs declared under runtimeRequirements.ui before start, then publishes them. */
#ifndef FORSETTI_UI_H
#define FORSETTI_UI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Needs capability toolbar_items. `action_route_id` (may be NULL) opens an overlay route. */
typedef struct forsetti_toolbar_item {
  const char *item_id;
  const char *title;
  const char *action_route_id;
} forsetti_toolbar_item;

/* Needs capability view_injection. Within a slot, higher priority comes first. */
typedef struct forsetti_view_injection {
  const char *view_id;
  const char *slot_id;
  int32_t priority;
} forsetti_view_injection;

/* A theme token: name and colour "#RRGGBB" or "#RRGGBBAA". */
typedef struct forsetti_theme_token {
  const char *name;
  const char *color;
} forsetti_theme_token;

/* Every pointer and count may be NULL/0 for "none". Strings are UTF-8.
 *
 * Growth (ABI 1.1): like every table here, this struct only grows at the end and
 * `struct_size` says how much of it the module built. The element structs above may grow too
 * (new fields at their end, as CLAP's versioned structs do), so each array carries the size of
 * one of its elements as the module built it: the host steps through the array by that size,
 * reads only the fields it knows, and ignores the rest. Set each to sizeof(the element type);
 * 0, or a `struct_size` too small to hold the field (a module built against ABI 1.0), means the
 * ABI 1.0 size. The host refuses a size below the ABI 1.0 size of the element, one that is not
 * a multiple of the element's alignment, or one above 4096 bytes. */
typedef struct forsetti_ui_contributions {
  uint32_t struct_size;
  const forsetti_toolbar_item *toolbar_items;
  size_t toolbar_item_count;
  const forsetti_view_injection *view_injections;
  size_t view_injection_count;
  const char *const *overlay_route_ids; /* needs capability routing_overlay */
  size_t overlay_route_count;
  const char *const *overlay_pointer_ids; /* needs capability routing_overlay */
  size_t overlay_pointer_count;
  const char *theme_id; /* NULL for no theme mask; needs capability ui_theme_mask */
  const forsetti_theme_token *theme_tokens;
  size_t theme_token_count;
  /* ABI 1.1: sizeof one element of each array as the module built it (0: the ABI 1.0 size). */
  size_t toolbar_item_size;   /* sizeof(forsetti_toolbar_item) */
  size_t view_injection_size; /* sizeof(forsetti_view_injection) */
  size_t theme_token_size;    /* sizeof(forsetti_theme_token) */
} forsetti_ui_contributions;

#ifdef __cplusplus
}
#endif
#endif
