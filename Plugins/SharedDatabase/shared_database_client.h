/* shared_database_client.h — what a consumer of the shared_database example needs: the
 * provider's four methods as C functions, and a ticker thread that stop can end.
 *
 * Header-only (static functions), so each consumer stays one .so built from one .c file.
 * The wire format is described in Plugins/SharedDatabase/README.md. */
#ifndef FORSETTI_EXAMPLE_SHARED_DATABASE_CLIENT_H
#define FORSETTI_EXAMPLE_SHARED_DATABASE_CLIENT_H

#include <forsetti.h>
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Keys are 1–256 bytes without NUL; a value fills what is left of FORSETTI_ROLE_MAX_PAYLOAD. */
#define SDB_MAX_KEY 256u

/* put: the request is the key, one NUL, then the value's bytes. */
static inline forsetti_status sdb_put(const forsetti_role_service *db, const char *key, const void *value,
                                      size_t value_length) {
  size_t key_length = strlen(key);
  if (key_length == 0 || key_length > SDB_MAX_KEY) return FORSETTI_ERR_INVALID_ARGUMENT;
  if (value_length > FORSETTI_ROLE_MAX_PAYLOAD - key_length - 1) return FORSETTI_ERR_TOO_LARGE;
  unsigned char *request = malloc(key_length + 1 + value_length);
  if (request == NULL) return FORSETTI_ERR_IO;
  memcpy(request, key, key_length);
  request[key_length] = 0;
  if (value_length > 0) memcpy(request + key_length + 1, value, value_length);
  size_t unused = 0;
  forsetti_status s = db->call("put", request, key_length + 1 + value_length, NULL, 0, &unused);
  free(request);
  return s;
}

/* get: the request is the key; the response is the value. */
static inline forsetti_status sdb_get(const forsetti_role_service *db, const char *key, void *value,
                                      size_t capacity, size_t *value_length) {
  return db->call("get", key, strlen(key), value, capacity, value_length);
}

/* delete: the request is the key; FORSETTI_ERR_NOT_FOUND when this module has no such row. */
static inline forsetti_status sdb_delete(const forsetti_role_service *db, const char *key) {
  size_t unused = 0;
  return db->call("delete", key, strlen(key), NULL, 0, &unused);
}

/* list: an empty request; the response is this module's keys in byte order, each followed by
 * one NUL. */
static inline forsetti_status sdb_list(const forsetti_role_service *db, void *keys, size_t capacity,
                                       size_t *keys_length) {
  return db->call("list", "", 0, keys, capacity, keys_length);
}

/* A thread that runs `tick` now and then every `period_ms` until sdb_ticker_stop. */
typedef struct sdb_ticker {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  bool stopping;
  bool running;
  unsigned period_ms;
  void (*tick)(void);
} sdb_ticker;

static void *sdb_ticker_main(void *argument) {
  sdb_ticker *t = argument;
  pthread_mutex_lock(&t->lock);
  while (!t->stopping) {
    pthread_mutex_unlock(&t->lock);
    t->tick();
    pthread_mutex_lock(&t->lock);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += t->period_ms / 1000;
    until.tv_nsec += (long)(t->period_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec += 1;
      until.tv_nsec -= 1000000000L;
    }
    /* Woken early only by stop; a spurious wake-up just ticks a little sooner. */
    while (!t->stopping && pthread_cond_timedwait(&t->wake, &t->lock, &until) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&t->lock);
  return NULL;
}

/* Starts the thread; 0 on success, an errno value otherwise. */
static inline int sdb_ticker_start(sdb_ticker *t, unsigned period_ms, void (*tick)(void)) {
  pthread_condattr_t attributes;
  pthread_condattr_init(&attributes);
  /* Monotonic, so a change of the wall clock neither stalls nor rushes the ticks. */
  pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
  pthread_mutex_init(&t->lock, NULL);
  pthread_cond_init(&t->wake, &attributes);
  pthread_condattr_destroy(&attributes);
  t->stopping = false;
  t->period_ms = period_ms;
  t->tick = tick;
  int error = pthread_create(&t->thread, NULL, sdb_ticker_main, t);
  t->running = error == 0;
  return error;
}

/* Ends the thread and waits for it: after this returns no tick runs. A tick in progress
 * finishes first (a provider call waits at most FORSETTI_ROLE_CALL_TIMEOUT_MS). */
static inline void sdb_ticker_stop(sdb_ticker *t) {
  if (!t->running) return;
  pthread_mutex_lock(&t->lock);
  t->stopping = true;
  pthread_cond_signal(&t->wake);
  pthread_mutex_unlock(&t->lock);
  pthread_join(t->thread, NULL);
  t->running = false;
  pthread_cond_destroy(&t->wake);
  pthread_mutex_destroy(&t->lock);
}

/* A status's name, for log lines. */
static inline const char *sdb_status_name(forsetti_status s) {
  switch (s) {
  case FORSETTI_OK: return "OK";
  case FORSETTI_ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
  case FORSETTI_ERR_DENIED: return "DENIED";
  case FORSETTI_ERR_REVOKED: return "REVOKED";
  case FORSETTI_ERR_NOT_FOUND: return "NOT_FOUND";
  case FORSETTI_ERR_IO: return "IO";
  case FORSETTI_ERR_TOO_LARGE: return "TOO_LARGE";
  case FORSETTI_ERR_BUFFER_TOO_SMALL: return "BUFFER_TOO_SMALL";
  case FORSETTI_ERR_UNAVAILABLE: return "UNAVAILABLE";
  case FORSETTI_ERR_TIMEOUT: return "TIMEOUT";
  case FORSETTI_ERR_INVALID_DATA: return "INVALID_DATA";
  case FORSETTI_ERR_CALL_CYCLE: return "CALL_CYCLE";
  default: return "error";
  }
}

/* Lists this module's keys into `text` as "k1 k2 k3" (cut short with "..." when it would not
 * fit) and counts them in `*count`. */
static inline forsetti_status sdb_keys_text(const forsetti_role_service *db, char *text, size_t capacity,
                                            unsigned *count) {
  *count = 0;
  if (capacity < 5) return FORSETTI_ERR_INVALID_ARGUMENT;
  text[0] = 0;
  char *keys = malloc(FORSETTI_ROLE_MAX_PAYLOAD);
  if (keys == NULL) return FORSETTI_ERR_IO;
  size_t length = 0;
  forsetti_status s = sdb_list(db, keys, FORSETTI_ROLE_MAX_PAYLOAD, &length);
  if (s == FORSETTI_OK) {
    size_t used = 0;
    bool cut = false;
    for (size_t at = 0; at < length;) {
      const char *key = keys + at;
      size_t n = strnlen(key, length - at);
      at += n + 1;
      *count += 1;
      if (cut) continue;
      /* Room for a separator, the key, and " ..." with its NUL after it. */
      if (used + 1 + n + 5 <= capacity) {
        if (used > 0) text[used++] = ' ';
        memcpy(text + used, key, n);
        used += n;
        text[used] = 0;
      } else {
        memcpy(text + used, " ...", 5);
        cut = true;
      }
    }
  }
  free(keys);
  return s;
}

/* Whether the provider answered, logged once per change so a consumer retrying every tick
 * does not repeat itself. */
typedef struct sdb_link {
  bool down;
} sdb_link;

/* True when `s` came from the provider; false (and one log line on the change) when it did
 * not answer: not running yet, restarting, stopped, or too slow. */
static inline bool sdb_answered(const forsetti_host *host, sdb_link *link, const char *who, forsetti_status s) {
  char line[256];
  if (s == FORSETTI_ERR_UNAVAILABLE || s == FORSETTI_ERR_TIMEOUT) {
    if (!link->down) {
      snprintf(line, sizeof line, "%s: the shared database did not answer (%s); trying again each tick", who,
               sdb_status_name(s));
      host->log(FORSETTI_LOG_WARNING, line);
    }
    link->down = true;
    return false;
  }
  if (link->down) {
    snprintf(line, sizeof line, "%s: the shared database answers again", who);
    host->log(FORSETTI_LOG_INFO, line);
  }
  link->down = false;
  return true;
}

#endif
