/* bt_rhs.c - the right-hand side: ghost faces from the neighbouring cells, overlapped
 * with the interior, rhs = dt (forcing + L(u)), L = central differences of the Euler fluxes, the viscous
 * terms of the thin-layer Navier-Stokes equations and 2nd/4th-order dissipation.
 * Also the checked, timed and counted point-to-point calls of the kernel. */
#include "bt.h"

#include <string.h>

#define C1 1.4
#define C2 0.4
#define CON43 (4.0 / 3.0)

void bt_isend(bt_state *s, const double *buf, size_t n, int dest, int tag, MPI_Request *r)
{
    ct_phase_start(&s->comm, NPB_COMM_S);
    CT_MPI_CHECK(MPI_Isend(buf, (int)n, MPI_DOUBLE, dest, tag, s->mpi, r));
    ct_phase_stop(&s->comm, NPB_COMM_S);
    npb_comm_sent(&s->comm, (double)(n * sizeof(double)));
}

void bt_irecv(bt_state *s, double *buf, size_t n, int src, int tag, MPI_Request *r)
{
    ct_phase_start(&s->comm, NPB_COMM_S);
    CT_MPI_CHECK(MPI_Irecv(buf, (int)n, MPI_DOUBLE, src, tag, s->mpi, r));
    ct_phase_stop(&s->comm, NPB_COMM_S);
}

void bt_waitall(bt_state *s, int n, MPI_Request *r)
{
    ct_phase_start(&s->comm, NPB_COMM_S);
    ct_mpi_waitall(n, r, NULL);
    ct_phase_stop(&s->comm, NPB_COMM_S);
}

/* A box of points of a cell, bounds included (local indices, ghosts negative). */
typedef struct {
    int lo[3], hi[3];
} box;

static int empty(const box *b)
{
    return b->lo[0] > b->hi[0] || b->lo[1] > b->hi[1] || b->lo[2] > b->hi[2];
}

/* The boxes (at most 6) that make up outer without inner (inner inside outer, or empty):
 * slabs below and above inner along z, then y, then x. */
static int shell(box outer, const box *inner, box parts[6])
{
    if (empty(inner)) {
        parts[0] = outer;
        return !empty(&outer);
    }
    int n = 0;
    for (int d = 2; d >= 0; d--) {
        box below = outer, above = outer;
        below.hi[d] = inner->lo[d] - 1;
        above.lo[d] = inner->hi[d] + 1;
        if (!empty(&below))
            parts[n++] = below;
        if (!empty(&above))
            parts[n++] = above;
        outer.lo[d] = inner->lo[d];
        outer.hi[d] = inner->hi[d];
    }
    return n;
}

/* rho_inv, us, vs, ws, square = |rho v|^2 / (2 rho), qs = square / rho at the points of b */
static void aux_box(const bt_cell *c, const double *u, double *aux, const box *b)
{
    for (int k = b->lo[2]; k <= b->hi[2]; k++)
        for (int j = b->lo[1]; j <= b->hi[1]; j++) {
            size_t p0 = bt_uidx(c, b->lo[0], j, k);
            for (int i = 0; i <= b->hi[0] - b->lo[0]; i++) {
                const double *v = u + BT_NVAR * (p0 + (size_t)i);
                double *x = aux + 6 * (p0 + (size_t)i);
                double ri = 1.0 / v[0];
                double sq = 0.5 * (v[1] * v[1] + v[2] * v[2] + v[3] * v[3]) * ri;
                x[0] = ri;
                x[1] = v[1] * ri;
                x[2] = v[2] * ri;
                x[3] = v[3] * ri;
                x[4] = sq;
                x[5] = sq * ri;
            }
        }
}

/* the cell's own points, and with them one ghost layer */
static box own(const bt_cell *c, int ghosts)
{
    return (box){{-ghosts, -ghosts, -ghosts},
                 {c->size[0] - 1 + ghosts, c->size[1] - 1 + ghosts, c->size[2] - 1 + ghosts}};
}

void bt_aux(const bt_cell *c, const double *u, double *aux)
{
    box b = own(c, 1);
    aux_box(c, u, aux, &b);
}

/* Adds the terms of direction d at point p (ghosted index) to acc; st = the point stride
 * of d, w = the dissipation stencil of the point's global index along d. */
static inline void flux(const bt_consts *K, const int d, const double *u, const double *aux,
                        size_t p, size_t st, const double *w, double acc[BT_NVAR])
{
    const int a = d + 1; /* momentum component along d */
    const double *um = u + BT_NVAR * (p - st), *u0 = u + BT_NVAR * p, *up = u + BT_NVAR * (p + st);
    const double *umm = u + BT_NVAR * (p - 2 * st), *upp = u + BT_NVAR * (p + 2 * st);
    const double *xm = aux + 6 * (p - st), *x0 = aux + 6 * p, *xp = aux + 6 * (p + st);
    const double t1 = K->t1[d], t2 = K->t2[d], con2 = K->con2[d];
    const double vm = xm[a], v0 = x0[a], vp = xp[a];

    acc[0] += K->dd[d][0] * t1 * (up[0] - 2.0 * u0[0] + um[0]) - t2 * (up[a] - um[a]);
    for (int m = 1; m <= 3; m++) {
        double con = m == a ? con2 * CON43 : con2;
        acc[m] += K->dd[d][m] * t1 * (up[m] - 2.0 * u0[m] + um[m]) +
                  con * (xp[m] - 2.0 * x0[m] + xm[m]) - t2 * (up[m] * vp - um[m] * vm);
    }
    acc[a] -= t2 * C2 * ((up[4] - xp[4]) - (um[4] - xm[4]));
    acc[4] += K->dd[d][4] * t1 * (up[4] - 2.0 * u0[4] + um[4]) +
              K->con3[d] * (xp[5] - 2.0 * x0[5] + xm[5]) +
              K->con4[d] * (vp * vp - 2.0 * v0 * v0 + vm * vm) +
              K->con5[d] * (up[4] * xp[0] - 2.0 * u0[4] * x0[0] + um[4] * xm[0]) -
              t2 * ((C1 * up[4] - C2 * xp[4]) * vp - (C1 * um[4] - C2 * xm[4]) * vm);
    for (int m = 0; m < BT_NVAR; m++)
        acc[m] -= K->dssp * (w[0] * umm[m] + w[1] * um[m] + w[2] * u0[m] + w[3] * up[m] +
                             w[4] * upp[m]);
}

static void operator_box(const bt_state *s, const bt_cell *c, const double *u, const double *aux,
                         const double *base, double *out, double sign, double scale,
                         const box *bx)
{
    const bt_consts *K = &s->k;
    const size_t sy = (size_t)c->gx, sz = (size_t)c->gx * (size_t)c->gy;
    for (int k = bx->lo[2]; k <= bx->hi[2]; k++) {
        const double *wz = s->dis[2] + 5 * (c->lo[2] + k);
        for (int j = bx->lo[1]; j <= bx->hi[1]; j++) {
            const double *wy = s->dis[1] + 5 * (c->lo[1] + j);
            for (int i = bx->lo[0]; i <= bx->hi[0]; i++) {
                const double *wx = s->dis[0] + 5 * (c->lo[0] + i);
                size_t p = bt_uidx(c, i, j, k), r = BT_NVAR * bt_ridx(c, i, j, k);
                double acc[BT_NVAR] = {0};
                flux(K, 0, u, aux, p, 1, wx, acc);
                flux(K, 1, u, aux, p, sy, wy, acc);
                flux(K, 2, u, aux, p, sz, wz, acc);
                const double *b = base ? base + r : out + r;
                for (int m = 0; m < BT_NVAR; m++)
                    out[r + m] = scale * (b[m] + sign * acc[m]);
            }
        }
    }
}

/* the points the equations are solved at */
static box solved(const bt_cell *c)
{
    return (box){{c->in0[0], c->in0[1], c->in0[2]}, {c->in1[0], c->in1[1], c->in1[2]}};
}

/* the solved points whose stencils stay inside the cell (the dissipation reaches two
 * points, the fluxes one): computable before the ghost planes arrive */
static box inner(const bt_cell *c)
{
    box b = solved(c);
    for (int d = 0; d < 3; d++) {
        if (!c->first[d])
            b.lo[d] = BT_GHOST;
        if (!c->last[d])
            b.hi[d] = c->size[d] - 1 - BT_GHOST;
    }
    return b;
}

void bt_operator(const bt_state *s, const bt_cell *c, const double *u, const double *aux,
                 const double *base, double *out, double sign, double scale)
{
    box b = solved(c);
    operator_box(s, c, u, aux, base, out, sign, scale, &b);
}

/* Copies the two planes next to face `side` (0 low, 1 high) along d of a cell from or
 * into buf; ghost = 1 addresses the ghost planes beyond that face instead. Returns the
 * number of doubles. */
static size_t face(const bt_cell *c, int d, int side, int ghost, double *buf, int unpack)
{
    int lo[3] = {0, 0, 0}, hi[3] = {c->size[0], c->size[1], c->size[2]};
    if (side == 0) {
        lo[d] = ghost ? -BT_GHOST : 0;
    } else {
        lo[d] = ghost ? c->size[d] : c->size[d] - BT_GHOST;
    }
    hi[d] = lo[d] + BT_GHOST;
    size_t n = 0;
    for (int k = lo[2]; k < hi[2]; k++)
        for (int j = lo[1]; j < hi[1]; j++) {
            double *u = c->u + BT_NVAR * bt_uidx(c, lo[0], j, k);
            size_t len = (size_t)(hi[0] - lo[0]) * BT_NVAR;
            if (unpack)
                memcpy(u, buf + n, len * sizeof(double));
            else
                memcpy(buf + n, u, len * sizeof(double));
            n += len;
        }
    return n;
}

/* Ghost planes of u from the neighbouring cells: one message per direction and side
 * (all of a rank's cells facing one neighbour rank travel together). Started (receives
 * posted, faces packed and sent) and finished (received faces unpacked, sends completed)
 * apart, so that the interior can be computed in between. */
static void faces_start(bt_state *s)
{
    size_t region = s->bufdoubles / 6;
    for (int d = 0; d < 3; d++)
        for (int side = 0; side < 2; side++) {
            /* receive the ghosts beyond `side` from the neighbour on that side */
            int from = side ? s->succ[d] : s->pred[d];
            size_t n = 0;
            for (int c = 0; c < s->q; c++) {
                const bt_cell *cl = &s->cells[c];
                if (!(side ? cl->last[d] : cl->first[d]))
                    n += (size_t)BT_GHOST * BT_NVAR * (size_t)cl->size[(d + 1) % 3] *
                         (size_t)cl->size[(d + 2) % 3];
            }
            bt_irecv(s, s->recvbuf + (2 * d + side) * region, n, from,
                     CT_TAG_NPB_BT_FACE + 2 * d + side, &s->face_recv[2 * d + side]);
        }
    for (int d = 0; d < 3; d++)
        for (int side = 0; side < 2; side++) {
            /* my planes next to `side` are the ghosts beyond the other side of the
             * neighbour there */
            int to = side ? s->succ[d] : s->pred[d];
            double *buf = s->sendbuf + (2 * d + side) * region;
            size_t n = 0;
            for (int c = 0; c < s->q; c++) {
                const bt_cell *cl = &s->cells[c];
                if (!(side ? cl->last[d] : cl->first[d]))
                    n += face(cl, d, side, 0, buf + n, 0);
            }
            bt_isend(s, buf, n, to, CT_TAG_NPB_BT_FACE + 2 * d + (1 - side), &s->face_send[2 * d + side]);
        }
}

static void faces_finish(bt_state *s)
{
    size_t region = s->bufdoubles / 6;
    bt_waitall(s, 6, s->face_recv);
    for (int d = 0; d < 3; d++)
        for (int side = 0; side < 2; side++) {
            double *buf = s->recvbuf + (2 * d + side) * region;
            size_t n = 0;
            for (int c = 0; c < s->q; c++) {
                bt_cell *cl = &s->cells[c];
                if (!(side ? cl->last[d] : cl->first[d]))
                    n += face(cl, d, side, 1, buf + n, 1);
            }
        }
    bt_waitall(s, 6, s->face_send);
}

/* rhs = dt (forcing + L(u)): the interior of every cell while the ghost planes travel,
 * then the points next to the cell faces */
void bt_compute_rhs(bt_state *s)
{
    const int remote = s->q > 1;
    if (remote)
        faces_start(s);
    for (int c = 0; c < s->q; c++) {
        bt_cell *cl = &s->cells[c];
        box mine = own(cl, 0), in = inner(cl);
        aux_box(cl, cl->u, cl->aux, &mine);
        operator_box(s, cl, cl->u, cl->aux, cl->forcing, cl->rhs, 1.0, s->k.dt, &in);
    }
    if (remote)
        faces_finish(s);
    for (int c = 0; c < s->q; c++) {
        bt_cell *cl = &s->cells[c];
        box parts[6], mine = own(cl, 0), in = inner(cl);
        int n = shell(own(cl, 1), &mine, parts);
        for (int i = 0; i < n; i++)
            aux_box(cl, cl->u, cl->aux, &parts[i]);
        n = shell(solved(cl), &in, parts);
        for (int i = 0; i < n; i++)
            operator_box(s, cl, cl->u, cl->aux, cl->forcing, cl->rhs, 1.0, s->k.dt, &parts[i]);
    }
}
