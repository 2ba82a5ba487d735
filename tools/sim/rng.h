/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The simulator's random numbers: a splitmix64 mixer to derive one state per
 * (seed, round index), and a xoshiro256** generator per round.  Because each
 * round owns its generator, a run gives the same result whatever thread
 * simulates which round.  dfccl_sim_rng_gap draws how many Bernoulli trials of
 * probability p fail before the next success, so the simulator can count down
 * instead of drawing a uniform number per trial; the sequence of outcomes has
 * exactly the distribution of drawing one uniform number per trial.
 */
#ifndef DFCCL_SIM_RNG_H_
#define DFCCL_SIM_RNG_H_

#include <math.h>
#include <stdint.h>

typedef struct dfccl_sim_rng {
    uint64_t s[4];
} dfccl_sim_rng_t;

/* A gap that never ends (probability 0). */
#define DFCCL_SIM_GAP_NEVER UINT64_MAX

static inline uint64_t dfccl_sim_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void dfccl_sim_rng_seed(dfccl_sim_rng_t *rng, uint64_t seed, uint64_t index)
{
    uint64_t x = seed;
    uint64_t y;
    int i;

    /* Mix the seed, then the index, so that (seed, index) pairs do not alias. */
    y = dfccl_sim_splitmix64(&x) ^ index;
    for (i = 0; i < 4; i++) {
        rng->s[i] = dfccl_sim_splitmix64(&y);
    }
}

static inline uint64_t dfccl_sim_rng_next(dfccl_sim_rng_t *rng)
{
    uint64_t *s     = rng->s;
    uint64_t x      = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t      = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Uniform in [0, 1). */
static inline double dfccl_sim_rng_uniform(dfccl_sim_rng_t *rng)
{
    return (double)(dfccl_sim_rng_next(rng) >> 11) * 0x1p-53;
}

/*
 * Failures before the next success for trials of probability p, given
 * log1m_p = log1p(-p).  P(gap >= k) = (1 - p)^k.  p = 0 never succeeds, p = 1
 * always does.
 */
static inline uint64_t dfccl_sim_rng_gap(dfccl_sim_rng_t *rng, double p, double log1m_p)
{
    double u, gap;

    if (p <= 0.0) {
        return DFCCL_SIM_GAP_NEVER;
    }
    if (p >= 1.0) {
        return 0;
    }
    /* u in (0, 1], so that log(u) is finite */
    u   = (double)((dfccl_sim_rng_next(rng) >> 11) + 1) * 0x1p-53;
    gap = log(u) / log1m_p;
    if (!(gap < 1.8e19)) {
        return DFCCL_SIM_GAP_NEVER;
    }
    return (uint64_t)gap;
}

#endif
