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

/* Per call, nghttp2 allocates 152-byte items (response headers, data, trailers) and frees them in bursts
   larger than glibc's per-thread cache: as fast-bin sizes (up to 160 bytes instead of 128) they skip the
   coalescing that took ~7% of a Health/Check's CPU (unlink_chunk, malloc_consolidate). */
#include <malloc.h>
static inline void csystem_tune_malloc(void) { mallopt(M_MXFAST, 160); }
#endif
