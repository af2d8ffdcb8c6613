#ifndef FORSETTI_WEB_H
#define FORSETTI_WEB_H
// The few calls of libmicrohttpd that are C varargs or need a request's body gathered before it
// is handed over; everything else (what to answer) is Swift's.
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct MHD_Daemon;
struct sockaddr;
struct MHD_Connection;

/// A whole request, `request` naming it (body gathered, at most 1 MiB; `too_large` set past
/// that). Returns an MHD_Result (1 yes, 0 no) after queuing an answer with
/// forsetti_web_reply(_stream), or after suspending the connection (forsetti_web_suspend) to
/// answer later: once resumed, the handler is called again for the same `request`.
typedef int (*forsetti_web_handler)(void *ctx, struct MHD_Connection *connection, uint64_t request,
                                    const char *method, const char *url, const char *body, size_t length,
                                    int too_large);
/// Fills `buffer` with the next bytes of stream `id` on `connection`: their count; 0 after
/// suspending the connection (forsetti_web_suspend) until there is more; -1 to end.
typedef ssize_t (*forsetti_web_stream_reader)(void *ctx, uint64_t id, struct MHD_Connection *connection,
                                              char *buffer, size_t max);
/// Stream `id` is closed (the client went away, or the server stops).
typedef void (*forsetti_web_stream_closed)(void *ctx, uint64_t id);

/// How much the server takes: connections at once (MHD_OPTION_CONNECTION_LIMIT), seconds a
/// connection may stay silent (MHD_OPTION_CONNECTION_TIMEOUT), threads polling with epoll;
/// connections at once from one client (a local client is its uid, found with sock_diag; a
/// remote one its address), one more closed at once; seconds a request's headers may take to
/// arrive, however slowly they trickle, counted from the connection or the last answer. 0:
/// no such limit.
struct forsetti_web_limits {
  unsigned int connections;
  unsigned int idle_seconds;
  unsigned int threads;
  unsigned int per_client;
  unsigned int header_seconds;
};

/// Who a connection's peer is, as the server's per-client limit counts it: kind 1 a local uid
/// (`uid`), kind 2 an address (`address`, 4 or 16 bytes, `length`); 0 when it cannot be told.
struct forsetti_web_client {
  int kind;
  uint32_t uid;
  unsigned char address[16];
  unsigned int length;
};
/// The client of the TCP connection `fd` (its peer's socket owner when the peer is on this
/// machine's network namespace, else its address).
struct forsetti_web_client forsetti_web_client_of(int fd);

/// Opens libmicrohttpd (once; it is not linked, so only the debug screen loads it): 1 when it is
/// there with every call used, 0 when not. forsetti_web_start opens it too.
int forsetti_web_load(void);
/// The library forsetti_web_load opens, for a message saying it is missing.
const char *forsetti_web_library(void);

/// Serves on 127.0.0.1:`port` (0: any free port) with a pool of epoll threads. NULL on failure.
struct MHD_Daemon *forsetti_web_start(uint16_t port, struct forsetti_web_limits limits,
                                      forsetti_web_handler handler, forsetti_web_stream_reader reader,
                                      forsetti_web_stream_closed closed, void *ctx);
/// Serves as forsetti_web_start does, on `address` (a sockaddr_in or sockaddr_in6, its port 0
/// for any free port); NULL on failure or another address family. The caller keeps `address`.
struct MHD_Daemon *forsetti_web_start_at(const struct sockaddr *address, struct forsetti_web_limits limits,
                                         forsetti_web_handler handler, forsetti_web_stream_reader reader,
                                         forsetti_web_stream_closed closed, void *ctx);
/// The port the daemon listens on.
/// As forsetti_web_start_at, on `listening`, a socket already bound and listening at `address`
/// (-1: bind `address`), which the daemon then owns.
struct MHD_Daemon *forsetti_web_start_on(const struct sockaddr *address, int listening,
                                         struct forsetti_web_limits limits, forsetti_web_handler handler,
                                         forsetti_web_stream_reader reader, forsetti_web_stream_closed closed,
                                         void *ctx);
/// Stops accepting connections and returns the listening socket (-1 if there is none), which
/// forsetti_web_stop then leaves open: the caller's, to hand over (new connections wait in its
/// backlog) or close.
int forsetti_web_quiesce(struct MHD_Daemon *daemon);
/// The connections the daemon holds now.
unsigned int forsetti_web_connections(struct MHD_Daemon *daemon);
uint16_t forsetti_web_port(struct MHD_Daemon *daemon);
/// Stops the daemon; every suspended connection must have been resumed before.
void forsetti_web_stop(struct MHD_Daemon *daemon);

/// A value of the request: kind 0 header, 1 cookie, 2 query argument. NULL when absent.
const char *forsetti_web_value(struct MHD_Connection *connection, int kind, const char *name);

/// Queues a complete answer. `headers` holds name, value, name, value … then NULL.
int forsetti_web_reply(struct MHD_Connection *connection, unsigned int status, const char *body, size_t length,
                       const char *const *headers);
/// Queues an answer of unknown length read from stream `id` (server-sent events); the
/// connection may then stay silent `idle_seconds` while it writes.
int forsetti_web_reply_stream(struct MHD_Connection *connection, uint64_t id, unsigned int idle_seconds,
                              const char *const *headers);

/// Takes a connection out of the event loop (from the handler or the stream reader only).
void forsetti_web_suspend(struct MHD_Connection *connection);
/// Puts a suspended connection back (from any thread).
void forsetti_web_resume(struct MHD_Connection *connection);

#endif
