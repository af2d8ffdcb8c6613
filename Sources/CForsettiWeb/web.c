#include "forsetti_web.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// libmicrohttpd is opened when the debug screen starts, not linked: linked, it and GnuTLS behind
// it (nine libraries) are loaded, relocated and initialised by every forsetti-host command, for
// about a millisecond and 2.4 MiB of resident memory, though only `--ui` serves a page.
#define FORSETTI_WEB_LIBRARY "libmicrohttpd.so.12"

static struct {
  __typeof__(&MHD_add_response_header) add_response_header;
  __typeof__(&MHD_create_response_from_buffer) create_response_from_buffer;
  __typeof__(&MHD_create_response_from_callback) create_response_from_callback;
  __typeof__(&MHD_destroy_response) destroy_response;
  __typeof__(&MHD_get_daemon_info) get_daemon_info;
  __typeof__(&MHD_lookup_connection_value) lookup_connection_value;
  __typeof__(&MHD_queue_response) queue_response;
  __typeof__(&MHD_resume_connection) resume_connection;
  __typeof__(&MHD_set_connection_option) set_connection_option;
  __typeof__(&MHD_start_daemon) start_daemon;
  __typeof__(&MHD_stop_daemon) stop_daemon;
  __typeof__(&MHD_suspend_connection) suspend_connection;
} mhd;
static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;
static int mhd_loaded;

static void *mhd_symbol(void *library, const char *name, int *missing) {
  void *f = dlsym(library, name);
  if (f == NULL) *missing = 1;
  return f;
}

static void mhd_load(void) {
  void *library = dlopen(FORSETTI_WEB_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) return;
  int missing = 0;
#define FORSETTI_WEB_BIND(name) mhd.name = (__typeof__(mhd.name))mhd_symbol(library, "MHD_" #name, &missing)
  FORSETTI_WEB_BIND(add_response_header);
  FORSETTI_WEB_BIND(create_response_from_buffer);
  FORSETTI_WEB_BIND(create_response_from_callback);
  FORSETTI_WEB_BIND(destroy_response);
  FORSETTI_WEB_BIND(get_daemon_info);
  FORSETTI_WEB_BIND(lookup_connection_value);
  FORSETTI_WEB_BIND(queue_response);
  FORSETTI_WEB_BIND(resume_connection);
  FORSETTI_WEB_BIND(set_connection_option);
  FORSETTI_WEB_BIND(start_daemon);
  FORSETTI_WEB_BIND(stop_daemon);
  FORSETTI_WEB_BIND(suspend_connection);
#undef FORSETTI_WEB_BIND
  mhd_loaded = !missing;
}

int forsetti_web_load(void) { return pthread_once(&mhd_once, mhd_load) == 0 && mhd_loaded; }

const char *forsetti_web_library(void) { return FORSETTI_WEB_LIBRARY; }

// Every call below goes through the table; only forsetti_web_start can run before it is filled,
// and it fills it (every other entry point needs the daemon or a connection it made).
#define MHD_add_response_header mhd.add_response_header
#define MHD_create_response_from_buffer mhd.create_response_from_buffer
#define MHD_create_response_from_callback mhd.create_response_from_callback
#define MHD_destroy_response mhd.destroy_response
#define MHD_get_daemon_info mhd.get_daemon_info
#define MHD_lookup_connection_value mhd.lookup_connection_value
#define MHD_queue_response mhd.queue_response
#define MHD_resume_connection mhd.resume_connection
#define MHD_set_connection_option mhd.set_connection_option
#define MHD_start_daemon mhd.start_daemon
#define MHD_stop_daemon mhd.stop_daemon
#define MHD_suspend_connection mhd.suspend_connection

#define FORSETTI_WEB_MAX_BODY (1u << 20)

struct server {
  forsetti_web_handler handler;
  forsetti_web_stream_reader reader;
  forsetti_web_stream_closed closed;
  void *ctx;
};

struct pending {
  uint64_t id;
  char *body;
  size_t length;
  int too_large;
};

// Names each request, so one answered later (after a suspension) is found again.
static _Atomic uint64_t next_request = 1;

struct stream {
  struct server *server;
  struct MHD_Connection *connection;
  uint64_t id;
};

// The server whose handler runs on this thread (the handler runs on the polling thread that owns
// the connection): a stream answer queued from the handler reads through it.
static __thread struct server *current_server;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  (void)version;
  struct server *s = cls;
  struct pending *p = *con_cls;
  if (p == NULL) {
    p = calloc(1, sizeof *p);
    if (p == NULL) return MHD_NO;
    p->id = next_request++;
    *con_cls = p;
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    size_t n = *upload_data_size;
    if (!p->too_large && p->length + n <= FORSETTI_WEB_MAX_BODY) {
      char *grown = realloc(p->body, p->length + n + 1);
      if (grown == NULL) return MHD_NO;
      p->body = grown;
      memcpy(p->body + p->length, upload_data, n);
      p->length += n;
      p->body[p->length] = 0;
    } else {
      p->too_large = 1;
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  current_server = s;
  int ok = s->handler(s->ctx, connection, p->id, method, url, p->body ? p->body : "", p->length, p->too_large);
  current_server = NULL;
  return ok ? MHD_YES : MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
  (void)cls;
  (void)connection;
  (void)code;
  struct pending *p = *con_cls;
  if (p) {
    free(p->body);
    free(p);
  }
  *con_cls = NULL;
}

struct MHD_Daemon *forsetti_web_start(uint16_t port, struct forsetti_web_limits limits,
                                      forsetti_web_handler handler, forsetti_web_stream_reader reader,
                                      forsetti_web_stream_closed closed, void *ctx) {
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return forsetti_web_start_at((const struct sockaddr *)&address, limits, handler, reader, closed, ctx);
}

struct MHD_Daemon *forsetti_web_start_at(const struct sockaddr *address, struct forsetti_web_limits limits,
                                         forsetti_web_handler handler, forsetti_web_stream_reader reader,
                                         forsetti_web_stream_closed closed, void *ctx) {
  if (address == NULL || (address->sa_family != AF_INET && address->sa_family != AF_INET6)) return NULL;
  if (!forsetti_web_load()) return NULL;
  struct server *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->handler = handler;
  s->reader = reader;
  s->closed = closed;
  s->ctx = ctx;
  uint16_t port = address->sa_family == AF_INET ? ntohs(((const struct sockaddr_in *)address)->sin_port)
                                                : ntohs(((const struct sockaddr_in6 *)address)->sin6_port);
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
  if (address->sa_family == AF_INET6) flags |= MHD_USE_IPv6;
  // A few epoll threads for every connection (never a thread per connection: a thousand idle
  // streams cost a thousand descriptors, not a thousand threads). Streams wait suspended, out of
  // the event loop, until there is something to send. No per-IP limit: every client of a
  // loopback server is 127.0.0.1, so it would be the global limit again. No error log: a client
  // refused at the connection limit would print a line on the host's output each time.
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, port, NULL, NULL, &on_request, s, MHD_OPTION_SOCK_ADDR, address, MHD_OPTION_NOTIFY_COMPLETED,
      &on_completed, NULL, MHD_OPTION_CONNECTION_LIMIT, limits.connections, MHD_OPTION_CONNECTION_TIMEOUT,
      limits.idle_seconds, MHD_OPTION_THREAD_POOL_SIZE, limits.threads, MHD_OPTION_END);
  if (d == NULL) free(s);
  return d;
}

uint16_t forsetti_web_port(struct MHD_Daemon *daemon) {
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
  return info ? info->port : 0;
}

void forsetti_web_stop(struct MHD_Daemon *daemon) { MHD_stop_daemon(daemon); }

const char *forsetti_web_value(struct MHD_Connection *connection, int kind, const char *name) {
  enum MHD_ValueKind k = kind == 0 ? MHD_HEADER_KIND : kind == 1 ? MHD_COOKIE_KIND : MHD_GET_ARGUMENT_KIND;
  return MHD_lookup_connection_value(connection, k, name);
}

static int add_headers(struct MHD_Response *r, const char *const *headers) {
  for (size_t i = 0; headers && headers[i] && headers[i + 1]; i += 2) {
    if (MHD_add_response_header(r, headers[i], headers[i + 1]) != MHD_YES) return 0;
  }
  return 1;
}

int forsetti_web_reply(struct MHD_Connection *connection, unsigned int status, const char *body, size_t length,
                       const char *const *headers) {
  struct MHD_Response *r = MHD_create_response_from_buffer(length, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (r == NULL) return 0;
  if (!add_headers(r, headers)) {
    MHD_destroy_response(r);
    return 0;
  }
  enum MHD_Result ok = MHD_queue_response(connection, status, r);
  MHD_destroy_response(r);
  return ok == MHD_YES;
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  struct stream *st = cls;
  ssize_t n = st->server->reader(st->server->ctx, st->id, st->connection, buf, max);
  return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void free_stream(void *cls) {
  struct stream *st = cls;
  st->server->closed(st->server->ctx, st->id);
  free(st);
}

int forsetti_web_reply_stream(struct MHD_Connection *connection, uint64_t id, unsigned int idle_seconds,
                              const char *const *headers) {
  if (current_server == NULL) return 0;
  struct stream *st = calloc(1, sizeof *st);
  if (st == NULL) return 0;
  st->server = current_server;
  st->connection = connection;
  st->id = id;
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, &read_stream, st, &free_stream);
  if (r == NULL) {
    free(st);
    return 0;
  }
  if (!add_headers(r, headers)) {
    MHD_destroy_response(r);
    return 0;
  }
  enum MHD_Result ok = MHD_queue_response(connection, 200, r);
  MHD_destroy_response(r);
  if (ok == MHD_YES) MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, idle_seconds);
  return ok == MHD_YES;
}

void forsetti_web_suspend(struct MHD_Connection *connection) { MHD_suspend_connection(connection); }

void forsetti_web_resume(struct MHD_Connection *connection) { MHD_resume_connection(connection); }
