/* kayvee-lua's freestanding C library: <assert.h> (a failed assertion aborts). */
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
void abort(void) __attribute__((noreturn));
#define assert(e) ((e) ? (void)0 : abort())
#endif
