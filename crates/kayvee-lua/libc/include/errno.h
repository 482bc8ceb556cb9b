/* kayvee-lua's freestanding C library: <errno.h>. */
#ifndef KV_ERRNO_H
#define KV_ERRNO_H
extern int errno;
#define EDOM 33
#define ERANGE 34
#endif
