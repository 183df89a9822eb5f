#ifndef CZLIB_SHIM_H
#define CZLIB_SHIM_H
#include <zlib.h>

/// inflateInit2 is a macro over inflateInit2_: windowBits 15 + 32 reads gzip and zlib headers alike.
static inline int czlib_inflate_init_gzip(z_stream *s) {
    return inflateInit2(s, 15 + 32);
}
#endif
