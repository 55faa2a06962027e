/* qcd_su3.c - the SU(3) routines that are not in the inner loop (qcd_su3.h). */
#include "qcd.h"

#include <math.h>
#include <string.h>

void su3_unit(double *u)
{
    memset(u, 0, QCD_SU3 * sizeof *u);
    RE(u, 0, 0) = RE(u, 1, 1) = RE(u, 2, 2) = 1.0;
}

static void normalise_row(double *u, int i)
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
void su3_reunit(double *u)
{
    normalise_row(u, 0);
    double pr = 0.0, pi = 0.0; /* <row0, row1> = sum conj(r0) r1 */
    for (int k = 0; k < 3; k++) {
        pr += RE(u, 0, k) * RE(u, 1, k) + IM(u, 0, k) * IM(u, 1, k);
        pi += RE(u, 0, k) * IM(u, 1, k) - IM(u, 0, k) * RE(u, 1, k);
    }
    for (int k = 0; k < 3; k++) {
        RE(u, 1, k) -= pr * RE(u, 0, k) - pi * IM(u, 0, k);
        IM(u, 1, k) -= pr * IM(u, 0, k) + pi * RE(u, 0, k);
    }
    normalise_row(u, 1);
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

double su3_unitarity_error(const double *u)
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

double su3_det_error(const double *u)
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

void su3_transform(const double *g, double *u, const double *h)
{
    double t[QCD_SU3];
    su3_mul_nn(g, u, t);
    su3_mul_nd(t, h, u);
}
