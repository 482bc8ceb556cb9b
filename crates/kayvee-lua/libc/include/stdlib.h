/* kayvee-lua's freestanding C library: <stdlib.h> (src/libc/). */
#ifndef KV_STDLIB_H
#define KV_STDLIB_H
#include <stddef.h>
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
#define RAND_MAX 2147483647
void *malloc(size_t n);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t n);
void free(void *p);
void abort(void) __attribute__((noreturn));
void exit(int status) __attribute__((noreturn));
double strtod(const char *s, char **end);
unsigned long strtoul(const char *s, char **end, int base);
long strtol(const char *s, char **end, int base);
int abs(int x);
int rand(void);
void srand(unsigned seed);
#endif
