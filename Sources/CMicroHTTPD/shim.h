#ifndef CMICROHTTPD_SHIM_H
#define CMICROHTTPD_SHIM_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/// MHD_start_daemon is variadic: this passes the options the HTTP/1.1 engine sets, in one fixed list.
static inline struct MHD_Daemon *cmhd_start(unsigned int flags, MHD_AccessHandlerCallback handler, void *cls,
                                            MHD_RequestCompletedCallback completed, MHD_NotifyConnectionCallback notify,
                                            unsigned int timeout_seconds, size_t memory_limit, unsigned int connection_limit) {
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, cls,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, cls, MHD_OPTION_NOTIFY_CONNECTION, notify, cls,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds, MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit, MHD_OPTION_END);
}

/// MHD_get_connection_info is variadic: the socket a connection reads, or -1.
static inline int cmhd_connection_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return i ? i->connect_fd : -1;
}

/// MHD_get_connection_info is variadic: the socket context set when the connection started.
static inline void *cmhd_socket_context(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}
/// MHD_get_daemon_info is variadic: the epoll set of a daemon started with MHD_USE_EPOLL, or -1. The event
/// loop watches it and calls MHD_run when it is readable.
static inline int cmhd_epoll_fd(struct MHD_Daemon *d) {
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
    return i ? i->epoll_fd : -1;
}

/// Milliseconds until libmicrohttpd wants MHD_run again (a connection timeout, or data it already holds),
/// or -1 for none.
static inline long long cmhd_timeout_ms(struct MHD_Daemon *d) {
    MHD_UNSIGNED_LONG_LONG t = 0;
    if (MHD_get_timeout(d, &t) != MHD_YES) return -1;
    return (long long)t;
}
#endif
