#include "forsetti_web.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// libmicrohttpd is opened when the debug screen starts, not linked: linked, it and GnuTLS behind
// it (nine libraries) are loaded, relocated and initialised by every forsetti-host command, for
// about a millisecond and 2.4 MiB of resident memory, though only `--ui` serves a page.
#define FORSETTI_WEB_LIBRARY "libmicrohttpd.so.12"

static struct {
  __typeof__(&MHD_add_response_header) add_response_header;
  __typeof__(&MHD_create_response_from_buffer) create_response_from_buffer;
  __typeof__(&MHD_create_response_from_callback) create_response_from_callback;
  __typeof__(&MHD_destroy_response) destroy_response;
  __typeof__(&MHD_get_connection_info) get_connection_info;
  __typeof__(&MHD_get_daemon_info) get_daemon_info;
  __typeof__(&MHD_lookup_connection_value) lookup_connection_value;
  __typeof__(&MHD_queue_response) queue_response;
  __typeof__(&MHD_quiesce_daemon) quiesce_daemon;
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
  FORSETTI_WEB_BIND(get_connection_info);
  FORSETTI_WEB_BIND(get_daemon_info);
  FORSETTI_WEB_BIND(lookup_connection_value);
  FORSETTI_WEB_BIND(queue_response);
  FORSETTI_WEB_BIND(quiesce_daemon);
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
#define MHD_get_connection_info mhd.get_connection_info
#define MHD_get_daemon_info mhd.get_daemon_info
#define MHD_lookup_connection_value mhd.lookup_connection_value
#define MHD_queue_response mhd.queue_response
#define MHD_quiesce_daemon mhd.quiesce_daemon
#define MHD_resume_connection mhd.resume_connection
#define MHD_set_connection_option mhd.set_connection_option
#define MHD_start_daemon mhd.start_daemon
#define MHD_stop_daemon mhd.stop_daemon
#define MHD_suspend_connection mhd.suspend_connection

#define FORSETTI_WEB_MAX_BODY (1u << 20)

// One open connection, for the per-client limit and the header deadline. Listed while MHD
// holds the connection: added when it is accepted, removed when MHD says it closed, which it
// says before it closes the socket, so `fd` is this connection's for as long as it is listed.
struct tracked {
  struct tracked *next, *prev;
  int fd;
  struct forsetti_web_client client;
  int refused;         // over the per-client limit: shut down, not counted
  int headers_done;    // a request's headers arrived, and its answer is not done yet
  struct timespec since;  // when the connection came, or its last answer was done
};

struct server {
  forsetti_web_handler handler;
  forsetti_web_stream_reader reader;
  forsetti_web_stream_closed closed;
  void *ctx;
  struct forsetti_web_limits limits;
  struct MHD_Daemon *daemon;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  struct tracked *open;
  int stopping;
  int sweeping;  // the header-deadline thread runs
  pthread_t sweeper;
  struct server *next_server;
};

// Every running server, so forsetti_web_stop finds its own by the daemon.
static pthread_mutex_t servers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct server *servers;

static int same_client(const struct forsetti_web_client *a, const struct forsetti_web_client *b) {
  if (a->kind == 0 || a->kind != b->kind) return 0;
  if (a->kind == 1) return a->uid == b->uid;
  return a->length == b->length && memcmp(a->address, b->address, a->length) == 0;
}

// The owner of the socket at the other end of `fd`, asked of the kernel by the connection's
// four addresses (sock_diag); -1 when the peer is not a socket of this network namespace.
static int peer_uid(const struct sockaddr_storage *local, const struct sockaddr_storage *peer, uint32_t *uid) {
  struct {
    struct nlmsghdr header;
    struct inet_diag_req_v2 request;
  } ask;
  memset(&ask, 0, sizeof ask);
  ask.header.nlmsg_len = sizeof ask;
  ask.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  ask.header.nlmsg_flags = NLM_F_REQUEST;
  ask.request.sdiag_family = (uint8_t)peer->ss_family;
  ask.request.sdiag_protocol = IPPROTO_TCP;
  ask.request.idiag_states = ~0u;
  ask.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  ask.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  // The peer's socket: its source is the peer's address, its destination ours.
  if (peer->ss_family == AF_INET) {
    const struct sockaddr_in *p = (const void *)peer, *l = (const void *)local;
    ask.request.id.idiag_sport = p->sin_port;
    ask.request.id.idiag_dport = l->sin_port;
    memcpy(ask.request.id.idiag_src, &p->sin_addr, 4);
    memcpy(ask.request.id.idiag_dst, &l->sin_addr, 4);
  } else if (peer->ss_family == AF_INET6) {
    const struct sockaddr_in6 *p = (const void *)peer, *l = (const void *)local;
    ask.request.id.idiag_sport = p->sin6_port;
    ask.request.id.idiag_dport = l->sin6_port;
    memcpy(ask.request.id.idiag_src, &p->sin6_addr, 16);
    memcpy(ask.request.id.idiag_dst, &l->sin6_addr, 16);
  } else {
    return -1;
  }
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return -1;
  struct timeval wait = {1, 0};
  setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  int found = -1;
  if (send(nl, &ask, sizeof ask, 0) == (ssize_t)sizeof ask) {
    union {
      struct nlmsghdr header;
      char bytes[8192];
    } answer;
    ssize_t n = recv(nl, &answer, sizeof answer, 0);
    for (struct nlmsghdr *h = &answer.header; n > 0 && NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) break;
      const struct inet_diag_msg *m = NLMSG_DATA(h);
      *uid = m->idiag_uid;
      found = 0;
      break;
    }
  }
  close(nl);
  return found;
}

struct forsetti_web_client forsetti_web_client_of(int fd) {
  struct forsetti_web_client c;
  memset(&c, 0, sizeof c);
  struct sockaddr_storage local, peer;
  socklen_t ll = sizeof local, pl = sizeof peer;
  if (getsockname(fd, (struct sockaddr *)&local, &ll) != 0 || getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
    return c;
  if (peer_uid(&local, &peer, &c.uid) == 0) {
    c.kind = 1;
  } else if (peer.ss_family == AF_INET) {
    c.kind = 2;
    c.length = 4;
    memcpy(c.address, &((struct sockaddr_in *)&peer)->sin_addr, 4);
  } else if (peer.ss_family == AF_INET6) {
    c.kind = 2;
    c.length = 16;
    memcpy(c.address, &((struct sockaddr_in6 *)&peer)->sin6_addr, 16);
  }
  return c;
}

static struct tracked *tracked_of(struct MHD_Connection *connection) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info ? (struct tracked *)info->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  struct server *s = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct tracked *t = calloc(1, sizeof *t);
    if (t == NULL || info == NULL) {
      free(t);
      return;
    }
    t->fd = info->connect_fd;
    clock_gettime(CLOCK_MONOTONIC, &t->since);
    if (s->limits.per_client) t->client = forsetti_web_client_of(t->fd);
    pthread_mutex_lock(&s->lock);
    unsigned int same = 0;
    for (struct tracked *o = s->open; o && s->limits.per_client; o = o->next)
      if (!o->refused && same_client(&o->client, &t->client)) same++;
    if (s->limits.per_client && same >= s->limits.per_client) {
      // Closed by MHD once it reads the end: the answer a client past its share gets.
      t->refused = 1;
      shutdown(t->fd, SHUT_RDWR);
    }
    t->next = s->open;
    if (s->open) s->open->prev = t;
    s->open = t;
    pthread_mutex_unlock(&s->lock);
    *socket_context = t;
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    struct tracked *t = *socket_context;
    if (t == NULL) return;
    pthread_mutex_lock(&s->lock);
    if (t->prev) t->prev->next = t->next;
    else s->open = t->next;
    if (t->next) t->next->prev = t->prev;
    pthread_mutex_unlock(&s->lock);
    free(t);
    *socket_context = NULL;
  }
}

static void mark_headers(struct server *s, struct MHD_Connection *connection, int done) {
  struct tracked *t = tracked_of(connection);
  if (t == NULL) return;
  pthread_mutex_lock(&s->lock);
  t->headers_done = done;
  if (!done) clock_gettime(CLOCK_MONOTONIC, &t->since);
  pthread_mutex_unlock(&s->lock);
}

// Shuts down every connection whose request headers took longer than the deadline (a slowloris
// client keeps MHD's idle timeout from firing by sending a byte now and then).
static void *sweep(void *arg) {
  struct server *s = arg;
  pthread_mutex_lock(&s->lock);
  while (!s->stopping) {
    struct timespec now, until;
    clock_gettime(CLOCK_MONOTONIC, &now);
    for (struct tracked *t = s->open; t; t = t->next) {
      if (t->headers_done || t->refused) continue;
      if (now.tv_sec - t->since.tv_sec >= (time_t)s->limits.header_seconds) {
        t->refused = 1;
        shutdown(t->fd, SHUT_RDWR);
      }
    }
    until = now;
    until.tv_sec += 1;
    pthread_cond_timedwait(&s->wake, &s->lock, &until);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

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
    mark_headers(s, connection, 1);
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
  (void)code;
  // The next request on this connection has the header deadline from now.
  mark_headers(cls, connection, 0);
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
  return forsetti_web_start_on(address, -1, limits, handler, reader, closed, ctx);
}

struct MHD_Daemon *forsetti_web_start_on(const struct sockaddr *address, int listening,
                                         struct forsetti_web_limits limits, forsetti_web_handler handler,
                                         forsetti_web_stream_reader reader, forsetti_web_stream_closed closed,
                                         void *ctx) {
  if (address == NULL || (address->sa_family != AF_INET && address->sa_family != AF_INET6)) return NULL;
  if (!forsetti_web_load()) return NULL;
  struct server *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->handler = handler;
  s->reader = reader;
  s->closed = closed;
  s->ctx = ctx;
  s->limits = limits;
  pthread_mutex_init(&s->lock, NULL);
  pthread_condattr_t monotonic;
  pthread_condattr_init(&monotonic);
  pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
  pthread_cond_init(&s->wake, &monotonic);
  pthread_condattr_destroy(&monotonic);
  uint16_t port = address->sa_family == AF_INET ? ntohs(((const struct sockaddr_in *)address)->sin_port)
                                                : ntohs(((const struct sockaddr_in6 *)address)->sin6_port);
  // ITC: needed to quiesce the daemon (forsetti_web_quiesce) when its socket is handed over.
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC;
  if (address->sa_family == AF_INET6) flags |= MHD_USE_IPv6;
  // A few epoll threads for every connection (never a thread per connection: a thousand idle
  // streams cost a thousand descriptors, not a thousand threads). Streams wait suspended, out of
  // the event loop, until there is something to send. No per-IP limit of MHD's: every client of
  // a loopback server is 127.0.0.1, so it would be the global limit again; on_connection counts
  // per uid instead. No error log: a client refused at the connection limit would print a line
  // on the host's output each time.
  // A socket already listening (handed over by the host's previous image) is served as it is:
  // connections waiting in its backlog are accepted, none refused.
  struct MHD_Daemon *d =
      listening >= 0
          ? MHD_start_daemon(flags, port, NULL, NULL, &on_request, s, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listening,
                             MHD_OPTION_NOTIFY_COMPLETED, &on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
                             &on_connection, s, MHD_OPTION_CONNECTION_LIMIT, limits.connections,
                             MHD_OPTION_CONNECTION_TIMEOUT, limits.idle_seconds, MHD_OPTION_THREAD_POOL_SIZE,
                             limits.threads, MHD_OPTION_END)
          : MHD_start_daemon(flags, port, NULL, NULL, &on_request, s, MHD_OPTION_SOCK_ADDR, address,
                             MHD_OPTION_NOTIFY_COMPLETED, &on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
                             &on_connection, s, MHD_OPTION_CONNECTION_LIMIT, limits.connections,
                             MHD_OPTION_CONNECTION_TIMEOUT, limits.idle_seconds, MHD_OPTION_THREAD_POOL_SIZE,
                             limits.threads, MHD_OPTION_END);
  if (d == NULL) {
    free(s);
    return NULL;
  }
  s->daemon = d;
  if (limits.header_seconds) s->sweeping = pthread_create(&s->sweeper, NULL, &sweep, s) == 0;
  pthread_mutex_lock(&servers_lock);
  s->next_server = servers;
  servers = s;
  pthread_mutex_unlock(&servers_lock);
  return d;
}

int forsetti_web_quiesce(struct MHD_Daemon *daemon) {
  MHD_socket fd = MHD_quiesce_daemon(daemon);
  return fd == MHD_INVALID_SOCKET ? -1 : (int)fd;
}

unsigned int forsetti_web_connections(struct MHD_Daemon *daemon) {
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
  return info ? info->num_connections : 0;
}

uint16_t forsetti_web_port(struct MHD_Daemon *daemon) {
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
  return info ? info->port : 0;
}

void forsetti_web_stop(struct MHD_Daemon *daemon) {
  struct server *s = NULL;
  pthread_mutex_lock(&servers_lock);
  for (struct server **at = &servers; *at; at = &(*at)->next_server) {
    if ((*at)->daemon == daemon) {
      s = *at;
      *at = s->next_server;
      break;
    }
  }
  pthread_mutex_unlock(&servers_lock);
  if (s && s->sweeping) {
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->sweeper, NULL);
  }
  // Every connection is closed (each said so to on_connection) before this returns.
  MHD_stop_daemon(daemon);
  if (s) {
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->wake);
    free(s);
  }
}

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
