#ifndef CSYSTEM_SHIM_H
#define CSYSTEM_SHIM_H
/* Linux calls that Swift's Glibc module leaves out: epoll, eventfd, accept4. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

/* accept4 is declared only under _GNU_SOURCE, which would clash with Glibc's module. */
extern int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
static inline int csystem_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
    return accept4(fd, addr, len, flags);
}
#endif
