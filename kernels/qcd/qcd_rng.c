/* qcd_rng.c - Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as
 * easy as 1, 2, 3", SC'11), written from the paper's description.
 *
 * A counter-based generator has no state to carry: the numbers for a link are a function
 * of (seed; global site, direction, subgroup, draw, sweep, stream). So the run does not
 * depend on which rank owns a site, and a checkpoint only needs the seed and the sweep
 * count to continue the same series. */
#include "qcd.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void qcd_philox(uint64_t seed, const qcd_ctr *ctr, uint32_t out[4])
{
    uint32_t c0 = ctr->c[0], c1 = ctr->c[1], c2 = ctr->c[2], c3 = ctr->c[3];
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void qcd_uniform2(uint64_t seed, const qcd_ctr *ctr, double u[2])
{
    uint32_t r[4];
    qcd_philox(seed, ctr, r);
    /* 53 random bits each: [0, 1) with the full double resolution */
    u[0] = (double)((((uint64_t)r[0] << 32) | r[1]) >> 11) * 0x1p-53;
    u[1] = (double)((((uint64_t)r[2] << 32) | r[3]) >> 11) * 0x1p-53;
}

void qcd_uniform4(uint64_t seed, const qcd_ctr *ctr, double u[4])
{
    uint32_t r[4];
    qcd_philox(seed, ctr, r);
    for (int i = 0; i < 4; i++) /* the middle of one of 2^32 equal bins: in (0, 1) */
        u[i] = ((double)r[i] + 0.5) * 0x1p-32;
}
