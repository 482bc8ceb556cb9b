/* kayvee-lua's freestanding C library: <stdio.h>. Formatting is complete for what Lua uses
 * (printf.c, src/libc/format.rs); there are no files: fopen fails, the standard streams write
 * to the output the host installs. */
#ifndef KV_STDIO_H
#define KV_STDIO_H
#include <stddef.h>
#include <stdarg.h>
typedef struct kv_file FILE;
extern FILE *stdin;
extern FILE *stdout;
extern FILE *stderr;
#define EOF (-1)
/* glibc's is 8192. It sizes LUAL_BUFFERSIZE, the buffer each luaL_Buffer (string.format, gsub,
 * rep, table.concat...) keeps on the C stack; Lua nests up to 200 C calls (gsub calling a Lua
 * function calling gsub...), which at 8 KiB each would not fit the image's 1 MiB stack. The
 * size changes no result, only how often a buffer is flushed. */
#define BUFSIZ 1024
int sprintf(char *s, const char *fmt, ...);
int snprintf(char *s, size_t n, const char *fmt, ...);
int vsnprintf(char *s, size_t n, const char *fmt, va_list ap);
int fprintf(FILE *f, const char *fmt, ...);
int fputs(const char *s, FILE *f);
size_t fwrite(const void *p, size_t size, size_t n, FILE *f);
int fflush(FILE *f);
FILE *fopen(const char *path, const char *mode);
FILE *freopen(const char *path, const char *mode, FILE *f);
int fclose(FILE *f);
size_t fread(void *p, size_t size, size_t n, FILE *f);
int getc(FILE *f);
int ungetc(int c, FILE *f);
int feof(FILE *f);
int ferror(FILE *f);
#endif
