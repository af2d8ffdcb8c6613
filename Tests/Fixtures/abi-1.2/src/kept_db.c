/* A shared_database provider as a vendor built it for ABI 1.2 (issue 39): it serves with
 * `serve` and knows nothing of 1.3. Each call of "echo" sleeps 200 ms, answers the request as
 * it came, and logs how many calls were inside the handler at once at most ("max_inside"):
 * written for one call at a time, it must see 1. Built once and kept: see ../README.md. */
#include <forsetti.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

_Static_assert(FORSETTI_ABI_MAJOR == 1 && FORSETTI_ABI_MINOR == 2, "built against the ABI 1.2 headers");

static const forsetti_host *g_host;
static int g_inside, g_max;

static void say(const char *m) { g_host->log(FORSETTI_LOG_INFO, m); }

static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                              size_t len, void *resp, size_t cap, size_t *rlen) {
  (void)ctx;
  if (strcmp(method, "echo") != 0) { *rlen = 0; return FORSETTI_OK; }
  int now = __atomic_add_fetch(&g_inside, 1, __ATOMIC_SEQ_CST);
  int m = __atomic_load_n(&g_max, __ATOMIC_SEQ_CST);
  while (now > m && !__atomic_compare_exchange_n(&g_max, &m, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  struct timespec t = {0, 200 * 1000000L};
  nanosleep(&t, NULL);
  __atomic_sub_fetch(&g_inside, 1, __ATOMIC_SEQ_CST);
  if (len > cap) { *rlen = len; return FORSETTI_ERR_BUFFER_TOO_SMALL; }
  memcpy(resp, req, len);
  *rlen = len;
  char line[200];
  snprintf(line, sizeof line, "served %.*s for %s max_inside=%d", (int)(len < 64 ? len : 64),
           (const char *)req, caller, __atomic_load_n(&g_max, __ATOMIC_SEQ_CST));
  say(line);
  return FORSETTI_OK;
}

static forsetti_status kept_start(void *self, const forsetti_host *host) {
  (void)self;
  g_host = host;
  const forsetti_role_service *r = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
  if (!r) { say("no role service"); return FORSETTI_ERR_START_FAILED; }
  return r->serve(handle, NULL) == FORSETTI_OK ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
}

static void kept_stop(void *self) { (void)self; }

static const forsetti_module_descriptor descriptor = {
  .struct_size = sizeof(forsetti_module_descriptor),
  .module_id = "com.test.kept.db",
  .module_type = "service",
  .version_major = 1, .version_minor = 2, .version_patch = 0,
  .version_prerelease = NULL,
};

static const struct forsetti_ui_contributions *kept_ui(void *self) { (void)self; return NULL; }

static const forsetti_module module = {
  .abi_version = FORSETTI_ABI_VERSION,
  .struct_size = sizeof(forsetti_module),
  .descriptor = &descriptor,
  .self = NULL,
  .start = kept_start,
  .stop = kept_stop,
  .ui_contributions = kept_ui,
};

const forsetti_module *kept_db_entry(uint32_t host_abi) {
  (void)host_abi;
  return &module;
}
