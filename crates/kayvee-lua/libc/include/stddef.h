/* kayvee-lua's freestanding C library (see ../README.md): what Lua 5.1 uses of <stddef.h>. */
#ifndef KV_STDDEF_H
#define KV_STDDEF_H
typedef unsigned long size_t;
typedef long ptrdiff_t;
#define NULL ((void *)0)
#define offsetof(t, m) __builtin_offsetof(t, m)
#endif
