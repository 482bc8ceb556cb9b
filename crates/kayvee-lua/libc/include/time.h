/* kayvee-lua's freestanding C library: <time.h> (clock: the host's, see src/libc/). */
#ifndef KV_TIME_H
#define KV_TIME_H
typedef long clock_t;
typedef long time_t;
#define CLOCKS_PER_SEC 1000000L
clock_t clock(void);
time_t time(time_t *t);
#endif
