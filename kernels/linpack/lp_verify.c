/* lp_verify.c - HPL's scaled residual
 *   ||Ax-b||_oo / (eps * (||A||_oo * ||x||_oo + ||b||_oo) * N)
 * with A and b regenerated from the seed (the factorisation overwrote them) and
 * eps = 2^-53, the relative machine precision HPL prints (1.110223e-16). */
#include "lp.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void lp_verify(lp_problem *pb, double *resid, double norms[4])
{
    const lp_grid *g = pb->grid;
    int n = pb->n, nb = pb->nb, lda = pb->lda, mloc = pb->mloc;
    lp_matgen(g, n, nb, pb->algo->seed, pb->a, lda);
    int lcn = lp_numroc(n, nb, g->mycol, g->npcol);
    double *xloc = ct_mpi_alloc(((size_t)lcn + 1) * sizeof(double), "the residual's x");
    double *ax = ct_mpi_alloc(((size_t)mloc + 1) * sizeof(double), "the residual's Ax");
    double *rowsum = ct_mpi_alloc(((size_t)mloc + 1) * sizeof(double), "the residual's row sums");
    memset(ax, 0, ((size_t)mloc + 1) * sizeof(double));
    memset(rowsum, 0, ((size_t)mloc + 1) * sizeof(double));
    for (int lc = 0; lc < lcn; lc++)
        xloc[lc] = pb->x[lp_l2g(lc, nb, g->mycol, g->npcol)];
    lp_dgemv('N', mloc, lcn, 1.0, pb->a, lda, xloc, 1, 0.0, ax, 1);
    for (int lc = 0; lc < lcn; lc++) {
        const double *col = pb->a + (size_t)lda * lc;
        for (int i = 0; i < mloc; i++)
            rowsum[i] += fabs(col[i]);
    }
    double bnorm = 0.0;
    if (lp_owner(n, nb, g->npcol) == g->mycol) {
        const double *b = pb->a + (size_t)lda * lp_g2l(n, nb, g->npcol);
        for (int i = 0; i < mloc; i++) {
            ax[i] -= b[i];
            if (fabs(b[i]) > bnorm)
                bnorm = fabs(b[i]);
        }
    }
    if (g->npcol > 1) {
        MPI_Request rq[2];
        CT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, ax, mloc, MPI_DOUBLE, MPI_SUM, g->row, &rq[0]));
        CT_MPI_CHECK(
            MPI_Iallreduce(MPI_IN_PLACE, rowsum, mloc, MPI_DOUBLE, MPI_SUM, g->row, &rq[1]));
        lp_wait_all(2, rq);
    }
    double loc[3] = {0.0, 0.0, bnorm}, glob[3];
    for (int i = 0; i < mloc; i++) {
        if (fabs(ax[i]) > loc[0] || isnan(ax[i]))
            loc[0] = isnan(ax[i]) ? INFINITY : fabs(ax[i]);
        if (rowsum[i] > loc[1])
            loc[1] = rowsum[i];
    }
    MPI_Request rq;
    CT_MPI_CHECK(MPI_Iallreduce(loc, glob, 3, MPI_DOUBLE, MPI_MAX, g->all, &rq));
    lp_wait_all(1, &rq);
    double xnorm = 0.0;
    for (int i = 0; i < n; i++) {
        double v = fabs(pb->x[i]);
        if (v > xnorm || isnan(v))
            xnorm = isnan(v) ? INFINITY : v;
    }
    double eps = DBL_EPSILON / 2.0;
    norms[0] = glob[0]; /* ||Ax-b||_oo */
    norms[1] = glob[1]; /* ||A||_oo */
    norms[2] = xnorm;   /* ||x||_oo */
    norms[3] = glob[2]; /* ||b||_oo */
    double denom = eps * (norms[1] * norms[2] + norms[3]) * (double)n;
    *resid = denom > 0.0 ? norms[0] / denom : (norms[0] == 0.0 ? 0.0 : INFINITY);
    free(xloc);
    free(ax);
    free(rowsum);
}
