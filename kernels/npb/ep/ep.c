/* ct-npb-ep - NPB EP: pairs of uniform random numbers from NPB's linear congruential
 * generator (x <- 5^13 x mod 2^46, seed 271828183) become Gaussian deviates by the
 * Marsaglia polar method; the sums of the deviates and their counts per square annulus
 * are the result. Batches of 2^16 pairs are shared out over the ranks in blocks; each
 * batch starts from its own seed (s * a^(2^17 k)), so the numbers, and hence the counts,
 * do not depend on the rank count. One reduction at the end.
 *
 * Verification: the NPB 3.4 sums of X and Y, and NPB 3.4.2's sums of |X| and |Y| and
 * number of pairs, each to a relative 1e-8 (docs/npb.md). Mop/s = 2^(M+1) / t / 1e6.
 *
 * Usage: ct-npb-ep --class S|W|A|B|C [--inject-fault] [--check-only --np N]
 */
#include "npb.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MK 16 /* log2 of pairs per batch */
#define NK (1 << MK)
#define NQ 10    /* annuli counted */
#define CHUNK 2048 /* pairs generated and consumed at a time (stays in L1) */

static const uint64_t MULT = 1220703125ULL; /* 5^13 */
static const uint64_t SEED = 271828183ULL;
#define MASK46 ((1ULL << 46) - 1)
#define MASK23 ((1ULL << 23) - 1)
static const double R46 = 1.0 / 70368744177664.0; /* 2^-46 */

static const int class_m[NPB_NCLASSES] = {24, 25, 28, 30, 32};
/* NPB 3.4: plain sums of X and Y */
static const double ref_sx[NPB_NCLASSES] = {-3.247834652034740e+3, -2.863319731645753e+3,
                                            -4.295875165629892e+3, 4.033815542441498e+4,
                                            4.764367927995374e+4};
static const double ref_sy[NPB_NCLASSES] = {-6.958407078382297e+3, -6.320053679109499e+3,
                                            -1.580732573678431e+4, -2.660669192809235e+4,
                                            -8.084072988043731e+4};
/* NPB 3.4.2: sums of |X| and |Y|, number of Gaussian pairs */
static const double ref_ax[NPB_NCLASSES] = {1.051299420395306e+07, 2.102505525182392e+07,
                                            1.682235632304711e+08, 6.728927543423024e+08,
                                            2.691444083862931e+09};
static const double ref_ay[NPB_NCLASSES] = {1.051517131857535e+07, 2.103162209578822e+07,
                                            1.682195123368299e+08, 6.728951822504275e+08,
                                            2.691519118724585e+09};
static const double ref_pairs[NPB_NCLASSES] = {13176389.0, 26354769.0, 210832767.0,
                                               843345606.0, 3373275903.0};

/* a * x mod 2^46, exactly (a, x < 2^46): halves of 23 bits keep every product < 2^46 */
static inline uint64_t mul46(uint64_t a, uint64_t x)
{
    uint64_t ah = a >> 23, al = a & MASK23, xh = x >> 23, xl = x & MASK23;
    uint64_t mid = (ah * xl + al * xh) & MASK23;
    return ((mid << 23) + al * xl) & MASK46;
}

static uint64_t pow46(uint64_t a, uint64_t e)
{
    uint64_t r = 1;
    for (; e; e >>= 1, a = mul46(a, a))
        if (e & 1)
            r = mul46(r, a);
    return r;
}

static long long batches(int cls) { return 1LL << (class_m[cls] - MK); }

static int allowed(int np, int cls) { return np >= 1 && np <= batches(cls); }

typedef struct {
    double sx, sy, ax, ay;
    int64_t q[NQ];
} sums;

/* The CHUNK pairs following state x (advanced): their deviates added to s. */
static uint64_t chunk(uint64_t x, uint64_t mult4, sums *s, int fault)
{
    double u[2 * CHUNK];
    /* four interleaved lanes of the same sequence: x_{i+4} = a^4 x_i */
    uint64_t l0 = mul46(MULT, x), l1 = mul46(MULT, l0), l2 = mul46(MULT, l1),
             l3 = mul46(MULT, l2);
    for (int i = 0; i < 2 * CHUNK; i += 4) {
        u[i] = (double)(int64_t)l0 * R46;
        u[i + 1] = (double)(int64_t)l1 * R46;
        u[i + 2] = (double)(int64_t)l2 * R46;
        u[i + 3] = (double)(int64_t)l3 * R46;
        if (i + 4 < 2 * CHUNK) {
            l0 = mul46(mult4, l0);
            l1 = mul46(mult4, l1);
            l2 = mul46(mult4, l2);
            l3 = mul46(mult4, l3);
        }
    }
    if (fault)
        u[0] = 0.5; /* --inject-fault: one number of the first batch changed */
    /* accepted pairs first, without a branch (a taken/not-taken pattern of 78.5 % would
     * mispredict often), then the logarithms, then the rest over accepted pairs only */
    double x1[CHUNK], x2[CHUNK], t[CHUNK], lg[CHUNK];
    int n = 0;
    for (int i = 0; i < CHUNK; i++) {
        double a = 2.0 * u[2 * i] - 1.0, b = 2.0 * u[2 * i + 1] - 1.0;
        double r = a * a + b * b;
        x1[n] = a;
        x2[n] = b;
        t[n] = r;
        n += r <= 1.0;
    }
    for (int i = 0; i < n; i++)
        lg[i] = log(t[i]);
    double sx = 0, sy = 0, ax = 0, ay = 0;
    int ring[CHUNK];
    for (int i = 0; i < n; i++) { /* vectorised (reassociated sums: see CMakeLists.txt) */
        double f = sqrt(-2.0 * lg[i] / t[i]);
        double g1 = x1[i] * f, g2 = x2[i] * f;
        double a1 = fabs(g1), a2 = fabs(g2);
        ring[i] = (int)(a1 > a2 ? a1 : a2);
        sx += g1;
        sy += g2;
        ax += a1;
        ay += a2;
    }
    /* four counters per annulus: consecutive pairs mostly share an annulus, and one
     * counter would make every increment wait for the previous one */
    int64_t q4[4][NQ] = {{0}};
    int i4 = 0;
    for (; i4 + 4 <= n; i4 += 4) {
        q4[0][ring[i4]]++;
        q4[1][ring[i4 + 1]]++;
        q4[2][ring[i4 + 2]]++;
        q4[3][ring[i4 + 3]]++;
    }
    for (; i4 < n; i4++)
        q4[0][ring[i4]]++;
    for (int l = 0; l < NQ; l++)
        s->q[l] += q4[0][l] + q4[1][l] + q4[2][l] + q4[3][l];
    s->sx += sx;
    s->sy += sy;
    s->ax += ax;
    s->ay += ay;
    return l3;
}

typedef struct {
    sums total;
    long long first, count;
} ep_detail;

static void detail(ct_json *j, const void *arg)
{
    const ep_detail *d = arg;
    ct_json_open_array(j, "counts");
    for (int l = 0; l < NQ; l++)
        ct_json_integer(j, NULL, d->total.q[l]);
    ct_json_close_array(j);
    ct_json_integer(j, "batches_rank0", d->count);
}

static void extra(ct_json *j, const void *arg)
{
    const ep_detail *d = arg;
    double pairs = 0;
    for (int l = 0; l < NQ; l++)
        pairs += (double)d->total.q[l];
    ct_json_number(j, "gaussian_pairs", pairs);
    ct_json_string(j, "verification_scheme",
                   "NPB 3.4 sums of X, Y; NPB 3.4.2 sums of |X|, |Y| and pair count");
}

static int max_list(int cls) { return (int)batches(cls); }

int main(int argc, char **argv)
{
    const npb_rule rule = {"EP", allowed, max_list,
                           " (one batch of 2^16 pairs at least per rank)", 0};
    npb_options o;
    int np, me, status = npb_start(&argc, &argv, &rule, &o, &np, &me);
    if (status >= 0)
        return status;
    int cls = o.cls, fault = o.fault;

    /* batches [first, first + count) of this rank: the first nn % np ranks take one more */
    long long nn = batches(cls), base = nn / np, extra_ranks = nn % np;
    long long count = base + (me < extra_ranks), first = me * base + (me < extra_ranks ? me : extra_ranks);

    npb_result r = {.benchmark = "EP", .cls = cls, .op_type = "Random numbers generated",
                    .per_iteration = 1};
    r.size[0] = 1LL << (class_m[cls] + 1);
    r.nsize = 1;
    npb_comm_init(&r.comm);
    ep_detail d = {.first = first, .count = count};
    CT_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = MPI_Wtime();

    uint64_t mult4 = pow46(MULT, 4);
    uint64_t an = pow46(MULT, 2ULL * NK); /* one batch: 2 NK numbers */
    sums s = {0};
    for (long long k = first; k < first + count; k++) {
        uint64_t x = mul46(SEED, pow46(an, (uint64_t)k));
        for (int c0 = 0; c0 < NK; c0 += CHUNK)
            x = chunk(x, mult4, &s, fault && me == 0 && k == first && c0 == 0);
    }
    double mine[4 + NQ] = {s.sx, s.sy, s.ax, s.ay};
    for (int l = 0; l < NQ; l++)
        mine[4 + l] = (double)s.q[l]; /* exact: counts stay below 2^53 */
    double all[4 + NQ];
    ct_phase_start(&r.comm, NPB_COMM_S);
    CT_MPI_CHECK(MPI_Allreduce(mine, all, 4 + NQ, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    ct_phase_stop(&r.comm, NPB_COMM_S);
    npb_comm_sent(&r.comm, sizeof mine);
    r.time_s = MPI_Wtime() - t0;

    d.total = (sums){all[0], all[1], all[2], all[3], {0}};
    for (int l = 0; l < NQ; l++)
        d.total.q[l] = (int64_t)all[4 + l];
    double pairs = 0;
    for (int l = 0; l < NQ; l++)
        pairs += (double)d.total.q[l];
    npb_add_check(&r, "sx", d.total.sx, ref_sx[cls], 0);
    npb_add_check(&r, "sy", d.total.sy, ref_sy[cls], 0);
    npb_add_check(&r, "sum_abs_x", d.total.ax, ref_ax[cls], 0);
    npb_add_check(&r, "sum_abs_y", d.total.ay, ref_ay[cls], 0);
    npb_add_check(&r, "gaussian_pairs", pairs, ref_pairs[cls], 1);
    r.ops = ldexp(1.0, class_m[cls] + 1);
    r.extra = extra;
    r.extra_arg = &d;
    r.detail = detail;
    r.detail_arg = &d;
    const int verified = npb_report(&r);
    CT_MPI_CHECK(MPI_Finalize());
    return verified ? 0 : 1; /* a failed verification fails the job, as ct-linpack's */
}
