/* lu_rhs.c - the exact solution, the halo exchange and the spatial operator of NPB LU:
 * central differences of the inviscid and viscous fluxes in x, y, z plus NPB's 4th-order
 * artificial dissipation (one-sided next to the boundary). Cost per interior point:
 * about 300 flops (three directions of 5-component fluxes and differences). */
#include "lu.h"

#include <string.h>

/* coefficients of the manufactured solution (NPB specification), per component:
 * 1, xi, eta, zeta, xi^2, eta^2, zeta^2, xi^3, ..., zeta^4 */
static const double CE[5][13] = {
    {2.0, 0.0, 0.0, 4.0, 5.0, 3.0, 0.5, 0.02, 0.01, 0.03, 0.5, 0.4, 0.3},
    {1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.01, 0.03, 0.02, 0.4, 0.3, 0.5},
    {2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.04, 0.03, 0.05, 0.3, 0.5, 0.4},
    {2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.03, 0.05, 0.04, 0.2, 0.1, 0.3},
    {5.0, 4.0, 3.0, 2.0, 0.1, 0.4, 0.3, 0.05, 0.04, 0.03, 0.1, 0.3, 0.2},
};

void lu_exact(const lu_t *g, int gi, int gj, int gk, double out[5])
{
    double x = (double)gi / (g->n[0] - 1), y = (double)gj / (g->n[1] - 1),
           z = (double)gk / (g->n[2] - 1);
    for (int m = 0; m < 5; m++) {
        const double *c = CE[m];
        out[m] = c[0] + c[1] * x + c[2] * y + c[3] * z + c[4] * x * x + c[5] * y * y +
                 c[6] * z * z + c[7] * x * x * x + c[8] * y * y * y + c[9] * z * z * z +
                 c[10] * x * x * x * x + c[11] * y * y * y * y + c[12] * z * z * z * z;
    }
}

/* ---------------------------------------------------------------- halo exchange */

/* strip of two layers: along i (dir 0) local i in [first, first+2) for every j, k;
 * along j (dir 1) local j in [first, first+2) for every i, k */
static void strip(lu_t *g, double *v, double *buf, int dir, int first, int unpack)
{
    long n = 0;
    for (int k = 0; k < g->nk; k++)
        for (int l = 0; l < 2; l++) {
            int count = dir == 0 ? g->nj : g->ni;
            for (int t = 0; t < count; t++) {
                long p = dir == 0 ? lu_at(g, first + l, t, k) : lu_at(g, t, first + l, k);
                if (unpack)
                    memcpy(v + p, buf + n, 5 * sizeof(double));
                else
                    memcpy(buf + n, v + p, 5 * sizeof(double));
                n += 5;
            }
        }
}

void lu_exchange(lu_t *g, double *v)
{
    long ci = 10L * g->nj * g->nk, cj = 10L * g->ni * g->nk; /* values per strip */
    double *b = g->halo; /* send W, E, S, N then receive W, E, S, N */
    double *sw = b, *se = sw + ci, *ss = se + ci, *sn = ss + cj;
    double *rw = sn + cj, *re = rw + ci, *rs = re + ci, *rn = rs + cj;
    int nb[4] = {g->west, g->east, g->south, g->north};
    double *sb[4] = {sw, se, ss, sn}, *rb[4] = {rw, re, rs, rn};
    long cnt[4] = {ci, ci, cj, cj};
    int first_send[4] = {0, g->ni - 2, 0, g->nj - 2}, first_recv[4] = {-2, g->ni, -2, g->nj};
    MPI_Request rq[8];
    for (int d = 0; d < 4; d++)
        if (nb[d] != MPI_PROC_NULL)
            strip(g, v, sb[d], d / 2, first_send[d], 0);
    ct_phase_start(&g->comm, NPB_COMM_S);
    for (int d = 0; d < 4; d++) {
        /* what goes west arrives at the west neighbour's east side: tag by arrival side */
        CT_MPI_CHECK(MPI_Irecv(rb[d], (int)cnt[d], MPI_DOUBLE, nb[d], CT_TAG_NPB_LU_HALO + d,
                               MPI_COMM_WORLD, &rq[d]));
        CT_MPI_CHECK(MPI_Isend(sb[d], (int)cnt[d], MPI_DOUBLE, nb[d], CT_TAG_NPB_LU_HALO + (d ^ 1),
                               MPI_COMM_WORLD, &rq[4 + d]));
        if (nb[d] != MPI_PROC_NULL)
            npb_comm_sent(&g->comm, (double)cnt[d] * sizeof(double));
    }
    ct_mpi_waitall(8, rq, NULL);
    ct_phase_stop(&g->comm, NPB_COMM_S);
    for (int d = 0; d < 4; d++)
        if (nb[d] != MPI_PROC_NULL)
            strip(g, v, rb[d], d / 2, first_recv[d], 1);
}

/* ---------------------------------------------------------------- the operator */

/* inviscid flux in direction with momentum component n (1, 2, 3) */
static inline void inviscid(const double *v, int n, double f[5])
{
    double un = v[n] / v[0];
    double q = 0.5 * (v[1] * v[1] + v[2] * v[2] + v[3] * v[3]) / v[0];
    f[0] = v[n];
    f[1] = v[1] * un;
    f[2] = v[2] * un;
    f[3] = v[3] * un;
    f[n] += LU_C2 * (v[4] - q);
    f[4] = (LU_C1 * v[4] - LU_C2 * q) * un;
}

/* viscous flux between points a (behind) and b, components 1..4 (f[0] unused) */
static inline void viscous(const double *a, const double *b, int n, double t3, double f[5])
{
    double ra = 1.0 / a[0], rb = 1.0 / b[0];
    double ua[4] = {a[1] * ra, a[2] * ra, a[3] * ra, a[4] * ra};
    double ub[4] = {b[1] * rb, b[2] * rb, b[3] * rb, b[4] * rb};
    for (int m = 1; m <= 3; m++)
        f[m] = t3 * (ub[m - 1] - ua[m - 1]);
    f[n] *= 4.0 / 3.0;
    f[4] = 0.5 * (1.0 - LU_C1 * LU_C5) * t3 *
               ((ub[0] * ub[0] + ub[1] * ub[1] + ub[2] * ub[2]) -
                (ua[0] * ua[0] + ua[1] * ua[1] + ua[2] * ua[2])) +
           (1.0 / 6.0) * t3 * (ub[n - 1] * ub[n - 1] - ua[n - 1] * ua[n - 1]) +
           LU_C1 * LU_C5 * t3 * (ub[3] - ua[3]);
}

/* NPB's dissipation stencil at global index gi of n points; v[s] = value s points away */
static inline double dissipation(int gi, int n, const double *m2, const double *m1,
                                 const double *c, const double *p1, const double *p2, int m)
{
    if (gi == 1)
        return 5.0 * c[m] - 4.0 * p1[m] + p2[m];
    if (gi == 2)
        return -4.0 * m1[m] + 6.0 * c[m] - 4.0 * p1[m] + p2[m];
    if (gi == n - 3)
        return m2[m] - 4.0 * m1[m] + 6.0 * c[m] - 4.0 * p1[m];
    if (gi == n - 2)
        return m2[m] - 4.0 * m1[m] + 5.0 * c[m];
    return m2[m] - 4.0 * m1[m] + 6.0 * c[m] - 4.0 * p1[m] + p2[m];
}

/* the terms of direction dir at one interior point: v at offsets -2..2 along dir (only
 * those the stencil needs are read), fluxes F at -1 and +1, viscous G at 0 and +1 */
static inline void direction_terms(const lu_t *g, int dir, int gidx, const double *const v[5],
                                   const double *fm, const double *fp, const double *g0,
                                   const double *g1, double *out)
{
    double t1 = g->t1[dir], t2 = g->t2[dir], t3 = g->t3[dir], dd = g->dd[dir];
    int n = g->n[dir];
    for (int m = 0; m < 5; m++) {
        double r = -t2 * (fp[m] - fm[m]);
        if (m > 0)
            r += t3 * LU_C3 * LU_C4 * (g1[m] - g0[m]);
        r += dd * t1 * (v[1][m] - 2.0 * v[2][m] + v[3][m]);
        r -= g->dssp * dissipation(gidx, n, v[0], v[1], v[2], v[3], v[4], m);
        out[m] += r;
    }
}

void lu_operator(lu_t *g, const double *v, double *out, const double *sub)
{
    int nk = g->nk;
    long dstep[3] = {5, 5L * g->sx, 5L * g->sx * g->sy};
    /* out = -sub inside, 0 elsewhere (the whole owned block, all k) */
    for (int k = 0; k < nk; k++)
        for (int j = 0; j < g->nj; j++)
            for (int i = 0; i < g->ni; i++) {
                long p = lu_at(g, i, j, k);
                int inside = i >= g->ist && i <= g->iend && j >= g->jst && j <= g->jend &&
                             k >= 1 && k <= nk - 2;
                for (int m = 0; m < 5; m++)
                    out[p + m] = inside && sub ? -sub[p + m] : 0.0;
            }
    double *F = g->flux; /* inviscid fluxes, then viscous ones, per direction */
    double *G = g->flux + lu_values(g);
    for (int dir = 0; dir < 3; dir++) {
        int mom = dir + 1;
        long s = dstep[dir];
        /* fluxes at every point a stencil of the interior reaches */
        int ilo = g->ist - (dir == 0), ihi = g->iend + (dir == 0);
        int jlo = g->jst - (dir == 1), jhi = g->jend + (dir == 1);
        int klo = dir == 2 ? 0 : 1, khi = dir == 2 ? nk - 1 : nk - 2;
        for (int k = klo; k <= khi; k++)
            for (int j = jlo; j <= jhi; j++)
                for (int i = ilo; i <= ihi; i++) {
                    long p = lu_at(g, i, j, k);
                    inviscid(v + p, mom, F + p);
                    /* viscous flux between p - s and p, where p - s exists */
                    if ((dir == 0 && i > ilo) || (dir == 1 && j > jlo) || (dir == 2 && k > klo))
                        viscous(v + p - s, v + p, mom, g->t3[dir], G + p);
                }
        for (int k = 1; k <= nk - 2; k++)
            for (int j = g->jst; j <= g->jend; j++)
                for (int i = g->ist; i <= g->iend; i++) {
                    long p = lu_at(g, i, j, k);
                    int gidx = dir == 0 ? g->i0 + i : dir == 1 ? g->j0 + j : k;
                    const double *vv[5] = {v + p - 2 * s, v + p - s, v + p, v + p + s,
                                           v + p + 2 * s};
                    direction_terms(g, dir, gidx, vv, F + p - s, F + p + s, G + p, G + p + s,
                                    out + p);
                }
    }
}
