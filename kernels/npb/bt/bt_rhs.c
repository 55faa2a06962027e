/* bt_rhs.c - the right-hand side: ghost faces from the neighbouring cells, then
 * rhs = dt (forcing + L(u)), L = central differences of the Euler fluxes, the viscous
 * terms of the thin-layer Navier-Stokes equations and 2nd/4th-order dissipation.
 * Also the checked, timed and counted point-to-point calls of the kernel. */
#include "bt.h"

#include <string.h>

#define C1 1.4
#define C2 0.4
#define CON43 (4.0 / 3.0)

void bt_isend(bt_state *s, const double *buf, size_t n, int dest, int tag, MPI_Request *r)
{
    npb_comm_start(&s->comm);
    CT_MPI_CHECK(MPI_Isend(buf, (int)n, MPI_DOUBLE, dest, tag, s->mpi, r));
    npb_comm_stop(&s->comm);
    npb_comm_sent(&s->comm, (double)(n * sizeof(double)));
}

void bt_irecv(bt_state *s, double *buf, size_t n, int src, int tag, MPI_Request *r)
{
    npb_comm_start(&s->comm);
    CT_MPI_CHECK(MPI_Irecv(buf, (int)n, MPI_DOUBLE, src, tag, s->mpi, r));
    npb_comm_stop(&s->comm);
}

void bt_waitall(bt_state *s, int n, MPI_Request *r)
{
    npb_comm_start(&s->comm);
    ct_mpi_waitall(n, r, NULL);
    npb_comm_stop(&s->comm);
}

/* rho_inv, us, vs, ws, square = |rho v|^2 / (2 rho), qs = square / rho over the cell and
 * one ghost layer around it */
void bt_aux(const bt_cell *c, const double *u, double *aux)
{
    for (int k = -1; k <= c->size[2]; k++)
        for (int j = -1; j <= c->size[1]; j++) {
            size_t p0 = bt_uidx(c, -1, j, k);
            for (int i = -1; i <= c->size[0]; i++) {
                const double *v = u + BT_NVAR * (p0 + (size_t)(i + 1));
                double *x = aux + 6 * (p0 + (size_t)(i + 1));
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

void bt_operator(const bt_state *s, const bt_cell *c, const double *u, const double *aux,
                 const double *base, double *out, double sign, double scale)
{
    const bt_consts *K = &s->k;
    const size_t sy = (size_t)c->gx, sz = (size_t)c->gx * (size_t)c->gy;
    for (int k = c->in0[2]; k <= c->in1[2]; k++) {
        const double *wz = s->dis[2] + 5 * (c->lo[2] + k);
        for (int j = c->in0[1]; j <= c->in1[1]; j++) {
            const double *wy = s->dis[1] + 5 * (c->lo[1] + j);
            for (int i = c->in0[0]; i <= c->in1[0]; i++) {
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
 * (all of a rank's cells facing one neighbour rank travel together). */
void bt_copy_faces(bt_state *s)
{
    if (s->q == 1)
        return;
    size_t region = s->bufdoubles / 6;
    MPI_Request rr[6], sr[6];
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
                     BT_TAG_FACE + 2 * d + side, &rr[2 * d + side]);
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
            bt_isend(s, buf, n, to, BT_TAG_FACE + 2 * d + (1 - side), &sr[2 * d + side]);
        }
    bt_waitall(s, 6, rr);
    for (int d = 0; d < 3; d++)
        for (int side = 0; side < 2; side++) {
            const double *buf = s->recvbuf + (2 * d + side) * region;
            size_t n = 0;
            for (int c = 0; c < s->q; c++) {
                bt_cell *cl = &s->cells[c];
                if (!(side ? cl->last[d] : cl->first[d]))
                    n += face(cl, d, side, 1, (double *)buf + n, 1);
            }
        }
    bt_waitall(s, 6, sr);
}

void bt_compute_rhs(bt_state *s)
{
    bt_copy_faces(s);
    for (int c = 0; c < s->q; c++) {
        bt_cell *cl = &s->cells[c];
        bt_aux(cl, cl->u, cl->aux);
        bt_operator(s, cl, cl->u, cl->aux, cl->forcing, cl->rhs, 1.0, s->k.dt);
    }
}
