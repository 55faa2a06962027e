/* bt.h - NPB BT (block-tridiagonal ADI solver) in C11 + MPI, written from the NPB
 * specification (NAS-95-020, NAS-02-007) and the NPB 3.4 problem definition.
 *
 * The problem: the 3-D compressible Navier-Stokes equations (5 unknowns per point:
 * rho, rho u, rho v, rho w, rho E) on an n^3 grid of the unit cube, with a forcing term
 * built so that a known polynomial is the steady solution. Each time step (ADI):
 *   rhs = dt * (forcing + L(u))   L = central fluxes + 4th-order dissipation,
 *   three sweeps of 5x5 block-tridiagonal solves (x, then y, then z),
 *   u += rhs.
 * After niter steps the RMS norms of the residual (divided by dt) and of the error
 * against the exact solution are compared with NPB's reference values (rel. 1e-8).
 *
 * Decomposition (multipartition): np = q^2 ranks, the grid is cut into q x q x q cells,
 * every rank owns q of them, exactly one in every slab of every direction, so in each
 * stage of a pipelined sweep every rank has work. Rank r = a + q b owns the cells
 * c = 0..q-1 at (x, y, z) = ((a + c) mod q, (b + c) mod q, c).
 */
#ifndef BT_H
#define BT_H

#include "npb.h"

#define BT_NVAR 5
#define BT_GHOST 2 /* ghost layers of u (the dissipation reaches two points away) */
#define BT_MIN_CELL 3
#define BT_MAXQ 64 /* at most 64 x 64 ranks */

/* one class of the benchmark (index = NPB_S ... NPB_C) */
typedef struct {
    char name;
    int n;     /* grid points per side */
    int niter; /* time steps */
    double dt;
    double xcr[BT_NVAR], xce[BT_NVAR]; /* references: residual norms / dt, error norms */
} bt_class;

extern const bt_class bt_classes[NPB_NCLASSES];
/* whether class cls runs on np ranks: a square q*q, cells of at least 3 points */
int bt_np_allowed(int np, int cls);
int bt_max_list(int cls);

/* constants of the discretisation, per direction d = 0 (x), 1 (y), 2 (z) */
typedef struct {
    double dt;
    double t1[3], t2[3];        /* 1/h^2, 1/(2h) */
    double dd[3][BT_NVAR];      /* second-difference dissipation coefficients */
    double con2[3], con3[3], con4[3], con5[3]; /* viscous coefficients */
    double dssp;                /* 4th-order dissipation */
    double h[3];                /* mesh width 1/(n-1) */
} bt_consts;

/* one cell of the multipartition */
typedef struct {
    int coord[3], lo[3], size[3];
    int first[3], last[3]; /* the cell touches the global low / high face */
    int in0[3], in1[3];    /* local range of the points the equations are solved at */
    int gx, gy;            /* ghosted extents of x and y */
    double *u;   /* [(k+G) gy + (j+G)] gx + (i+G), 5 values per point, G = 2 */
    double *aux; /* same points: rho_inv, us, vs, ws, square, qs (6 per point) */
    double *rhs; /* (k sy + j) sx + i, 5 per point, no ghosts */
    double *forcing;
    double *cp;  /* C' = B^-1 C of the forward elimination, 25 per point */
} bt_cell;

typedef struct {
    const bt_class *cls;
    bt_consts k;
    int n[3];
    int q, a, b, rank, np;
    MPI_Comm mpi; /* a duplicate of MPI_COMM_WORLD: the kernel's own tags */
    bt_cell *cells;                /* q cells */
    int cell_at[3][BT_MAXQ];       /* my cell with coordinate s along d */
    int succ[3], pred[3];          /* ranks of the neighbours in +d and -d */
    double *dis[3];                /* dissipation stencils per global index, 5 each */
    /* buffers: ghost planes (bt_compute_rhs) and pipeline stages (bt_solve) */
    double *sendbuf, *recvbuf;
    size_t bufdoubles;
    double *jac; /* the solves' Jacobians: 3 planes x the widest cell x 50 */
    MPI_Request face_recv[6], face_send[6]; /* the ghost planes in flight */
    ct_phases comm; /* time in MPI calls, messages and bytes sent */
} bt_state;

static inline size_t bt_uidx(const bt_cell *c, int i, int j, int k)
{
    return ((size_t)(k + BT_GHOST) * c->gy + (size_t)(j + BT_GHOST)) * c->gx + (size_t)(i + BT_GHOST);
}

static inline size_t bt_ridx(const bt_cell *c, int i, int j, int k)
{
    return ((size_t)k * c->size[1] + (size_t)j) * c->size[0] + (size_t)i;
}

/* bt_grid.c */
void bt_setup(bt_state *s, const bt_class *cls, MPI_Comm comm);
void bt_initialize(bt_state *s);
void bt_forcing(bt_state *s);
void bt_error_norm(bt_state *s, double rms[BT_NVAR]);
void bt_rhs_norm(bt_state *s, double rms[BT_NVAR]);
void bt_free(bt_state *s);

/* bt_rhs.c */
void bt_aux(const bt_cell *c, const double *u, double *aux);
/* out = scale (base + sign L(u)) at the points the equations are solved at; base NULL:
 * out itself */
void bt_operator(const bt_state *s, const bt_cell *c, const double *u, const double *aux,
                 const double *base, double *out, double sign, double scale);
void bt_compute_rhs(bt_state *s);

/* bt_solve.c */
void bt_solve(bt_state *s, int d);
void bt_add(bt_state *s);

/* bt_comm: checked, timed and counted point-to-point calls (bt_rhs.c) */
void bt_isend(bt_state *s, const double *buf, size_t n, int dest, int tag, MPI_Request *r);
void bt_irecv(bt_state *s, double *buf, size_t n, int src, int tag, MPI_Request *r);
void bt_waitall(bt_state *s, int n, MPI_Request *r);

#endif
