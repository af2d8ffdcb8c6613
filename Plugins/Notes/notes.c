/* Notes: a consumer of the shared_database role.
 *
 * Every second it writes a numbered note to the shared database, keeps the last five, and logs
 * the rows it reads back: its own, and only its own. It also writes a row named "title", as
 * Journal does, to show that one key held by two modules is two rows. The note numbers go on
 * across restarts because they live in the database. */
#include "shared_database_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEEP 5

static const forsetti_host *g_host;
static const forsetti_role_service *g_db;
static sdb_ticker g_ticker;
static sdb_link g_link;
/* The next note's number; 0 until the database has been read once. */
static long g_next;
static unsigned g_ticks;

static void log_line(int32_t level, const char *line) { g_host->log(level, line); }

/* Learns where the numbering stands from the notes already stored. */
static bool resume(void) {
  char *keys = malloc(FORSETTI_ROLE_MAX_PAYLOAD);
  if (keys == NULL) return false;
  size_t length = 0;
  forsetti_status s = sdb_list(g_db, keys, FORSETTI_ROLE_MAX_PAYLOAD, &length);
  if (!sdb_answered(g_host, &g_link, "notes", s) || s != FORSETTI_OK) {
    free(keys);
    return false;
  }
  long highest = 0;
  for (size_t at = 0; at < length;) {
    const char *key = keys + at;
    at += strnlen(key, length - at) + 1;
    if (strncmp(key, "note-", 5) == 0) {
      long n = strtol(key + 5, NULL, 10);
      if (n > highest) highest = n;
    }
  }
  free(keys);
  g_next = highest + 1;

  static const char title[] = "my notes";
  sdb_put(g_db, "title", title, sizeof title - 1);
  /* Journal writes rows named entry-NNNN: they are not this module's to read. */
  char value[64];
  size_t n = 0;
  s = sdb_get(g_db, "entry-0001", value, sizeof value, &n);
  char line[160];
  snprintf(line, sizeof line, "notes: reading entry-0001 (a Journal key) gives %s", sdb_status_name(s));
  log_line(FORSETTI_LOG_INFO, line);
  return true;
}

static void tick(void) {
  g_ticks += 1;
  if (g_next == 0 && !resume()) return;

  char key[32], value[64], line[1024];
  snprintf(key, sizeof key, "note-%04ld", g_next);
  int n = snprintf(value, sizeof value, "note number %ld", g_next);
  forsetti_status s = sdb_put(g_db, key, value, (size_t)n);
  if (!sdb_answered(g_host, &g_link, "notes", s)) return;
  if (s != FORSETTI_OK) {
    snprintf(line, sizeof line, "notes: put %s failed: %s", key, sdb_status_name(s));
    log_line(FORSETTI_LOG_WARNING, line);
    return;
  }
  if (g_next > KEEP) {
    char old[32];
    snprintf(old, sizeof old, "note-%04ld", g_next - KEEP);
    sdb_delete(g_db, old);
  }
  g_next += 1;

  char keys[512];
  unsigned count = 0;
  s = sdb_keys_text(g_db, keys, sizeof keys, &count);
  if (!sdb_answered(g_host, &g_link, "notes", s) || s != FORSETTI_OK) return;
  char title[64];
  size_t title_length = 0;
  s = sdb_get(g_db, "title", title, sizeof title - 1, &title_length);
  if (!sdb_answered(g_host, &g_link, "notes", s)) return;
  title[s == FORSETTI_OK ? title_length : 0] = 0;
  snprintf(line, sizeof line, "notes: %u rows: %s; title = \"%s\"", count, keys, title);
  log_line(FORSETTI_LOG_INFO, line);
}

static forsetti_status notes_start(void *self, const forsetti_host *host) {
  (void)self;
  g_host = host;
  g_next = 0;
  g_ticks = 0;
  g_link.down = false;
  g_db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
  if (g_db == NULL) {
    host->log(FORSETTI_LOG_ERROR, "notes: no shared database (the host logged why)");
    return FORSETTI_ERR_DENIED;
  }
  /* The provider starts first, but may not answer yet (or ever): the thread retries each tick. */
  int error = sdb_ticker_start(&g_ticker, 1000, tick);
  if (error != 0) {
    char line[128];
    snprintf(line, sizeof line, "notes: cannot start its thread: %s", strerror(error));
    host->log(FORSETTI_LOG_ERROR, line);
    return FORSETTI_ERR_START_FAILED;
  }
  return FORSETTI_OK;
}

static void notes_stop(void *self) {
  (void)self;
  /* No tick may run once stop returns: the host table is gone then. */
  sdb_ticker_stop(&g_ticker);
  char line[64];
  snprintf(line, sizeof line, "notes: stopped after %u tick(s)", g_ticks);
  g_host->log(FORSETTI_LOG_INFO, line);
}

static const forsetti_module_descriptor descriptor = {
    .struct_size = sizeof(forsetti_module_descriptor),
    .module_id = "com.example.notes",
    .module_type = "service",
    .version_major = 0,
    .version_minor = 1,
    .version_patch = 0,
    .version_prerelease = NULL,
};

static const forsetti_module module = {
    .abi_version = FORSETTI_ABI_VERSION,
    .struct_size = sizeof(forsetti_module),
    .descriptor = &descriptor,
    .self = NULL,
    .start = notes_start,
    .stop = notes_stop,
    .ui_contributions = NULL,
    .save_state = NULL,
    .restore_state = NULL,
};

const forsetti_module *notes_entry(uint32_t host_abi_version) {
  if (FORSETTI_ABI_VERSION_MAJOR_OF(host_abi_version) != FORSETTI_ABI_MAJOR) return NULL;
  return &module;
}
