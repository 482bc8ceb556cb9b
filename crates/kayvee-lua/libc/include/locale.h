/* kayvee-lua's freestanding C library: <locale.h>, the "C" locale only. */
#ifndef KV_LOCALE_H
#define KV_LOCALE_H
#include <stddef.h>
struct lconv {
    char *decimal_point;
    char *thousands_sep;
    char *grouping;
};
struct lconv *localeconv(void);
#endif
