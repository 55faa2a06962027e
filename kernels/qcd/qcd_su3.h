/* qcd_su3.h - SU(3) and SU(2) algebra of ct-qcd. A link is 18 doubles, row-major
 * (re, im) pairs; the products are inline because the update calls them ~30 times per
 * link. Each 3x3 complex product is 27 complex multiplications and 18 complex additions:
 * 198 flops; the _add forms add 18 more. */
#ifndef QCD_SU3_H
#define QCD_SU3_H

#define QCD_SU3 18 /* doubles per link */

#define RE(m, i, j) (m)[2 * (3 * (i) + (j))]
#define IM(m, i, j) (m)[2 * (3 * (i) + (j)) + 1]

/* c (+)= a b, a b^+, a^+ b. ADD is 0 or 1, known at compile time. */
static inline void su3_mul_nn_(const double *restrict a, const double *restrict b,
                               double *restrict c, int add)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double re = RE(a, i, 0) * RE(b, 0, j) - IM(a, i, 0) * IM(b, 0, j);
            double im = RE(a, i, 0) * IM(b, 0, j) + IM(a, i, 0) * RE(b, 0, j);
            re += RE(a, i, 1) * RE(b, 1, j) - IM(a, i, 1) * IM(b, 1, j);
            im += RE(a, i, 1) * IM(b, 1, j) + IM(a, i, 1) * RE(b, 1, j);
            re += RE(a, i, 2) * RE(b, 2, j) - IM(a, i, 2) * IM(b, 2, j);
            im += RE(a, i, 2) * IM(b, 2, j) + IM(a, i, 2) * RE(b, 2, j);
            if (add) {
                RE(c, i, j) += re;
                IM(c, i, j) += im;
            } else {
                RE(c, i, j) = re;
                IM(c, i, j) = im;
            }
        }
}

static inline void su3_mul_nd_(const double *restrict a, const double *restrict b,
                               double *restrict c, int add)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) { /* sum_k a_ik conj(b_jk) */
            double re = RE(a, i, 0) * RE(b, j, 0) + IM(a, i, 0) * IM(b, j, 0);
            double im = IM(a, i, 0) * RE(b, j, 0) - RE(a, i, 0) * IM(b, j, 0);
            re += RE(a, i, 1) * RE(b, j, 1) + IM(a, i, 1) * IM(b, j, 1);
            im += IM(a, i, 1) * RE(b, j, 1) - RE(a, i, 1) * IM(b, j, 1);
            re += RE(a, i, 2) * RE(b, j, 2) + IM(a, i, 2) * IM(b, j, 2);
            im += IM(a, i, 2) * RE(b, j, 2) - RE(a, i, 2) * IM(b, j, 2);
            if (add) {
                RE(c, i, j) += re;
                IM(c, i, j) += im;
            } else {
                RE(c, i, j) = re;
                IM(c, i, j) = im;
            }
        }
}

static inline void su3_mul_dn_(const double *restrict a, const double *restrict b,
                               double *restrict c, int add)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) { /* sum_k conj(a_ki) b_kj */
            double re = RE(a, 0, i) * RE(b, 0, j) + IM(a, 0, i) * IM(b, 0, j);
            double im = RE(a, 0, i) * IM(b, 0, j) - IM(a, 0, i) * RE(b, 0, j);
            re += RE(a, 1, i) * RE(b, 1, j) + IM(a, 1, i) * IM(b, 1, j);
            im += RE(a, 1, i) * IM(b, 1, j) - IM(a, 1, i) * RE(b, 1, j);
            re += RE(a, 2, i) * RE(b, 2, j) + IM(a, 2, i) * IM(b, 2, j);
            im += RE(a, 2, i) * IM(b, 2, j) - IM(a, 2, i) * RE(b, 2, j);
            if (add) {
                RE(c, i, j) += re;
                IM(c, i, j) += im;
            } else {
                RE(c, i, j) = re;
                IM(c, i, j) = im;
            }
        }
}

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
void su3_reunit(double *u);                  /* rows 0, 1 orthonormal; row 2 = conj(r0 x r1) */
double su3_unitarity_error(const double *u); /* max |(u u^+ - 1)_ij| */
double su3_det_error(const double *u);       /* |det u - 1| */
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
 * columns i, j) times those rows: 3 columns x 2x2 complex matrix-vector = 84 flops. */
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
