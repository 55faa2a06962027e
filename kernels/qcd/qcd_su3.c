/* qcd_su3.c - the SU(3) routines that are not in the inner loop (qcd_su3.h). */
#include "qcd.h"

#include <math.h>
#include <string.h>

void su3_unit(double *u)
{
    memset(u, 0, QCD_SU3 * sizeof *u);
    RE(u, 0, 0) = RE(u, 1, 1) = RE(u, 2, 2) = 1.0;
}





void su3_transform(const double *g, double *u, const double *h)
{
    double t[QCD_SU3];
    su3_mul_nn(g, u, t);
    su3_mul_nd(t, h, u);
}
