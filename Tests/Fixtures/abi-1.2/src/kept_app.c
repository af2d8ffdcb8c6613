/* A consumer of shared_database as a vendor built it for ABI 1.2 (issue 39): three threads
 * each call "echo" three times at once, check the answer is their request, and log each status;
 * then "kept done ok=N bad=N". A call refused with FORSETTI_ERR_UNAVAILABLE before the provider
 * serves is tried again. Built once and kept: see ../README.md. */
#include <forsetti.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

_Static_assert(FORSETTI_ABI_MAJOR == 1 && FORSETTI_ABI_MINOR == 2, "built against the ABI 1.2 headers");

#define THREADS 3
#define CALLS 3

static const forsetti_host *g_host;
static const forsetti_role_service *g_db;
static pthread_t g_main;
static int g_ok, g_bad;

static void say(const char *m) { g_host->log(FORSETTI_LOG_INFO, m); }

static void pause_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void *caller(void *arg) {
  int me = (int)(long)arg;
  for (int k = 0; k < CALLS; k++) {
    char req[32], out[64], line[200];
    int len = snprintf(req, sizeof req, "t%d-%d", me, k);
    size_t n = 0;
    forsetti_status s = g_db->call("echo", req, (size_t)len, out, sizeof out - 1, &n);
    for (int tries = 0; s == FORSETTI_ERR_UNAVAILABLE && tries < 100; tries++) {
      pause_ms(100);
      s = g_db->call("echo", req, (size_t)len, out, sizeof out - 1, &n);
    }
    out[s == FORSETTI_OK && n < sizeof out ? n : 0] = 0;
    int good = s == FORSETTI_OK && strcmp(out, req) == 0;
    __atomic_add_fetch(good ? &g_ok : &g_bad, 1, __ATOMIC_SEQ_CST);
    snprintf(line, sizeof line, "echo %s -> %d %s", req, s, out);
    say(line);
  }
  return NULL;
}

static void *run(void *arg) {
  (void)arg;
  pthread_t threads[THREADS];
  int made = 0;
  for (int i = 0; i < THREADS; i++) made += pthread_create(&threads[made], NULL, caller, (void *)(long)i) == 0;
  for (int i = 0; i < made; i++) pthread_join(threads[i], NULL);
  char line[100];
  snprintf(line, sizeof line, "kept done ok=%d bad=%d threads=%d", g_ok, g_bad, made);
  say(line);
  return NULL;
}

static forsetti_status kept_start(void *self, const forsetti_host *host) {
  (void)self;
  g_host = host;
  g_db = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
  if (!g_db) { say("no role service"); return FORSETTI_ERR_START_FAILED; }
  return pthread_create(&g_main, NULL, run, NULL) == 0 ? FORSETTI_OK : FORSETTI_ERR_START_FAILED;
}

static void kept_stop(void *self) { (void)self; }

static const forsetti_module_descriptor descriptor = {
  .struct_size = sizeof(forsetti_module_descriptor),
  .module_id = "com.test.kept.app",
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

const forsetti_module *kept_app_entry(uint32_t host_abi) {
  (void)host_abi;
  return &module;
}
