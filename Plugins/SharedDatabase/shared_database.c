/* The shared_database role, served from SQLite.
 *
 * A service module holding the default role shared_database: it keeps one SQLite file in its
 * sandbox and answers put, get, list and delete for every module that consumes the role. Each
 * row belongs to the module that wrote it, and that owner is always the caller ID the host
 * passes to the handler, never anything the request says: a consumer sees only its own rows.
 * The protocol is in README.md beside this file. */
#include <forsetti.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Keys are 1–256 bytes without NUL. */
#define MAX_KEY 256u
/* Rows one module may hold: with the longest keys, `list` still fits one response. */
#define MAX_ROWS_PER_OWNER 200
_Static_assert(MAX_ROWS_PER_OWNER * (MAX_KEY + 1) <= FORSETTI_ROLE_MAX_PAYLOAD, "list fits one response");

static const forsetti_host *g_host;
static const forsetti_role_service *g_role;

/* The database and its statements, guarded by g_lock: the host sends calls one at a time, but
 * stop closes the database and must not race a call that is still in the handler. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static sqlite3 *g_db;
static sqlite3_stmt *g_put, *g_get, *g_list, *g_delete, *g_count_others, *g_totals;
static unsigned long g_calls;

static void say(int32_t level, const char *format, const char *a, const char *b) {
  char line[1024];
  snprintf(line, sizeof line, format, a, b);
  g_host->log(level, line);
}

/* Every statement the module runs, fixed text with bound parameters only. */
static const char *const k_schema =
    "CREATE TABLE IF NOT EXISTS rows("
    " owner TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,"
    " PRIMARY KEY(owner, key)) WITHOUT ROWID";
/* WAL keeps readers (an operator's sqlite3 shell) from blocking the consumers; temp_store keeps
 * SQLite's temporary files in memory, as the worker may write only in its sandbox. */
static const char *const k_pragmas = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY";
static const char *const k_put =
    "INSERT INTO rows(owner, key, value) VALUES(?1, ?2, ?3)"
    " ON CONFLICT(owner, key) DO UPDATE SET value = excluded.value";
static const char *const k_get = "SELECT value FROM rows WHERE owner = ?1 AND key = ?2";
static const char *const k_list = "SELECT key FROM rows WHERE owner = ?1 ORDER BY key";
static const char *const k_delete = "DELETE FROM rows WHERE owner = ?1 AND key = ?2";
static const char *const k_count_others = "SELECT count(*) FROM rows WHERE owner = ?1 AND key <> ?2";
static const char *const k_totals = "SELECT count(*), count(DISTINCT owner) FROM rows";

static forsetti_status database_error(const char *what) {
  say(FORSETTI_LOG_ERROR, "shared database: %s failed: %s", what, sqlite3_errmsg(g_db));
  return FORSETTI_ERR_IO;
}

/* Binds the owner and the key: the only way either reaches SQL. */
static int bind_owner_key(sqlite3_stmt *s, const char *owner, const char *key, size_t key_length) {
  int rc = sqlite3_bind_text(s, 1, owner, -1, SQLITE_TRANSIENT);
  if (rc == SQLITE_OK) rc = sqlite3_bind_text(s, 2, key, (int)key_length, SQLITE_TRANSIENT);
  return rc;
}

static void finish(sqlite3_stmt *s) {
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
}

/* A key is the whole request (get, delete) or what precedes the first NUL (put). */
static bool valid_key(const char *key, size_t length) {
  return length > 0 && length <= MAX_KEY && memchr(key, 0, length) == NULL;
}

static forsetti_status do_put(const char *owner, const char *request, size_t length) {
  const char *nul = memchr(request, 0, length);
  if (nul == NULL) return FORSETTI_ERR_INVALID_ARGUMENT;
  size_t key_length = (size_t)(nul - request);
  if (!valid_key(request, key_length)) return FORSETTI_ERR_INVALID_ARGUMENT;
  const char *value = nul + 1;
  size_t value_length = length - key_length - 1;

  if (bind_owner_key(g_count_others, owner, request, key_length) != SQLITE_OK ||
      sqlite3_step(g_count_others) != SQLITE_ROW) {
    finish(g_count_others);
    return database_error("counting rows");
  }
  sqlite3_int64 others = sqlite3_column_int64(g_count_others, 0);
  finish(g_count_others);
  if (others >= MAX_ROWS_PER_OWNER) return FORSETTI_ERR_TOO_LARGE;

  int rc = bind_owner_key(g_put, owner, request, key_length);
  /* A zero-length blob still binds as a blob (not NULL) with a non-NULL pointer. */
  if (rc == SQLITE_OK) rc = sqlite3_bind_blob(g_put, 3, value_length ? value : "", (int)value_length, SQLITE_TRANSIENT);
  if (rc == SQLITE_OK) rc = sqlite3_step(g_put);
  finish(g_put);
  return rc == SQLITE_DONE ? FORSETTI_OK : database_error("put");
}

static forsetti_status do_get(const char *owner, const char *key, size_t key_length, void *response,
                              size_t capacity, size_t *response_length) {
  if (!valid_key(key, key_length)) return FORSETTI_ERR_INVALID_ARGUMENT;
  int rc = bind_owner_key(g_get, owner, key, key_length);
  if (rc == SQLITE_OK) rc = sqlite3_step(g_get);
  forsetti_status status;
  if (rc == SQLITE_ROW) {
    const void *value = sqlite3_column_blob(g_get, 0);
    size_t n = (size_t)sqlite3_column_bytes(g_get, 0);
    *response_length = n;
    if (n > capacity) {
      status = FORSETTI_ERR_BUFFER_TOO_SMALL;
    } else {
      if (n > 0) memcpy(response, value, n);
      status = FORSETTI_OK;
    }
  } else if (rc == SQLITE_DONE) {
    status = FORSETTI_ERR_NOT_FOUND;
  } else {
    status = database_error("get");
  }
  finish(g_get);
  return status;
}

static forsetti_status do_list(const char *owner, void *response, size_t capacity, size_t *response_length) {
  if (sqlite3_bind_text(g_list, 1, owner, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
    finish(g_list);
    return database_error("list");
  }
  /* Every key is counted even once the room is exceeded, to report how much is needed. */
  size_t needed = 0;
  int rc;
  while ((rc = sqlite3_step(g_list)) == SQLITE_ROW) {
    const unsigned char *key = sqlite3_column_text(g_list, 0);
    size_t n = (size_t)sqlite3_column_bytes(g_list, 0);
    if (key != NULL && needed + n + 1 <= capacity) {
      memcpy((char *)response + needed, key, n);
      ((char *)response)[needed + n] = 0;
    }
    needed += n + 1;
  }
  finish(g_list);
  if (rc != SQLITE_DONE) return database_error("list");
  *response_length = needed;
  return needed > capacity ? FORSETTI_ERR_BUFFER_TOO_SMALL : FORSETTI_OK;
}

static forsetti_status do_delete(const char *owner, const char *key, size_t key_length) {
  if (!valid_key(key, key_length)) return FORSETTI_ERR_INVALID_ARGUMENT;
  int rc = bind_owner_key(g_delete, owner, key, key_length);
  if (rc == SQLITE_OK) rc = sqlite3_step(g_delete);
  finish(g_delete);
  if (rc != SQLITE_DONE) return database_error("delete");
  return sqlite3_changes(g_db) > 0 ? FORSETTI_OK : FORSETTI_ERR_NOT_FOUND;
}

/* The role handler. `caller` is the host's word for who calls; it is the owner of every row
 * this call reads or writes. */
static forsetti_status handle(void *context, const char *caller, const char *method, const void *request,
                              size_t request_length, void *response, size_t capacity, size_t *response_length) {
  (void)context;
  *response_length = 0;
  if (caller == NULL || caller[0] == 0 || method == NULL) return FORSETTI_ERR_INVALID_ARGUMENT;
  if (request == NULL) {
    if (request_length != 0) return FORSETTI_ERR_INVALID_ARGUMENT;
    request = "";
  }
  pthread_mutex_lock(&g_lock);
  forsetti_status status;
  if (g_db == NULL) {
    status = FORSETTI_ERR_UNAVAILABLE;
  } else if (strcmp(method, "put") == 0) {
    status = do_put(caller, request, request_length);
  } else if (strcmp(method, "get") == 0) {
    status = do_get(caller, request, request_length, response, capacity, response_length);
  } else if (strcmp(method, "list") == 0) {
    status = do_list(caller, response, capacity, response_length);
  } else if (strcmp(method, "delete") == 0) {
    status = do_delete(caller, request, request_length);
  } else {
    status = FORSETTI_ERR_INVALID_ARGUMENT;
  }
  g_calls += 1;
  pthread_mutex_unlock(&g_lock);
  return status;
}

/* Creates `path` and its missing parents (an in-process host does not create the sandbox). */
static int make_directories(const char *path) {
  char buffer[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buffer) return ENAMETOOLONG;
  memcpy(buffer, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buffer[i] != '/' && buffer[i] != 0) continue;
    char saved = buffer[i];
    buffer[i] = 0;
    if (mkdir(buffer, 0700) != 0 && errno != EEXIST) return errno;
    buffer[i] = saved;
  }
  return 0;
}

static void close_database(void) {
  sqlite3_stmt **all[] = {&g_put, &g_get, &g_list, &g_delete, &g_count_others, &g_totals};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    sqlite3_finalize(*all[i]);
    *all[i] = NULL;
  }
  /* Closing the last connection checkpoints the WAL into the database file. */
  sqlite3_close(g_db);
  g_db = NULL;
}

static forsetti_status open_database(const char *path) {
  if (sqlite3_open_v2(path, &g_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
      SQLITE_OK) {
    say(FORSETTI_LOG_ERROR, "shared database: cannot open %s: %s", path,
        g_db ? sqlite3_errmsg(g_db) : "out of memory");
    close_database();
    return FORSETTI_ERR_IO;
  }
  sqlite3_busy_timeout(g_db, 1000);
  struct {
    const char *sql;
    sqlite3_stmt **statement;
  } prepared[] = {{k_put, &g_put},       {k_get, &g_get},
                  {k_list, &g_list},     {k_delete, &g_delete},
                  {k_count_others, &g_count_others}, {k_totals, &g_totals}};
  if (sqlite3_exec(g_db, k_pragmas, NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(g_db, k_schema, NULL, NULL, NULL) != SQLITE_OK) {
    say(FORSETTI_LOG_ERROR, "shared database: cannot set up %s: %s", path, sqlite3_errmsg(g_db));
    close_database();
    return FORSETTI_ERR_IO;
  }
  for (size_t i = 0; i < sizeof prepared / sizeof prepared[0]; i++) {
    if (sqlite3_prepare_v2(g_db, prepared[i].sql, -1, prepared[i].statement, NULL) != SQLITE_OK) {
      say(FORSETTI_LOG_ERROR, "shared database: cannot prepare %s: %s", prepared[i].sql, sqlite3_errmsg(g_db));
      close_database();
      return FORSETTI_ERR_IO;
    }
  }
  return FORSETTI_OK;
}

static forsetti_status shared_database_start(void *self, const forsetti_host *host) {
  (void)self;
  g_host = host;
  g_calls = 0;
  g_role = host->resolve(FORSETTI_SERVICE_ROLE_SHARED_DATABASE);
  if (g_role == NULL) {
    host->log(FORSETTI_LOG_ERROR, "shared database: the host did not give this module the shared_database role");
    return FORSETTI_ERR_DENIED;
  }
  int error = make_directories(host->sandbox_path);
  if (error != 0) {
    say(FORSETTI_LOG_ERROR, "shared database: cannot create %s: %s", host->sandbox_path, strerror(error));
    return FORSETTI_ERR_IO;
  }
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/shared.sqlite3", host->sandbox_path) >= (int)sizeof path) {
    return FORSETTI_ERR_IO;
  }

  pthread_mutex_lock(&g_lock);
  forsetti_status status = open_database(path);
  long long rows = 0, owners = 0;
  if (status == FORSETTI_OK && sqlite3_step(g_totals) == SQLITE_ROW) {
    rows = sqlite3_column_int64(g_totals, 0);
    owners = sqlite3_column_int64(g_totals, 1);
  }
  if (g_totals != NULL) finish(g_totals);
  pthread_mutex_unlock(&g_lock);
  if (status != FORSETTI_OK) return status;

  status = g_role->serve(handle, NULL);
  if (status != FORSETTI_OK) {
    char line[128];
    snprintf(line, sizeof line, "shared database: serve refused (%d)", (int)status);
    host->log(FORSETTI_LOG_ERROR, line);
    pthread_mutex_lock(&g_lock);
    close_database();
    pthread_mutex_unlock(&g_lock);
    return status;
  }
  char line[PATH_MAX + 128];
  snprintf(line, sizeof line, "shared database: serving %s (%lld rows of %lld modules)", path, rows, owners);
  host->log(FORSETTI_LOG_INFO, line);
  return FORSETTI_OK;
}

static void shared_database_stop(void *self) {
  (void)self;
  /* The host has withdrawn the handler already; this says so explicitly for a host that has not. */
  g_role->serve(NULL, NULL);
  pthread_mutex_lock(&g_lock);
  unsigned long calls = g_calls;
  close_database();
  pthread_mutex_unlock(&g_lock);
  char line[128];
  snprintf(line, sizeof line, "shared database: closed after %lu call(s)", calls);
  g_host->log(FORSETTI_LOG_INFO, line);
}

static const forsetti_module_descriptor descriptor = {
    .struct_size = sizeof(forsetti_module_descriptor),
    .module_id = "com.example.shared-database",
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
    .start = shared_database_start,
    .stop = shared_database_stop,
    .ui_contributions = NULL,
    .save_state = NULL,
    .restore_state = NULL,
};

const forsetti_module *shared_database_entry(uint32_t host_abi_version) {
  if (FORSETTI_ABI_VERSION_MAJOR_OF(host_abi_version) != FORSETTI_ABI_MAJOR) return NULL;
  return &module;
}
