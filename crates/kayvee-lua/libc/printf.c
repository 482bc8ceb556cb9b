/* The printf family of kayvee-lua's freestanding C library. Only the parsing of a format and
 * the fetching of its variadic arguments are here (stable Rust cannot define a variadic
 * function); every conversion is formatted by `kv_libc_format_arg` (src/libc/format.rs). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* One conversion: flags (bit 0 '-', 1 '+', 2 ' ', 3 '#', 4 '0'), width, precision (-1 when
 * absent) and the conversion letter. Mirrored by `Spec` in src/libc/format.rs. */
struct kv_spec {
    int flags;
    int width;
    int prec;
    int conv;
};

/* Writes the conversion's text at out[*len..n) (what fits) and adds its full length to *len.
 * The argument is in `i` (signed conversions), `u` (unsigned ones and %p), `d` (floating) or
 * `s` (%s); %c passes its byte in `i`. */
extern void kv_libc_format_arg(char *out, size_t n, size_t *len, const struct kv_spec *sp,
                               long long i, unsigned long long u, double d, const char *s);

/* Writes `len` bytes of `p` to the stream (src/libc/mod.rs). */
extern void kv_libc_write(FILE *f, const char *p, size_t len);

int vsnprintf(char *out, size_t n, const char *fmt, va_list ap) {
    size_t len = 0;
    while (*fmt) {
        struct kv_spec sp;
        int lng = 0, shrt = 0;
        long long i = 0;
        unsigned long long u = 0;
        double d = 0;
        const char *s = NULL;
        if (*fmt != '%') {
            if (len + 1 < n) out[len] = *fmt;
            len++;
            fmt++;
            continue;
        }
        fmt++;
        sp.flags = 0;
        sp.width = 0;
        sp.prec = -1;
        for (;; fmt++) {
            if (*fmt == '-') sp.flags |= 1;
            else if (*fmt == '+') sp.flags |= 2;
            else if (*fmt == ' ') sp.flags |= 4;
            else if (*fmt == '#') sp.flags |= 8;
            else if (*fmt == '0') sp.flags |= 16;
            else break;
        }
        if (*fmt == '*') {
            int w = va_arg(ap, int);
            if (w < 0) {
                sp.flags |= 1;
                w = -w;
            }
            sp.width = w;
            fmt++;
        } else {
            while (*fmt >= '0' && *fmt <= '9') sp.width = sp.width * 10 + (*fmt++ - '0');
        }
        if (*fmt == '.') {
            fmt++;
            sp.prec = 0;
            if (*fmt == '*') {
                int p = va_arg(ap, int);
                sp.prec = p < 0 ? -1 : p;
                fmt++;
            } else {
                while (*fmt >= '0' && *fmt <= '9') sp.prec = sp.prec * 10 + (*fmt++ - '0');
            }
        }
        for (;; fmt++) {
            if (*fmt == 'l' || *fmt == 'z' || *fmt == 'j' || *fmt == 't' || *fmt == 'q') lng++;
            else if (*fmt == 'h') shrt++;
            else if (*fmt == 'L') continue;
            else break;
        }
        sp.conv = (unsigned char)*fmt;
        if (*fmt) fmt++;
        switch (sp.conv) {
        case 'd':
        case 'i':
            if (lng) i = va_arg(ap, long);
            else i = va_arg(ap, int);
            if (shrt == 1) i = (short)i;
            else if (shrt >= 2) i = (signed char)i;
            break;
        case 'o':
        case 'u':
        case 'x':
        case 'X':
            if (lng) u = va_arg(ap, unsigned long);
            else u = va_arg(ap, unsigned int);
            if (shrt == 1) u = (unsigned short)u;
            else if (shrt >= 2) u = (unsigned char)u;
            break;
        case 'c':
            i = (unsigned char)va_arg(ap, int);
            break;
        case 's':
            s = va_arg(ap, const char *);
            break;
        case 'p':
            u = (unsigned long)va_arg(ap, void *);
            break;
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G':
        case 'a':
        case 'A':
            d = va_arg(ap, double);
            break;
        case 'n':
            *va_arg(ap, int *) = (int)len;
            continue;
        case 0:
            continue;
        default:
            break;
        }
        kv_libc_format_arg(out, n, &len, &sp, i, u, d, s);
    }
    if (n) out[len < n ? len : n - 1] = 0;
    return (int)len;
}

int snprintf(char *out, size_t n, const char *fmt, ...) {
    va_list ap;
    int r;
    va_start(ap, fmt);
    r = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    return r;
}

int sprintf(char *out, const char *fmt, ...) {
    va_list ap;
    int r;
    va_start(ap, fmt);
    r = vsnprintf(out, (size_t)-1, fmt, ap);
    va_end(ap);
    return r;
}

int fprintf(FILE *f, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    int r;
    va_start(ap, fmt);
    r = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    kv_libc_write(f, buf, (size_t)r < sizeof buf ? (size_t)r : sizeof buf - 1);
    return r;
}
