/* lu.h - NPB LU: the compressible Navier-Stokes model problem of the NPB specification
 * (5 unknowns per point on an n^3 grid, a manufactured exact solution, 4th-order
 * artificial dissipation) solved by SSOR with pseudo-time steps.
 *
 * Decomposition: a px x py grid of ranks over (i, j); every rank holds all k. Arrays are
 * [k][j][i][m] with two ghost layers in i and j. Formulas use global indices (interior:
 * 1 .. n-2), so a rank never asks whether it is on a border, only where a point is.
 */
#ifndef LU_H
#define LU_H

#include "npb.h"

#define LU_G 2 /* ghost layers in i and j */

typedef struct {
    int n[3];                   /* global nx, ny, nz */
    int itmax;
    double dt, omega;
    int px, py, cx, cy;         /* process grid and this rank's coordinates */
    int i0, j0, ni, nj, nk;     /* owned: global i0 .. i0+ni-1, j0 .. j0+nj-1, all nk = nz */
    int west, east, south, north; /* ranks at i-1, i+1, j-1, j+1, or MPI_PROC_NULL */
    int sx, sy;                 /* points per ghosted row (ni + 4), rows per plane (nj + 4) */
    int ist, iend, jst, jend;   /* local interior bounds (inclusive) */
    double *u, *rsd, *frct, *flux; /* 5 values per point */
    double *sendbuf, *recvbuf;  /* pipelined sweeps: one strip per plane and direction */
    double *halo;               /* halo exchange buffers */
    /* coefficients of the discretisation */
    double t1[3], t2[3], t3[3], dd[3], dssp;
    ct_phases comm;
} lu_t;

/* index of value 0 at local (i, j, k); ghosts -2 .. n+1 in i and j, and two empty planes
 * below and above k so that stencil pointers never leave the array */
static inline long lu_at(const lu_t *g, int i, int j, int k)
{
    return 5L * ((i + LU_G) + (long)g->sx * ((j + LU_G) + (long)g->sy * (k + LU_G)));
}

/* values in an array of the ghosted block */
static inline long lu_values(const lu_t *g) { return 5L * g->sx * g->sy * (g->nk + 2 * LU_G); }

/* NPB's constants */
#define LU_C1 1.40
#define LU_C2 0.40
#define LU_C3 1.00e-1
#define LU_C4 1.00
#define LU_C5 1.40

void lu_exact(const lu_t *g, int gi, int gj, int gk, double out[5]);

/* out = L(v) - sub at the interior (sub may be NULL), 0 at boundary points; v needs
 * current halos (lu_exchange). The spatial operator of the NPB LU problem. */
void lu_operator(lu_t *g, const double *v, double *out, const double *sub);

/* Two ghost layers of v from the four neighbours (collective over the grid). */
void lu_exchange(lu_t *g, double *v);

/* One SSOR step on g->rsd: lower then upper triangular sweep, pipelined over the grid. */
void lu_ssor_sweeps(lu_t *g);

#endif
