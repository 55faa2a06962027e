/* lu_ssor.c - NPB LU's SSOR step: the lower and upper block-triangular sweeps over the
 * interior, each point a 5x5 block solve. The blocks are the flux Jacobians of the
 * operator (lu_rhs.c): towards a neighbour, -+dt t2 A(u_nb) - dt t1 (V(u_nb) + d I) with A
 * the inviscid and V the viscous Jacobian; on the diagonal I + 2 dt sum_dir t1 (V(u) + d I).
 *
 * Parallel: the lower sweep needs (i-1, j, k), (i, j-1, k), (i, j, k-1) first, so a rank
 * works plane by plane in k: it receives its west column and south row of the plane,
 * sweeps it, and sends its east column and north row on (a wavefront through the grid;
 * the upper sweep runs the other way). About 2 x 1000 flops per point and sweep pair. */
#include "lu.h"

#include <stdlib.h>
#include <string.h>

#define R43 (4.0 / 3.0)
#define C34 (LU_C3 * LU_C4)
#define C1345 (LU_C1 * LU_C3 * LU_C4 * LU_C5)

/* acc += (s2 A(u) + s1 (V(u) + dd I)) r: the block towards a neighbour applied to its
 * residual r without forming the block. A is the inviscid, V the viscous flux Jacobian in
 * the direction whose momentum component is n (constant in every call, so it folds). */
static inline void apply_block(const double *u, const double *r, int n, double s2, double s1,
                               double dd, double acc[5])
{
    double r1 = 1.0 / u[0], r2 = r1 * r1, r3 = r1 * r2;
    double q2 = (u[1] * u[1] + u[2] * u[2] + u[3] * u[3]) * r2;
    double un = u[n] * r1;
    double a[5], v[5];
    /* inviscid */
    a[0] = r[n];
    double cross = 0.0;
    for (int m = 1; m <= 3; m++) {
        if (m == n)
            continue;
        a[m] = -u[m] * u[n] * r2 * r[0] + un * r[m] + u[m] * r1 * r[n];
        cross += u[m] * r[m];
    }
    a[n] = (-un * un + 0.5 * LU_C2 * q2) * r[0] + (2.0 - LU_C2) * un * r[n] -
           LU_C2 * r1 * cross + LU_C2 * r[4];
    a[4] = (LU_C2 * q2 - LU_C1 * u[4] * r1) * un * r[0] - LU_C2 * u[n] * r2 * cross +
           (LU_C1 * u[4] * r1 - 0.5 * LU_C2 * (q2 + 2.0 * un * un)) * r[n] +
           LU_C1 * un * r[4];
    /* viscous */
    v[0] = 0.0;
    double v4 = 0.0;
    for (int k = 1; k <= 3; k++) {
        double coef = k == n ? R43 * C34 : C34;
        v[k] = coef * r1 * r[k] - coef * r2 * u[k] * r[0];
        v4 += (coef - C1345) * (r2 * u[k] * r[k] - r3 * u[k] * u[k] * r[0]);
    }
    v[4] = v4 - C1345 * r2 * u[4] * r[0] + C1345 * r1 * r[4];
    for (int m = 0; m < 5; m++)
        acc[m] += s2 * a[m] + s1 * (v[m] + dd * r[m]);
}

/* x <- D^-1 x with D = I + 2 dt sum_dir t1 (V_dir(u) + dd I). V has nonzeros only in
 * column 0, on the diagonal and in row 4, so D is lower triangular: forward substitution
 * is its exact inverse (the same result as NPB's full elimination, on fewer terms). */
static inline void diagonal_solve(const lu_t *g, const double *u, double x[5])
{
    double r1 = 1.0 / u[0], r2 = r1 * r1, r3 = r1 * r2;
    double diag = 1.0, w[3], wsum = 0.0;
    for (int d = 0; d < 3; d++) {
        w[d] = 2.0 * g->dt * g->t1[d];
        diag += w[d] * g->dd[d];
        wsum += w[d];
    }
    /* everything that depends on u only first (reciprocals off the chain from the
     * neighbour's fresh residual through this point) */
    double c1345 = C1345 * wsum, coef[4], inv[4], dm0[4], d4m[4], d40 = -c1345 * r2 * u[4];
    for (int m = 1; m <= 3; m++) {
        coef[m] = C34 * (wsum + (R43 - 1.0) * w[m - 1]); /* direction m - 1 weighs m by 4/3 */
        inv[m] = 1.0 / (diag + coef[m] * r1);
        dm0[m] = -coef[m] * r2 * u[m];
        d4m[m] = (coef[m] - c1345) * r2 * u[m];
        d40 -= (coef[m] - c1345) * r3 * u[m] * u[m];
    }
    double inv0 = 1.0 / diag, inv4 = 1.0 / (diag + c1345 * r1);
    double x0 = x[0] * inv0;
    x[0] = x0;
    double row4 = d40 * x0;
    for (int m = 1; m <= 3; m++) {
        x[m] = (x[m] - dm0[m] * x0) * inv[m];
        row4 += d4m[m] * x[m];
    }
    x[4] = (x[4] - row4) * inv4;
}

/* one interior point of a sweep: sign -1 lower (neighbours behind), +1 upper (ahead) */
static inline void sweep_point(lu_t *g, long p, const long step[3], double sign)
{
    double acc[5] = {0, 0, 0, 0, 0};
    double dt = g->dt;
    long qz = p + (sign < 0 ? -step[2] : step[2]);
    long qy = p + (sign < 0 ? -step[1] : step[1]);
    long qx = p + (sign < 0 ? -step[0] : step[0]);
    apply_block(g->u + qz, g->rsd + qz, 3, sign * dt * g->t2[2], -dt * g->t1[2], g->dd[2], acc);
    apply_block(g->u + qy, g->rsd + qy, 2, sign * dt * g->t2[1], -dt * g->t1[1], g->dd[1], acc);
    apply_block(g->u + qx, g->rsd + qx, 1, sign * dt * g->t2[0], -dt * g->t1[0], g->dd[0], acc);
    double *r = g->rsd + p;
    if (sign < 0) { /* r <- D^-1 (r - omega sum L r_nb) */
        for (int m = 0; m < 5; m++)
            acc[m] = r[m] - g->omega * acc[m];
        diagonal_solve(g, g->u + p, acc);
        memcpy(r, acc, sizeof acc);
    } else { /* r <- r - D^-1 (omega sum U r_nb) */
        for (int m = 0; m < 5; m++)
            acc[m] *= g->omega;
        diagonal_solve(g, g->u + p, acc);
        for (int m = 0; m < 5; m++)
            r[m] -= acc[m];
    }
}

/* a plane's column (local i fixed, all owned j) or row (local j fixed, all owned i) */
static void edge(lu_t *g, int dir, int at, int k, double *buf, int unpack)
{
    int count = dir == 0 ? g->nj : g->ni;
    for (int t = 0; t < count; t++) {
        long p = dir == 0 ? lu_at(g, at, t, k) : lu_at(g, t, at, k);
        if (unpack)
            memcpy(g->rsd + p, buf + 5L * t, 5 * sizeof(double));
        else
            memcpy(buf + 5L * t, g->rsd + p, 5 * sizeof(double));
    }
}

static void sweep(lu_t *g, double sign)
{
    int lower = sign < 0;
    /* where the plane's inputs come from and where its results go */
    int from_i = lower ? g->west : g->east, from_j = lower ? g->south : g->north;
    int to_i = lower ? g->east : g->west, to_j = lower ? g->north : g->south;
    int in_i = lower ? -1 : g->ni, in_j = lower ? -1 : g->nj;
    int out_i = lower ? g->ni - 1 : 0, out_j = lower ? g->nj - 1 : 0;
    int tag_i = lower ? CT_TAG_NPB_LU_EAST : CT_TAG_NPB_LU_WEST;
    int tag_j = lower ? CT_TAG_NPB_LU_NORTH : CT_TAG_NPB_LU_SOUTH;
    long ci = 5L * g->nj, cj = 5L * g->ni, per_plane = ci + cj;
    int nk = g->nk;
    MPI_Request *sends = ct_mpi_alloc(sizeof(MPI_Request) * 2 * (size_t)nk, "requests");
    for (int t = 0; t < 2 * nk; t++)
        sends[t] = MPI_REQUEST_NULL;
    for (int n = 0; n < nk - 2; n++) {
        int k = lower ? 1 + n : nk - 2 - n;
        double *rb = g->recvbuf, *sb = g->sendbuf + per_plane * k;
        MPI_Request rq[2];
        ct_phase_start(&g->comm, NPB_COMM_S);
        CT_MPI_CHECK(MPI_Irecv(rb, (int)ci, MPI_DOUBLE, from_i, tag_i, MPI_COMM_WORLD, &rq[0]));
        CT_MPI_CHECK(
            MPI_Irecv(rb + ci, (int)cj, MPI_DOUBLE, from_j, tag_j, MPI_COMM_WORLD, &rq[1]));
        ct_mpi_waitall(2, rq, NULL);
        ct_phase_stop(&g->comm, NPB_COMM_S);
        if (from_i != MPI_PROC_NULL)
            edge(g, 0, in_i, k, rb, 1);
        if (from_j != MPI_PROC_NULL)
            edge(g, 1, in_j, k, rb + ci, 1);
        long step[3] = {5, 5L * g->sx, 5L * g->sx * g->sy};
        if (lower) {
            for (int j = g->jst; j <= g->jend; j++)
                for (int i = g->ist; i <= g->iend; i++)
                    sweep_point(g, lu_at(g, i, j, k), step, -1.0);
        } else {
            for (int j = g->jend; j >= g->jst; j--)
                for (int i = g->iend; i >= g->ist; i--)
                    sweep_point(g, lu_at(g, i, j, k), step, +1.0);
        }
        ct_phase_start(&g->comm, NPB_COMM_S);
        if (to_i != MPI_PROC_NULL) {
            edge(g, 0, out_i, k, sb, 0);
            CT_MPI_CHECK(MPI_Isend(sb, (int)ci, MPI_DOUBLE, to_i, tag_i, MPI_COMM_WORLD,
                                   &sends[2 * k]));
            npb_comm_sent(&g->comm, (double)ci * sizeof(double));
        }
        if (to_j != MPI_PROC_NULL) {
            edge(g, 1, out_j, k, sb + ci, 0);
            CT_MPI_CHECK(MPI_Isend(sb + ci, (int)cj, MPI_DOUBLE, to_j, tag_j, MPI_COMM_WORLD,
                                   &sends[2 * k + 1]));
            npb_comm_sent(&g->comm, (double)cj * sizeof(double));
        }
        ct_phase_stop(&g->comm, NPB_COMM_S);
    }
    ct_phase_start(&g->comm, NPB_COMM_S);
    ct_mpi_waitall(2 * nk, sends, NULL);
    ct_phase_stop(&g->comm, NPB_COMM_S);
    free(sends);
}

void lu_ssor_sweeps(lu_t *g)
{
    sweep(g, -1.0);
    sweep(g, +1.0);
}
