/* kayvee-lua's freestanding C library: <math.h> (the `libm` crate, src/libc/). */
#ifndef KV_MATH_H
#define KV_MATH_H
#define HUGE_VAL (__builtin_huge_val())
double acos(double x);
double asin(double x);
double atan(double x);
double atan2(double y, double x);
double ceil(double x);
double cos(double x);
double cosh(double x);
double exp(double x);
double fabs(double x);
double floor(double x);
double fmod(double x, double y);
double frexp(double x, int *e);
double ldexp(double x, int e);
double log(double x);
double log10(double x);
double modf(double x, double *i);
double pow(double x, double y);
double sin(double x);
double sinh(double x);
double sqrt(double x);
double tan(double x);
double tanh(double x);
#endif
