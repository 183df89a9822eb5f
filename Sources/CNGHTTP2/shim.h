#ifndef CNGHTTP2_SHIM_H
#define CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * A per-session block cache for nghttp2's own allocations.
 *
 * nghttp2 allocates and frees about eight small blocks per request (the stream, each received header's
 * buffer, the outbound frames and their copied header lists). With many streams of a connection in flight
 * at once, glibc's per-thread cache (seven blocks a size) overflows and most of those calls take malloc's
 * slow paths. A session is used by one thread only, so its blocks can be kept on plain free lists without
 * locks: six size classes (64 to 2048 bytes), at most BILLING_H2_POOL_CLASS_CACHE bytes cached per class and
 * session (so one size freed in bursts cannot crowd out the others), larger blocks straight from malloc.
 * Caching starts with a session's first request (`caching`): a connection that only said hello keeps
 * nothing; a session with no open stream gives its cached blocks back and stops caching until the next. Every block carries a 16-byte header (its class, and the free-list link or,
 * for a large block, its size), so payloads keep malloc's 16-byte alignment.
 * Made with billing_h2_pool_new; its nghttp2_mem goes to nghttp2_session_server_new3; freed with
 * billing_h2_pool_free after nghttp2_session_del.
 */
#define BILLING_H2_POOL_CLASSES 6
#define BILLING_H2_POOL_LARGE 255u
#define BILLING_H2_POOL_CLASS_CACHE (16u * 1024u)

typedef struct billing_h2_block {
    uint32_t size_class;
    uint32_t unused;
    union {
        struct billing_h2_block *next; /* while cached */
        size_t size;                   /* a large block's payload size */
    } u;
} billing_h2_block;

/* Payloads follow the header, so the header's size keeps malloc's alignment (64-bit targets). */
_Static_assert(sizeof(billing_h2_block) == 16, "billing_h2_block must be 16 bytes");

typedef struct billing_h2_pool {
    nghttp2_mem mem;
    billing_h2_block *free_list[BILLING_H2_POOL_CLASSES];
    size_t cached_bytes[BILLING_H2_POOL_CLASSES];
    /* Whether freed blocks are kept (set at a request, cleared by billing_h2_pool_trim). */
    int caching;
    /* Counters, for tests: blocks handed out from a free list, and from malloc. */
    uint64_t reused;
    uint64_t fresh;
} billing_h2_pool;

static inline size_t billing_h2_class_bytes(uint32_t size_class) { return (size_t)64 << size_class; }

/* The class of a request of `size` bytes, or BILLING_H2_POOL_LARGE. */
static inline uint32_t billing_h2_class_of(size_t size) {
    if (size <= 64) return 0;
    if (size > 2048) return BILLING_H2_POOL_LARGE;
    return (uint32_t)(64 - __builtin_clzll((unsigned long long)(size - 1))) - 6;
}

static inline void *billing_h2_pool_malloc(size_t size, void *user_data) {
    billing_h2_pool *pool = (billing_h2_pool *)user_data;
    uint32_t c = billing_h2_class_of(size);
    billing_h2_block *b;
    if (c != BILLING_H2_POOL_LARGE) {
        b = pool->free_list[c];
        if (b) {
            pool->free_list[c] = b->u.next;
            pool->cached_bytes[c] -= billing_h2_class_bytes(c);
            pool->reused++;
            return b + 1;
        }
        b = (billing_h2_block *)malloc(sizeof(billing_h2_block) + billing_h2_class_bytes(c));
        if (!b) return NULL;
        b->size_class = c;
    } else {
        if (size > SIZE_MAX - sizeof(billing_h2_block)) return NULL;
        b = (billing_h2_block *)malloc(sizeof(billing_h2_block) + size);
        if (!b) return NULL;
        b->size_class = BILLING_H2_POOL_LARGE;
        b->u.size = size;
    }
    pool->fresh++;
    return b + 1;
}

static inline void billing_h2_pool_release(void *ptr, void *user_data) {
    if (!ptr) return;
    billing_h2_pool *pool = (billing_h2_pool *)user_data;
    billing_h2_block *b = (billing_h2_block *)ptr - 1;
    uint32_t c = b->size_class;
    if (c != BILLING_H2_POOL_LARGE && pool->caching && pool->cached_bytes[c] + billing_h2_class_bytes(c) <= BILLING_H2_POOL_CLASS_CACHE) {
        b->u.next = pool->free_list[c];
        pool->free_list[c] = b;
        pool->cached_bytes[c] += billing_h2_class_bytes(c);
        return;
    }
    free(b);
}

static inline void *billing_h2_pool_calloc(size_t count, size_t size, void *user_data) {
    if (size != 0 && count > SIZE_MAX / size) return NULL;
    void *p = billing_h2_pool_malloc(count * size, user_data);
    if (p) memset(p, 0, count * size);
    return p;
}

static inline void *billing_h2_pool_realloc(void *ptr, size_t size, void *user_data) {
    if (!ptr) return billing_h2_pool_malloc(size, user_data);
    billing_h2_block *b = (billing_h2_block *)ptr - 1;
    size_t old = b->size_class == BILLING_H2_POOL_LARGE ? b->u.size : billing_h2_class_bytes(b->size_class);
    if (size <= old) return ptr; /* it fits: a class block or a large block shrinking keeps its place */
    void *p = billing_h2_pool_malloc(size, user_data);
    if (!p) return NULL;
    memcpy(p, ptr, old < size ? old : size);
    billing_h2_pool_release(ptr, user_data);
    return p;
}

static inline billing_h2_pool *billing_h2_pool_new(void) {
    billing_h2_pool *pool = (billing_h2_pool *)calloc(1, sizeof(billing_h2_pool));
    if (!pool) return NULL;
    pool->mem.mem_user_data = pool;
    pool->mem.malloc = billing_h2_pool_malloc;
    pool->mem.free = billing_h2_pool_release;
    pool->mem.calloc = billing_h2_pool_calloc;
    pool->mem.realloc = billing_h2_pool_realloc;
    return pool;
}

/* Frees every cached block (the blocks nghttp2 still holds stay its own). */
static inline void billing_h2_pool_trim(billing_h2_pool *pool) {
    if (!pool) return;
    for (int c = 0; c < BILLING_H2_POOL_CLASSES; c++) {
        billing_h2_block *b = pool->free_list[c];
        while (b) {
            billing_h2_block *next = b->u.next;
            free(b);
            b = next;
        }
        pool->free_list[c] = NULL;
        pool->cached_bytes[c] = 0;
    }
    pool->caching = 0;
}

/* Bytes cached, all classes. */
static inline size_t billing_h2_pool_cached(const billing_h2_pool *pool) {
    size_t total = 0;
    for (int c = 0; c < BILLING_H2_POOL_CLASSES; c++) total += pool->cached_bytes[c];
    return total;
}

static inline void billing_h2_pool_free(billing_h2_pool *pool) {
    if (!pool) return;
    billing_h2_pool_trim(pool);
    free(pool);
}

#endif
