/* host_rng.h - the fixed-seed PRNG of the CUDA host tests
 * (tests/cuda/test_cuda_host_*.cu): splitmix64, one stream per program,
 * seeded by the including file with HOST_RNG_SEED (a different constant
 * each, so the tests draw different values). */
#ifndef LM_TEST_HOST_RNG_H
#define LM_TEST_HOST_RNG_H

#include <stdint.h>

static uint64_t rng_state = HOST_RNG_SEED;

static inline uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline float rng_uniform(float lo, float hi) { return lo + (hi - lo) * (float)((rng_u64() >> 40) * 0x1p-24); }

/* Uniform in [0, n) (n > 0). */
static inline int rng_int(int n) { return (int)(rng_u64() % (uint64_t)n); }

#endif
