/* bt_grid.c - classes, the multipartition, the exact solution, initial field, forcing
 * and the two RMS norms of the verification. */
#include "bt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* NPB 3.4 classes: grid, steps, dt and the reference norms (xcr already divided by dt),
 * as published with the benchmark (research note npb-qcd.md, section 5.4). */
const bt_class bt_classes[NPB_NCLASSES] = {
    {'S', 12, 60, 0.010,
     {1.7034283709541311e-01, 1.2975252070034097e-02, 3.2527926989486055e-02,
      2.6436421275166801e-02, 1.9211784131744430e-01},
     {4.9976913345811579e-04, 4.5195666782961927e-05, 7.3973765172921357e-05,
      7.3821238632439731e-05, 8.9269630987491446e-04}},
    {'W', 24, 200, 0.0008,
     {0.1125590409344e+03, 0.1180007595731e+02, 0.2710329767846e+02, 0.2469174937669e+02,
      0.2638427874317e+03},
     {0.4419655736008e+01, 0.4638531260002e+00, 0.1011551749967e+01, 0.9235878729944e+00,
      0.1018045837718e+02}},
    {'A', 64, 200, 0.0008,
     {1.0806346714637264e+02, 1.1319730901220813e+01, 2.5974354511582465e+01,
      2.3665622544678910e+01, 2.5278963211748344e+02},
     {4.2348416040525025e+00, 4.4390282496995698e-01, 9.6692480136345650e-01,
      8.8302063039765474e-01, 9.7379901770829278e+00}},
    {'B', 102, 200, 0.0003,
     {1.4233597229287254e+03, 9.9330522590150238e+01, 3.5646025644535285e+02,
      3.2485447959084092e+02, 3.2707541254659363e+03},
     {5.2969847140936856e+01, 4.4632896115670668e+00, 1.3122573342210174e+01,
      1.2006925323559144e+01, 1.2459576151035986e+02}},
    {'C', 162, 200, 0.0001,
     {0.62398116551764615e+04, 0.50793239190423964e+03, 0.15423530093013596e+04,
      0.13302387929291190e+04, 0.11604087428436455e+05},
     {0.16462008369091265e+03, 0.11497107903824313e+02, 0.41207446207461508e+02,
      0.37087651059694167e+02, 0.36211053051841265e+03}},
};

static int isqrt(int np)
{
    int q = (int)sqrt((double)np);
    while (q * q > np)
        q--;
    while ((q + 1) * (q + 1) <= np)
        q++;
    return q;
}

static int qmax(int cls)
{
    int q = bt_classes[cls].n / BT_MIN_CELL;
    return q < BT_MAXQ ? q : BT_MAXQ;
}

int bt_np_allowed(int np, int cls)
{
    int q = isqrt(np);
    return q * q == np && q <= qmax(cls);
}

int bt_max_list(int cls)
{
    int q = qmax(cls);
    return q * q;
}

/* coefficients of the exact solution: u_m = sum over xi, eta, zeta of polynomials of
 * degree 4 (NPB's ce table: constant, linear x y z, quadratic x y z, ...) */
static const double ce[BT_NVAR][13] = {
    {2.0, 0.0, 0.0, 4.0, 5.0, 3.0, 0.5, 0.02, 0.01, 0.03, 0.5, 0.4, 0.3},
    {1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.01, 0.03, 0.02, 0.4, 0.3, 0.5},
    {2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.04, 0.03, 0.05, 0.3, 0.5, 0.4},
    {2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.03, 0.05, 0.04, 0.2, 0.1, 0.3},
    {5.0, 4.0, 3.0, 2.0, 0.1, 0.4, 0.3, 0.05, 0.04, 0.03, 0.1, 0.3, 0.2},
};

static void exact(double xi, double eta, double zeta, double out[BT_NVAR])
{
    for (int m = 0; m < BT_NVAR; m++) {
        const double *e = ce[m];
        out[m] = e[0] + xi * (e[1] + xi * (e[4] + xi * (e[7] + xi * e[10]))) +
                 eta * (e[2] + eta * (e[5] + eta * (e[8] + eta * e[11]))) +
                 zeta * (e[3] + zeta * (e[6] + zeta * (e[9] + zeta * e[12])));
    }
}

static void constants(bt_consts *k, const bt_class *cls, const int n[3])
{
    const double c3c4 = 0.1 * 1.0, c1c5 = 1.4 * 1.4, conz1 = 1.0 - c1c5, con16 = 1.0 / 6.0;
    k->dt = cls->dt;
    for (int d = 0; d < 3; d++) {
        double h = 1.0 / (double)(n[d] - 1), t3 = 1.0 / h;
        k->h[d] = h;
        k->t1[d] = 1.0 / (h * h);
        k->t2[d] = 1.0 / (2.0 * h);
        for (int m = 0; m < BT_NVAR; m++)
            k->dd[d][m] = d == 2 ? 1.0 : 0.75;
        k->con2[d] = c3c4 * t3 * t3;
        k->con3[d] = c3c4 * t3 * conz1 * t3;
        k->con4[d] = c3c4 * t3 * con16 * t3;
        k->con5[d] = c3c4 * t3 * c1c5 * t3;
    }
    k->dssp = 0.25 * 1.0; /* a quarter of the largest first dissipation coefficient */
}

/* 4th-order dissipation stencil at global index g of a line of n points, offsets -2..2;
 * one-sided near the boundary, zero on it. */
static void dissipation_stencil(int g, int n, double w[5])
{
    static const double interior[5] = {1.0, -4.0, 6.0, -4.0, 1.0};
    memset(w, 0, 5 * sizeof w[0]);
    if (g <= 0 || g >= n - 1)
        return;
    if (g == 1) {
        w[2] = 5.0, w[3] = -4.0, w[4] = 1.0;
    } else if (g == 2) {
        w[1] = -4.0, w[2] = 6.0, w[3] = -4.0, w[4] = 1.0;
    } else if (g == n - 3) {
        w[0] = 1.0, w[1] = -4.0, w[2] = 6.0, w[3] = -4.0;
    } else if (g == n - 2) {
        w[0] = 1.0, w[1] = -4.0, w[2] = 5.0;
    } else {
        memcpy(w, interior, sizeof interior);
    }
}

void bt_setup(bt_state *s, const bt_class *cls, MPI_Comm comm)
{
    memset(s, 0, sizeof *s);
    s->cls = cls;
    s->mpi = comm;
    CT_MPI_CHECK(MPI_Comm_rank(comm, &s->rank));
    CT_MPI_CHECK(MPI_Comm_size(comm, &s->np));
    int q = s->q = isqrt(s->np);
    s->a = s->rank % q;
    s->b = s->rank / q;
    for (int d = 0; d < 3; d++)
        s->n[d] = cls->n;
    constants(&s->k, cls, s->n);
    int a = s->a, b = s->b;
    s->succ[0] = (a + 1) % q + q * b;
    s->pred[0] = (a - 1 + q) % q + q * b;
    s->succ[1] = a + q * ((b + 1) % q);
    s->pred[1] = a + q * ((b - 1 + q) % q);
    s->succ[2] = (a - 1 + q) % q + q * ((b - 1 + q) % q); /* the cell above is one lower in a, b */
    s->pred[2] = (a + 1) % q + q * ((b + 1) % q);

    ct_alloc_failure f = {0};
    s->cells = ct_mpi_try_alloc(&f, (size_t)q * sizeof(bt_cell), "cells");
    size_t maxcross = 0, maxside = 0;
    for (int c = 0; s->cells && c < q; c++) {
        bt_cell *cl = &s->cells[c];
        memset(cl, 0, sizeof *cl);
        cl->coord[0] = (a + c) % q;
        cl->coord[1] = (b + c) % q;
        cl->coord[2] = c;
        for (int d = 0; d < 3; d++) {
            int n = s->n[d], base = n / q, excess = n % q, x = cl->coord[d];
            cl->size[d] = base + (x < excess);
            cl->lo[d] = x < excess ? x * (base + 1) : x * base + excess;
            cl->first[d] = x == 0;
            cl->last[d] = x == q - 1;
            cl->in0[d] = cl->first[d] ? 1 : 0;
            cl->in1[d] = cl->last[d] ? cl->size[d] - 2 : cl->size[d] - 1;
            s->cell_at[d][x] = c;
            if ((size_t)cl->size[d] > maxside)
                maxside = (size_t)cl->size[d];
        }
        cl->gx = cl->size[0] + 2 * BT_GHOST;
        cl->gy = cl->size[1] + 2 * BT_GHOST;
        size_t gpts = (size_t)cl->gx * cl->gy * (size_t)(cl->size[2] + 2 * BT_GHOST);
        size_t pts = (size_t)cl->size[0] * cl->size[1] * cl->size[2];
        cl->u = ct_mpi_try_alloc(&f, gpts * BT_NVAR * sizeof(double), "u");
        cl->aux = ct_mpi_try_alloc(&f, gpts * 6 * sizeof(double), "auxiliary fields");
        cl->rhs = ct_mpi_try_alloc(&f, pts * BT_NVAR * sizeof(double), "rhs");
        cl->forcing = ct_mpi_try_alloc(&f, pts * BT_NVAR * sizeof(double), "forcing");
        cl->cp = ct_mpi_try_alloc(&f, pts * 25 * sizeof(double), "the eliminated blocks");
        for (int d = 0; d < 3; d++) {
            size_t cross = (size_t)cl->size[(d + 1) % 3] * (size_t)cl->size[(d + 2) % 3];
            if (cross > maxcross)
                maxcross = cross;
        }
    }
    /* faces: 6 messages of q cells x 2 layers x cross x 5; solves: q stages x cross x
     * (30 forward + 5 backward); the two never overlap in time */
    size_t faces = 6 * (size_t)q * 2 * maxcross * BT_NVAR, stages = (size_t)q * maxcross * 35;
    s->bufdoubles = faces > stages ? faces : stages;
    s->sendbuf = ct_mpi_try_alloc(&f, s->bufdoubles * sizeof(double), "send buffers");
    s->recvbuf = ct_mpi_try_alloc(&f, s->bufdoubles * sizeof(double), "receive buffers");
    s->jac = ct_mpi_try_alloc(&f, 3 * maxside * 50 * sizeof(double), "Jacobians");
    for (int d = 0; d < 3; d++) {
        s->dis[d] = ct_mpi_try_alloc(&f, (size_t)s->n[d] * 5 * sizeof(double), "stencils");
        for (int g = 0; s->dis[d] && g < s->n[d]; g++)
            dissipation_stencil(g, s->n[d], s->dis[d] + 5 * g);
    }
    ct_mpi_agree(comm, &f);
    for (int c = 0; c < q; c++) {
        bt_cell *cl = &s->cells[c];
        size_t pts = (size_t)cl->size[0] * cl->size[1] * cl->size[2];
        memset(cl->rhs, 0, pts * BT_NVAR * sizeof(double));
        memset(cl->cp, 0, pts * 25 * sizeof(double));
    }
}

/* the exact solution at the global point (i, j, k) (any integers: the polynomial is
 * defined beyond the grid too) */
static void exact_at(const bt_state *s, int i, int j, int k, double out[BT_NVAR])
{
    exact((double)i * s->k.h[0], (double)j * s->k.h[1], (double)k * s->k.h[2], out);
}

/* Transfinite (tri-linear) interpolation of the exact solution on the six faces, inside;
 * the exact solution on the faces themselves; 1 in every ghost point. */
void bt_initialize(bt_state *s)
{
    for (int c = 0; c < s->q; c++) {
        bt_cell *cl = &s->cells[c];
        size_t gpts = (size_t)cl->gx * cl->gy * (size_t)(cl->size[2] + 2 * BT_GHOST);
        for (size_t p = 0; p < gpts * BT_NVAR; p++)
            cl->u[p] = 1.0;
        for (int k = 0; k < cl->size[2]; k++)
            for (int j = 0; j < cl->size[1]; j++)
                for (int i = 0; i < cl->size[0]; i++) {
                    int g[3] = {cl->lo[0] + i, cl->lo[1] + j, cl->lo[2] + k};
                    double x[3], face[3][2][BT_NVAR], *u = cl->u + BT_NVAR * bt_uidx(cl, i, j, k);
                    for (int d = 0; d < 3; d++)
                        x[d] = (double)g[d] * s->k.h[d];
                    for (int side = 0; side < 2; side++) {
                        exact((double)side, x[1], x[2], face[0][side]);
                        exact(x[0], (double)side, x[2], face[1][side]);
                        exact(x[0], x[1], (double)side, face[2][side]);
                    }
                    int boundary = 0;
                    for (int d = 0; d < 3; d++)
                        boundary |= g[d] == 0 || g[d] == s->n[d] - 1;
                    if (boundary) {
                        exact_at(s, g[0], g[1], g[2], u);
                        continue;
                    }
                    for (int m = 0; m < BT_NVAR; m++) {
                        double px = x[0] * face[0][1][m] + (1.0 - x[0]) * face[0][0][m];
                        double py = x[1] * face[1][1][m] + (1.0 - x[1]) * face[1][0][m];
                        double pz = x[2] * face[2][1][m] + (1.0 - x[2]) * face[2][0][m];
                        u[m] = px + py + pz - px * py - px * pz - py * pz + px * py * pz;
                    }
                }
    }
}

/* forcing = -L(exact solution) at the points the equations are solved at, 0 elsewhere,
 * so that the exact solution is a steady state of the discrete equations' right side */
void bt_forcing(bt_state *s)
{
    for (int c = 0; c < s->q; c++) {
        bt_cell *cl = &s->cells[c];
        size_t pts = (size_t)cl->size[0] * cl->size[1] * cl->size[2];
        for (int k = -BT_GHOST; k < cl->size[2] + BT_GHOST; k++)
            for (int j = -BT_GHOST; j < cl->size[1] + BT_GHOST; j++)
                for (int i = -BT_GHOST; i < cl->size[0] + BT_GHOST; i++)
                    exact_at(s, cl->lo[0] + i, cl->lo[1] + j, cl->lo[2] + k,
                             cl->u + BT_NVAR * bt_uidx(cl, i, j, k));
        memset(cl->forcing, 0, pts * BT_NVAR * sizeof(double));
        bt_aux(cl, cl->u, cl->aux);
        bt_operator(s, cl, cl->u, cl->aux, NULL, cl->forcing, -1.0, 1.0);
    }
}

/* NPB's RMS norm: the sums over all ranks, divided by the interior points per direction */
static void rms_of(const bt_state *s, double sum[BT_NVAR], double rms[BT_NVAR])
{
    CT_MPI_CHECK(MPI_Allreduce(sum, rms, BT_NVAR, MPI_DOUBLE, MPI_SUM, s->mpi));
    for (int m = 0; m < BT_NVAR; m++) {
        for (int d = 0; d < 3; d++)
            rms[m] /= (double)(s->n[d] - 2);
        rms[m] = sqrt(rms[m]);
    }
}

void bt_error_norm(bt_state *s, double rms[BT_NVAR])
{
    double sum[BT_NVAR] = {0};
    for (int c = 0; c < s->q; c++) {
        const bt_cell *cl = &s->cells[c];
        for (int k = 0; k < cl->size[2]; k++)
            for (int j = 0; j < cl->size[1]; j++)
                for (int i = 0; i < cl->size[0]; i++) {
                    double e[BT_NVAR];
                    const double *u = cl->u + BT_NVAR * bt_uidx(cl, i, j, k);
                    exact_at(s, cl->lo[0] + i, cl->lo[1] + j, cl->lo[2] + k, e);
                    for (int m = 0; m < BT_NVAR; m++)
                        sum[m] += (u[m] - e[m]) * (u[m] - e[m]);
                }
    }
    rms_of(s, sum, rms);
}

void bt_rhs_norm(bt_state *s, double rms[BT_NVAR])
{
    double sum[BT_NVAR] = {0};
    for (int c = 0; c < s->q; c++) {
        const bt_cell *cl = &s->cells[c];
        for (int k = cl->in0[2]; k <= cl->in1[2]; k++)
            for (int j = cl->in0[1]; j <= cl->in1[1]; j++)
                for (int i = cl->in0[0]; i <= cl->in1[0]; i++) {
                    const double *r = cl->rhs + BT_NVAR * bt_ridx(cl, i, j, k);
                    for (int m = 0; m < BT_NVAR; m++)
                        sum[m] += r[m] * r[m];
                }
    }
    rms_of(s, sum, rms);
}

void bt_free(bt_state *s)
{
    for (int c = 0; s->cells && c < s->q; c++) {
        bt_cell *cl = &s->cells[c];
        free(cl->u);
        free(cl->aux);
        free(cl->rhs);
        free(cl->forcing);
        free(cl->cp);
    }
    free(s->cells);
    free(s->sendbuf);
    free(s->recvbuf);
    free(s->jac);
    for (int d = 0; d < 3; d++)
        free(s->dis[d]);
}
