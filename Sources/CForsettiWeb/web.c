#include "forsetti_web.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

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
  struct server *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->handler = handler;
  s->reader = reader;
  s->closed = closed;
  s->ctx = ctx;
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // A few epoll threads for every connection (never a thread per connection: a thousand idle
  // streams cost a thousand descriptors, not a thousand threads). Streams wait suspended, out of
  // the event loop, until there is something to send. No per-IP limit: every client of a
  // loopback server is 127.0.0.1, so it would be the global limit again. No error log: a client
  // refused at the connection limit would print a line on the host's output each time.
  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, port, NULL, NULL, &on_request, s,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address, MHD_OPTION_NOTIFY_COMPLETED, &on_completed, NULL,
      MHD_OPTION_CONNECTION_LIMIT, limits.connections, MHD_OPTION_CONNECTION_TIMEOUT, limits.idle_seconds,
      MHD_OPTION_THREAD_POOL_SIZE, limits.threads, MHD_OPTION_END);
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
