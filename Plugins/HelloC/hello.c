/* A module in plain C, built with `cc -shared` against forsetti.h alone.
 *
 * It counts its greetings in storage (the count survives restarts), listens to the counter's
 * ticks, and sends a direct message to the dashboard. */
#include <forsetti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const forsetti_host *g_host;
static int g_ticks;

static void on_tick(void *context, const char *source, const char *type, const void *payload, size_t length) {
  (void)context;
  (void)type;
  if (++g_ticks == 1) {
    char line[160];
    snprintf(line, sizeof line, "C module got its first tick from %s: %.*s", source, (int)length, (const char *)payload);
    g_host->log(FORSETTI_LOG_INFO, line);
  }
}

static forsetti_status hello_start(void *self, const forsetti_host *host) {
  (void)self;
  g_host = host;
  const forsetti_storage *storage = host->resolve(FORSETTI_SERVICE_STORAGE);
  const forsetti_events *events = host->resolve(FORSETTI_SERVICE_EVENTS);
  const forsetti_messages *messages = host->resolve(FORSETTI_SERVICE_MESSAGES);
  if (storage == NULL || events == NULL || messages == NULL) return FORSETTI_ERR_DENIED;

  char buffer[32] = {0};
  size_t length = 0;
  long greetings = 0;
  if (storage->get("greetings", buffer, sizeof buffer - 1, &length) == FORSETTI_OK) greetings = strtol(buffer, NULL, 10);
  greetings += 1;
  int n = snprintf(buffer, sizeof buffer, "%ld", greetings);
  forsetti_status s = storage->set("greetings", buffer, (size_t)n);
  if (s != FORSETTI_OK) return s;

  char line[128];
  snprintf(line, sizeof line, "hello from C, greeting number %ld", greetings);
  host->log(FORSETTI_LOG_INFO, line);

  if (events->subscribe("counter.tick", on_tick, NULL) < 0) return FORSETTI_ERR_START_FAILED;
  messages->send("com.example.dashboard", "hello.greeting", line, strlen(line));
  return FORSETTI_OK;
}

static void hello_stop(void *self) {
  (void)self;
  char line[64];
  snprintf(line, sizeof line, "C module stopping after %d tick(s)", g_ticks);
  g_host->log(FORSETTI_LOG_INFO, line);
}

static const forsetti_module_descriptor descriptor = {
    .struct_size = sizeof(forsetti_module_descriptor),
    .module_id = "com.example.helloc",
    .module_type = "service",
    .version_major = 0,
    .version_minor = 3,
    .version_patch = 1,
    .version_prerelease = NULL,
};

static const forsetti_module module = {
    .abi_version = FORSETTI_ABI_VERSION,
    .struct_size = sizeof(forsetti_module),
    .descriptor = &descriptor,
    .self = NULL,
    .start = hello_start,
    .stop = hello_stop,
    .ui_contributions = NULL,
    .save_state = NULL,
    .restore_state = NULL,
};

const forsetti_module *hello_c_entry(uint32_t host_abi_version) {
  if (FORSETTI_ABI_VERSION_MAJOR_OF(host_abi_version) != FORSETTI_ABI_MAJOR) return NULL;
  return &module;
}
