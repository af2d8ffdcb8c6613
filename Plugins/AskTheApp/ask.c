/* A module that asks the application embedding the host for something: it resolves the
 * application's weather service (forsetti/services/application.h) and calls it once at start.
 * A host that offers no such service (`forsetti-host run` offers none) gives it NULL, and the
 * module runs on without it. */
#include <forsetti.h>
#include <stdio.h>
#include <string.h>

#define WEATHER_SERVICE "com.example.weather.v1"

static forsetti_status ask_start(void *self, const forsetti_host *host) {
  (void)self;
  const forsetti_application_service *weather = host->resolve(WEATHER_SERVICE);
  if (weather == NULL) {
    host->log(FORSETTI_LOG_INFO, "no application offers " WEATHER_SERVICE "; running on without it");
    return FORSETTI_OK;
  }
  char reply[256];
  size_t length = 0;
  const char *city = "Oslo";
  forsetti_status s = weather->call("today", city, strlen(city), reply, sizeof reply, &length);
  char line[320];
  if (s == FORSETTI_OK) {
    snprintf(line, sizeof line, "the application says: %.*s", (int)length, reply);
  } else {
    snprintf(line, sizeof line, "the application's " WEATHER_SERVICE " answered status %d", s);
  }
  host->log(FORSETTI_LOG_INFO, line);
  return FORSETTI_OK;
}

static void ask_stop(void *self) { (void)self; }

static const forsetti_module_descriptor descriptor = {
    .struct_size = sizeof(forsetti_module_descriptor),
    .module_id = "com.example.asktheapp",
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
    .start = ask_start,
    .stop = ask_stop,
    .ui_contributions = NULL,
    .save_state = NULL,
    .restore_state = NULL,
};

const forsetti_module *ask_the_app_entry(uint32_t host_abi_version) {
  if (FORSETTI_ABI_VERSION_MAJOR_OF(host_abi_version) != FORSETTI_ABI_MAJOR) return NULL;
  return &module;
}
