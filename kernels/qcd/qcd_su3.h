/* qcd_su3.h - SU(3) and SU(2) algebra of ct-qcd. A link is 18 doubles, row-major
 * (re, im) pairs; the products are inline because the update calls them ~30 times per
 * link. Each 3x3 complex product is 27 complex multiplications and 18 complex additions:
 * 198 flops; the _add forms add 18 more. */
#ifndef QCD_SU3_H
#define QCD_SU3_H

#define QCD_SU3 18 /* doubles per link */

#define RE(m, i, j) (m)[2 * (3 * (i) + (j))]
#define IM(m, i, j) (m)[2 * (3 * (i) + (j)) + 1]

/* c (+)= a b, a b^+, a^+ b. Two builds of the same arithmetic: every element of c is
 * the same sums of the same products in the same order, so both give the same bits.
 *
 * AVX (the translation unit qcd_update_avx.c, built with -mavx2 but without FMA): two
 * complex numbers per 256-bit register, columns 0 and 1 of a row of c together, column 2's
 * two sums in one more register. For a b the real and imaginary parts of a_ik are broadcast
 * and multiplied by row k of b; the imaginary sum, swapped within each complex number,
 * meets the real one once per element with one sign flip. ADD is 0 or 1, known at compile
 * time. */
#if defined(__AVX__)
#include <immintrin.h>

#define SWAP4(x) _mm256_permute_pd((x), 5)
#define SWAP2(x) _mm_permute_pd((x), 1)

static inline __attribute__((always_inline)) void su3_store_row_(double *c, int i, __m256d t01,
                                                                 __m256d u01, __m128d t2,
                                                                 __m128d u2, __m256d sign,
                                                                 int add)
{
    __m256d r01 = _mm256_add_pd(t01, _mm256_xor_pd(u01, sign));
    __m128d r2 = _mm_add_pd(t2, _mm_xor_pd(u2, _mm256_castpd256_pd128(sign)));
    double *p = c + 6 * i;
    if (add) {
        r01 = _mm256_add_pd(_mm256_loadu_pd(p), r01);
        r2 = _mm_add_pd(_mm_loadu_pd(p + 4), r2);
    }
    _mm256_storeu_pd(p, r01);
    _mm_storeu_pd(p + 4, r2);
}

/* c = a b (DAG 0) or a^+ b (DAG 1): the broadcasts come from row i or column i of a.
 * Swapping the halves of each complex number commutes with every lanewise product and
 * sum, so the sums of Im(a_ik) times row k are taken unswapped and swapped once per row;
 * column 2's two sums share one register (Re a_ik, Re a_ik, Im a_ik, Im a_ik) times
 * (b_k2, b_k2). The same sums in the same order as one 128-bit sum per part: 13 live
 * registers, where precomputed swapped rows needed 19 and spilled. */
static inline __attribute__((always_inline)) void su3_mul_xn_(const double *restrict a,
                                                              const double *restrict b,
                                                              double *restrict c, int dag,
                                                              int add)
{
    const __m256d sign = dag ? _mm256_set_pd(-0.0, 0.0, -0.0, 0.0)
                             : _mm256_set_pd(0.0, -0.0, 0.0, -0.0);
    const __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 6), b2 = _mm256_loadu_pd(b + 12);
    const __m256d c0 = _mm256_broadcast_pd((const __m128d *)(b + 4));
    const __m256d c1 = _mm256_broadcast_pd((const __m128d *)(b + 10));
    const __m256d c2 = _mm256_broadcast_pd((const __m128d *)(b + 16));
    for (int i = 0; i < 3; i++) {
        const double *a0 = dag ? &RE(a, 0, i) : &RE(a, i, 0);
        const double *a1 = dag ? &RE(a, 1, i) : &RE(a, i, 1);
        const double *a2 = dag ? &RE(a, 2, i) : &RE(a, i, 2);
        __m256d r = _mm256_broadcast_sd(a0), m = _mm256_broadcast_sd(a0 + 1);
        __m256d t01 = _mm256_mul_pd(r, b0), w01 = _mm256_mul_pd(m, b0);
        __m256d v = _mm256_mul_pd(_mm256_blend_pd(r, m, 12), c0);
        r = _mm256_broadcast_sd(a1), m = _mm256_broadcast_sd(a1 + 1);
        t01 = _mm256_add_pd(t01, _mm256_mul_pd(r, b1));
        w01 = _mm256_add_pd(w01, _mm256_mul_pd(m, b1));
        v = _mm256_add_pd(v, _mm256_mul_pd(_mm256_blend_pd(r, m, 12), c1));
        r = _mm256_broadcast_sd(a2), m = _mm256_broadcast_sd(a2 + 1);
        t01 = _mm256_add_pd(t01, _mm256_mul_pd(r, b2));
        w01 = _mm256_add_pd(w01, _mm256_mul_pd(m, b2));
        v = _mm256_add_pd(v, _mm256_mul_pd(_mm256_blend_pd(r, m, 12), c2));
        su3_store_row_(c, i, t01, SWAP4(w01), _mm256_castpd256_pd128(v),
                       SWAP2(_mm256_extractf128_pd(v, 1)), sign, add);
    }
}

static inline __attribute__((always_inline)) void su3_mul_nn_(const double *restrict a, const double *restrict b,
                               double *restrict c, int add)
{
    su3_mul_xn_(a, b, c, 0, add);
}

static inline __attribute__((always_inline)) void su3_mul_dn_(const double *restrict a, const double *restrict b,
                               double *restrict c, int add)
{
    su3_mul_xn_(a, b, c, 1, add);
}

/* sum_k a_ik conj(b_jk): t = a Re(b), u = swap(a) Im(b), c = t + (u.re, -u.im). Row k's
 * pair (Re b_0k, Re b_0k, Re b_1k, Re b_1k) and its Im twin are built once per product;
 * a_ik is broadcast to both halves. As in su3_mul_xn_, u is summed unswapped (Im(b)'s pair
 * is its own swap) and swapped once; column 2's t and u share one register, a_ik times
 * (Re b_2k, Re b_2k, Im b_2k, Im b_2k). */
static inline __attribute__((always_inline)) void su3_mul_nd_(const double *restrict a, const double *restrict b,
                               double *restrict c, int add)
{
    const __m256d sign = _mm256_set_pd(-0.0, 0.0, -0.0, 0.0);
    __m256d re[3], im[3], q[3];
    for (int k = 0; k < 3; k++) {
        __m256d x = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(&RE(b, 0, k))),
                                         _mm_loadu_pd(&RE(b, 1, k)), 1);
        re[k] = _mm256_movedup_pd(x);
        im[k] = _mm256_permute_pd(x, 15);
        q[k] = _mm256_permute_pd(_mm256_broadcast_pd((const __m128d *)&RE(b, 2, k)), 12);
    }
    for (int i = 0; i < 3; i++) {
        __m256d x = _mm256_broadcast_pd((const __m128d *)&RE(a, i, 0));
        __m256d t01 = _mm256_mul_pd(x, re[0]), w01 = _mm256_mul_pd(x, im[0]);
        __m256d v = _mm256_mul_pd(x, q[0]);
        for (int k = 1; k < 3; k++) {
            x = _mm256_broadcast_pd((const __m128d *)&RE(a, i, k));
            t01 = _mm256_add_pd(t01, _mm256_mul_pd(x, re[k]));
            w01 = _mm256_add_pd(w01, _mm256_mul_pd(x, im[k]));
            v = _mm256_add_pd(v, _mm256_mul_pd(x, q[k]));
        }
        su3_store_row_(c, i, t01, SWAP4(w01), _mm256_castpd256_pd128(v),
                       SWAP2(_mm256_extractf128_pd(v, 1)), sign, add);
    }
}

/* SSE2 (the x86-64 baseline): one complex number per register, the same sums as above.
 * The same flops as the textbook loop (198), about half its instructions. */
/* c (+)= a b, a b^+, a^+ b with SSE2 (the x86-64 baseline): one complex number per
 * register. For a b the real and imaginary parts of a_ik are broadcast and multiplied by
 * b_kj and by b_kj with its halves swapped; the two sums meet once per element with one
 * sign flip. The same flops as the textbook loop (198), about half the instructions.
 * ADD is 0 or 1, known at compile time. */
#elif defined(__SSE2__)
#include <emmintrin.h>

#define CPLX(m, i, j) _mm_loadu_pd((m) + 2 * (3 * (i) + (j)))
#define SWAP(x) _mm_shuffle_pd((x), (x), 1)

static inline __attribute__((always_inline)) void su3_store_(double *c, int i, int j, __m128d t, __m128d u, __m128d sign,
                              int add)
{
    __m128d r = _mm_add_pd(t, _mm_xor_pd(u, sign));
    double *p = c + 2 * (3 * i + j);
    _mm_storeu_pd(p, add ? _mm_add_pd(_mm_loadu_pd(p), r) : r);
}

/* sum_k a_ik b_kj: t = Re(a) b, u = Im(a) swap(b), c = t + (-u.re, u.im). Column j of b
 * (and its swap) stays in registers while the rows of a are broadcast: 10 registers, so
 * the 16 of SSE2 suffice. */
static inline __attribute__((always_inline)) void su3_mul_nn_(const double *restrict a, const double *restrict b,
                               double *restrict c, int add)
{
    const __m128d sign = _mm_set_pd(0.0, -0.0);
    for (int j = 0; j < 3; j++) {
        const __m128d b0 = CPLX(b, 0, j), b1 = CPLX(b, 1, j), b2 = CPLX(b, 2, j);
        const __m128d s0 = SWAP(b0), s1 = SWAP(b1), s2 = SWAP(b2);
        for (int i = 0; i < 3; i++) {
            __m128d t = _mm_mul_pd(_mm_set1_pd(RE(a, i, 0)), b0);
            __m128d u = _mm_mul_pd(_mm_set1_pd(IM(a, i, 0)), s0);
            t = _mm_add_pd(t, _mm_mul_pd(_mm_set1_pd(RE(a, i, 1)), b1));
            u = _mm_add_pd(u, _mm_mul_pd(_mm_set1_pd(IM(a, i, 1)), s1));
            t = _mm_add_pd(t, _mm_mul_pd(_mm_set1_pd(RE(a, i, 2)), b2));
            u = _mm_add_pd(u, _mm_mul_pd(_mm_set1_pd(IM(a, i, 2)), s2));
            su3_store_(c, i, j, t, u, sign, add);
        }
    }
}

/* sum_k a_ik conj(b_jk): t = a Re(b), u = swap(a) Im(b), c = t + (u.re, -u.im) */
static inline __attribute__((always_inline)) void su3_mul_nd_(const double *restrict a, const double *restrict b,
                               double *restrict c, int add)
{
    const __m128d sign = _mm_set_pd(-0.0, 0.0);
    for (int i = 0; i < 3; i++) {
        const __m128d a0 = CPLX(a, i, 0), a1 = CPLX(a, i, 1), a2 = CPLX(a, i, 2);
        const __m128d s0 = SWAP(a0), s1 = SWAP(a1), s2 = SWAP(a2);
        for (int j = 0; j < 3; j++) {
            __m128d t = _mm_mul_pd(a0, _mm_set1_pd(RE(b, j, 0)));
            __m128d u = _mm_mul_pd(s0, _mm_set1_pd(IM(b, j, 0)));
            t = _mm_add_pd(t, _mm_mul_pd(a1, _mm_set1_pd(RE(b, j, 1))));
            u = _mm_add_pd(u, _mm_mul_pd(s1, _mm_set1_pd(IM(b, j, 1))));
            t = _mm_add_pd(t, _mm_mul_pd(a2, _mm_set1_pd(RE(b, j, 2))));
            u = _mm_add_pd(u, _mm_mul_pd(s2, _mm_set1_pd(IM(b, j, 2))));
            su3_store_(c, i, j, t, u, sign, add);
        }
    }
}

/* sum_k conj(a_ki) b_kj: t = Re(a) b, u = Im(a) swap(b), c = t + (u.re, -u.im) */
static inline __attribute__((always_inline)) void su3_mul_dn_(const double *restrict a, const double *restrict b,
                               double *restrict c, int add)
{
    const __m128d sign = _mm_set_pd(-0.0, 0.0);
    for (int j = 0; j < 3; j++) {
        const __m128d b0 = CPLX(b, 0, j), b1 = CPLX(b, 1, j), b2 = CPLX(b, 2, j);
        const __m128d s0 = SWAP(b0), s1 = SWAP(b1), s2 = SWAP(b2);
        for (int i = 0; i < 3; i++) {
            __m128d t = _mm_mul_pd(_mm_set1_pd(RE(a, 0, i)), b0);
            __m128d u = _mm_mul_pd(_mm_set1_pd(IM(a, 0, i)), s0);
            t = _mm_add_pd(t, _mm_mul_pd(_mm_set1_pd(RE(a, 1, i)), b1));
            u = _mm_add_pd(u, _mm_mul_pd(_mm_set1_pd(IM(a, 1, i)), s1));
            t = _mm_add_pd(t, _mm_mul_pd(_mm_set1_pd(RE(a, 2, i)), b2));
            u = _mm_add_pd(u, _mm_mul_pd(_mm_set1_pd(IM(a, 2, i)), s2));
            su3_store_(c, i, j, t, u, sign, add);
        }
    }
}
#else
#error "ct-qcd needs SSE2 (every x86-64)"
#endif

static inline void su3_mul_nn(const double *a, const double *b, double *c) { su3_mul_nn_(a, b, c, 0); }
static inline void su3_mul_nd(const double *a, const double *b, double *c) { su3_mul_nd_(a, b, c, 0); }
static inline void su3_mul_dn(const double *a, const double *b, double *c) { su3_mul_dn_(a, b, c, 0); }
static inline void su3_mul_nn_add(const double *a, const double *b, double *c) { su3_mul_nn_(a, b, c, 1); }
static inline void su3_mul_nd_add(const double *a, const double *b, double *c) { su3_mul_nd_(a, b, c, 1); }
static inline void su3_mul_dn_add(const double *a, const double *b, double *c) { su3_mul_dn_(a, b, c, 1); }

/* Re Tr(a b^+) = sum of the 18 products: 35 flops */
static inline double su3_retr_mul_nd(const double *restrict a, const double *restrict b)
{
    double s = 0.0;
    for (int k = 0; k < QCD_SU3; k++)
        s += a[k] * b[k];
    return s;
}

void su3_unit(double *u);

/* Reunitarisation and the SU(3) checks, inline so that the AVX build of the update
 * (qcd_update_body.h: qcd_reunit_check) compiles them too; scalar code without FMA, the
 * same bits in either build. */
#include <math.h>

static inline void su3_normalise_row_(double *u, int i)
{
    double n = 0.0;
    for (int k = 0; k < 3; k++)
        n += RE(u, i, k) * RE(u, i, k) + IM(u, i, k) * IM(u, i, k);
    n = 1.0 / sqrt(n);
    for (int k = 0; k < 3; k++) {
        RE(u, i, k) *= n;
        IM(u, i, k) *= n;
    }
}

/* Purpose: project back onto SU(3) after round-off has drifted a link away from it.
 * Row 0 is normalised, row 1 made orthogonal to it and normalised, row 2 set to the
 * complex conjugate of their cross product, so that det u = 1 to round-off. */
static inline void su3_reunit(double *u)
{
    su3_normalise_row_(u, 0);
    double pr = 0.0, pi = 0.0; /* <row0, row1> = sum conj(r0) r1 */
    for (int k = 0; k < 3; k++) {
        pr += RE(u, 0, k) * RE(u, 1, k) + IM(u, 0, k) * IM(u, 1, k);
        pi += RE(u, 0, k) * IM(u, 1, k) - IM(u, 0, k) * RE(u, 1, k);
    }
    for (int k = 0; k < 3; k++) {
        RE(u, 1, k) -= pr * RE(u, 0, k) - pi * IM(u, 0, k);
        IM(u, 1, k) -= pr * IM(u, 0, k) + pi * RE(u, 0, k);
    }
    su3_normalise_row_(u, 1);
    for (int k = 0; k < 3; k++) { /* row2_k = conj(r0_a r1_b - r0_b r1_a) */
        int a = (k + 1) % 3, b = (k + 2) % 3;
        double re = RE(u, 0, a) * RE(u, 1, b) - IM(u, 0, a) * IM(u, 1, b) -
                    (RE(u, 0, b) * RE(u, 1, a) - IM(u, 0, b) * IM(u, 1, a));
        double im = RE(u, 0, a) * IM(u, 1, b) + IM(u, 0, a) * RE(u, 1, b) -
                    (RE(u, 0, b) * IM(u, 1, a) + IM(u, 0, b) * RE(u, 1, a));
        RE(u, 2, k) = re;
        IM(u, 2, k) = -im;
    }
}

static inline double su3_unitarity_error(const double *u)
{
    double p[QCD_SU3], worst = 0.0; /* of the squares: sqrt is monotonic, so one suffices */
    su3_mul_nd(u, u, p);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double dr = RE(p, i, j) - (i == j), di = IM(p, i, j), e = dr * dr + di * di;
            worst = e > worst ? e : worst;
        }
    return sqrt(worst);
}

static inline double su3_det_error(const double *u)
{
    double re = 0.0, im = 0.0;
    for (int k = 0; k < 3; k++) { /* u_0k times the cofactor of (0, k) */
        int a = (k + 1) % 3, b = (k + 2) % 3;
        double cr = RE(u, 1, a) * RE(u, 2, b) - IM(u, 1, a) * IM(u, 2, b) -
                    (RE(u, 1, b) * RE(u, 2, a) - IM(u, 1, b) * IM(u, 2, a));
        double ci = RE(u, 1, a) * IM(u, 2, b) + IM(u, 1, a) * RE(u, 2, b) -
                    (RE(u, 1, b) * IM(u, 2, a) + IM(u, 1, b) * RE(u, 2, a));
        re += RE(u, 0, k) * cr - IM(u, 0, k) * ci;
        im += RE(u, 0, k) * ci + IM(u, 0, k) * cr;
    }
    return hypot(re - 1.0, im);
}

/* u = g u h^+ (a gauge transformation of one link) */
void su3_transform(const double *g, double *u, const double *h);

/* SU(2) as a real quaternion (b0, b1, b2, b3) = b0 + i b.sigma, i.e. the 2x2 matrix
 * [[b0 + i b3, b2 + i b1], [-b2 + i b1, b0 - i b3]]. */
static inline void su2_mul(const double *a, const double *b, double *c) /* 28 flops */
{
    c[0] = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
    c[1] = a[0] * b[1] + b[0] * a[1] - (a[2] * b[3] - a[3] * b[2]);
    c[2] = a[0] * b[2] + b[0] * a[2] - (a[3] * b[1] - a[1] * b[3]);
    c[3] = a[0] * b[3] + b[0] * a[3] - (a[1] * b[2] - a[2] * b[1]);
}

/* Rows i, j of the 3x3 matrix m become r (the SU(2) element b embedded in rows and
 * columns i, j) times those rows: 3 columns x 2x2 complex matrix-vector = 84 flops.
 * Each element is ((r_00 x + r_01 ...) in the order of the scalar form below; the AVX
 * form takes a row's three complex numbers at once (two per 256-bit register, the third in
 * 128 bits), x - y written as x + (-y), which IEEE defines to be the same number. */
#if defined(__AVX__)
/* (re, im) of each complex number -> (-im, re): i times it, exactly */
static inline __attribute__((always_inline)) __m256d su2_times_i4_(__m256d x)
{
    return _mm256_xor_pd(SWAP4(x), _mm256_set_pd(0.0, -0.0, 0.0, -0.0));
}

static inline __attribute__((always_inline)) __m128d su2_times_i2_(__m128d x)
{
    return _mm_xor_pd(SWAP2(x), _mm_set_pd(0.0, -0.0));
}

/* out = ((c0 x + c1 (i x)) + c2 y) + c3 (i y), x and y a row's three complex numbers
 * (v: two in 256 bits, h: the third in 128) */
static inline __attribute__((always_inline)) void su2_row_(double *out, const __m256d c[4],
                                                           const __m256d v[4],
                                                           const __m128d h[4])
{
    __m256d r = _mm256_add_pd(_mm256_mul_pd(c[0], v[0]), _mm256_mul_pd(c[1], v[1]));
    __m128d r2 = _mm_add_pd(_mm_mul_pd(_mm256_castpd256_pd128(c[0]), h[0]),
                            _mm_mul_pd(_mm256_castpd256_pd128(c[1]), h[1]));
    for (int k = 2; k < 4; k++) {
        r = _mm256_add_pd(r, _mm256_mul_pd(c[k], v[k]));
        r2 = _mm_add_pd(r2, _mm_mul_pd(_mm256_castpd256_pd128(c[k]), h[k]));
    }
    _mm256_storeu_pd(out, r);
    _mm_storeu_pd(out + 4, r2);
}

static inline __attribute__((always_inline)) void su2_left_mul(const double *b, int i, int j,
                                                               double *m)
{
    /* row i' = r_i0 row i + r_i1 row j with r_00 = b0 + i b3, r_01 = b2 + i b1,
     * r_10 = -b2 + i b1, r_11 = b0 - i b3; (a + i c) x = a x + c (i x) */
    const __m256d b0 = _mm256_set1_pd(b[0]), b1 = _mm256_set1_pd(b[1]);
    const __m256d b2 = _mm256_set1_pd(b[2]), b3 = _mm256_set1_pd(b[3]);
    const __m256d ci[4] = {b0, b3, b2, b1};
    const __m256d cj[4] = {_mm256_set1_pd(-b[2]), b1, b0, _mm256_set1_pd(-b[3])};
    double *pi = m + 6 * i, *pj = m + 6 * j;
    const __m256d x01 = _mm256_loadu_pd(pi), y01 = _mm256_loadu_pd(pj);
    const __m128d x2 = _mm_loadu_pd(pi + 4), y2 = _mm_loadu_pd(pj + 4);
    const __m256d v[4] = {x01, su2_times_i4_(x01), y01, su2_times_i4_(y01)};
    const __m128d h[4] = {x2, su2_times_i2_(x2), y2, su2_times_i2_(y2)};
    su2_row_(pi, ci, v, h);
    su2_row_(pj, cj, v, h);
}
#else
static inline void su2_left_mul(const double *b, int i, int j, double *m)
{
    const double r00r = b[0], r00i = b[3], r01r = b[2], r01i = b[1];
    const double r10r = -b[2], r10i = b[1], r11r = b[0], r11i = -b[3];
    for (int k = 0; k < 3; k++) {
        double xr = RE(m, i, k), xi = IM(m, i, k), yr = RE(m, j, k), yi = IM(m, j, k);
        RE(m, i, k) = r00r * xr - r00i * xi + r01r * yr - r01i * yi;
        IM(m, i, k) = r00r * xi + r00i * xr + r01r * yi + r01i * yr;
        RE(m, j, k) = r10r * xr - r10i * xi + r11r * yr - r11i * yi;
        IM(m, j, k) = r10r * xi + r10i * xr + r11r * yi + r11i * yr;
    }
}
#endif

/* The quaternion c with Re Tr(r w) = 2 b.c for every SU(2) element b (r its matrix),
 * where w is the 2x2 block (i, j) of m: the projection of w on multiples of SU(2).
 * 6 flops. */
static inline void su2_project(const double *m, int i, int j, double *c)
{
    c[0] = 0.5 * (RE(m, i, i) + RE(m, j, j));
    c[1] = -0.5 * (IM(m, i, j) + IM(m, j, i));
    c[2] = 0.5 * (RE(m, j, i) - RE(m, i, j));
    c[3] = -0.5 * (IM(m, i, i) - IM(m, j, j));
}

#endif
