/* time.h - a monotonic clock for timings. */
#ifndef LM_TIME_H
#define LM_TIME_H

#include <stdint.h>
#include <time.h>

/* Microseconds of a monotonic clock (arbitrary origin). Thread-safe. */
static inline int64_t lm_time_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Nanoseconds of the same clock. Thread-safe. */
static inline int64_t lm_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
