/* kayvee-lua's freestanding C library: <setjmp.h> for x86-64 (src/libc/setjmp.rs: rbx, rbp,
 * r12-r15, rsp and the return address). */
#ifndef KV_SETJMP_H
#define KV_SETJMP_H
typedef long jmp_buf[8];
int setjmp(jmp_buf env) __attribute__((returns_twice));
void longjmp(jmp_buf env, int val) __attribute__((noreturn));
#endif
