/* bt_solve.c - the three implicit sweeps of the ADI step: along every grid line of
 * direction d a block-tridiagonal system with 5x5 blocks
 *     A_t x_{t-1} + B_t x_t + C_t x_{t+1} = rhs_t
 * where A, B, C come from the flux Jacobian F and the viscous Jacobian N of the
 * neighbouring points (t-1, t, t+1), solved by block Gaussian elimination (Thomas):
 * forward  B_t -= A_t C'_{t-1},  r_t -= A_t r_{t-1},  C'_t = B_t^-1 C_t,  r_t = B_t^-1 r_t
 * backward r_t -= C'_t r_{t+1}.
 *
 * Lines are handled in batches along the contiguous x index (directions y and z), so
 * that every step of the recursion reads consecutive memory.
 *
 * Across cells (multipartition): stage s of the forward sweep handles the rank's cell at
 * coordinate s along d; it needs the last C' and r of the cell before it (a message
 * from the predecessor rank) and sends its own to the successor; the backward sweep runs
 * the stages in reverse, passing the first r of each cell back. Every rank works in
 * every stage; receives are posted before the sweep and sends complete while the next
 * stage computes. */
#include "bt.h"

#include <stdlib.h>
#include <string.h>

#define C1 1.4
#define C2 0.4
#define C3C4 0.1
#define C1345 (1.4 * 1.4 * 0.1)
#define CON43 (4.0 / 3.0)
#define INLINE static inline __attribute__((always_inline))

/* F (flux Jacobian) and N (viscous Jacobian) of direction d at one point, row-major
 * 5x5 each, jac[0..24] = F, jac[25..49] = N. */
INLINE void jacobians(const int d, const double *u, double *jac)
{
    const int a = d + 1;
    double *F = jac, *N = jac + 25;
    const double t1 = 1.0 / u[0], t2 = t1 * t1, t3 = t1 * t2;
    const double qs = 0.5 * (u[1] * u[1] + u[2] * u[2] + u[3] * u[3]) * t2;
    const double ua = u[a];
#pragma GCC unroll 50
    for (int e = 0; e < 50; e++) /* not memset: stores the compiler can merge */
        jac[e] = 0.0;
    /* mass: d(rho v_a) */
    F[0 * 5 + a] = 1.0;
    /* momenta */
    for (int m = 1; m <= 3; m++) {
        double *f = F + m * 5, *nj = N + m * 5;
        double coef = m == a ? CON43 * C3C4 : C3C4;
        if (m == a) {
            f[0] = -(ua * ua * t2) + C2 * qs;
            for (int o = 1; o <= 3; o++)
                f[o] = o == a ? (2.0 - C2) * ua * t1 : -C2 * u[o] * t1;
            f[4] = C2;
        } else {
            f[0] = -(ua * u[m]) * t2;
            f[a] = u[m] * t1;
            f[m] = ua * t1;
        }
        nj[0] = -coef * t2 * u[m];
        nj[m] = coef * t1;
    }
    /* energy */
    double *f = F + 20, *nj = N + 20;
    f[0] = (C2 * 2.0 * qs - C1 * u[4] * t1) * (ua * t1);
    nj[0] = -C1345 * t2 * u[4];
    for (int o = 1; o <= 3; o++) {
        double coef = (o == a ? CON43 * C3C4 : C3C4) - C1345;
        f[o] = o == a ? C1 * u[4] * t1 - C2 * (ua * ua * t2 + qs) : -C2 * (u[o] * ua) * t2;
        nj[0] -= coef * t3 * u[o] * u[o];
        nj[o] = coef * t2 * u[o];
    }
    f[4] = C1 * ua * t1;
    nj[4] = C1345 * t1;
}

/* r -= A v */
INLINE void matvec_sub(const double *A, const double *v, double *r)
{
#pragma GCC unroll 5
    for (int i = 0; i < 5; i++)
        r[i] -= A[i * 5 + 0] * v[0] + A[i * 5 + 1] * v[1] + A[i * 5 + 2] * v[2] +
                A[i * 5 + 3] * v[3] + A[i * 5 + 4] * v[4];
}

/* B -= A C */
INLINE void matmul_sub(const double *A, const double *C, double *B)
{
#pragma GCC unroll 5
    for (int i = 0; i < 5; i++)
#pragma GCC unroll 5
        for (int j = 0; j < 5; j++)
            B[i * 5 + j] -= A[i * 5 + 0] * C[0 * 5 + j] + A[i * 5 + 1] * C[1 * 5 + j] +
                            A[i * 5 + 2] * C[2 * 5 + j] + A[i * 5 + 3] * C[3 * 5 + j] +
                            A[i * 5 + 4] * C[4 * 5 + j];
}

/* Gauss-Jordan without pivoting (B is diagonally dominant): C = B^-1 C (when withc)
 * and r = B^-1 r; B is destroyed. */
INLINE void binv(double *B, double *C, double *r, const int withc)
{
#pragma GCC unroll 5
    for (int p = 0; p < 5; p++) {
        double piv = 1.0 / B[p * 5 + p];
#pragma GCC unroll 5
        for (int j = p + 1; j < 5; j++)
            B[p * 5 + j] *= piv;
        if (withc)
            for (int j = 0; j < 5; j++)
                C[p * 5 + j] *= piv;
        r[p] *= piv;
#pragma GCC unroll 5
        for (int i = 0; i < 5; i++) {
            if (i == p)
                continue;
            double f = B[i * 5 + p];
#pragma GCC unroll 5
            for (int j = p + 1; j < 5; j++)
                B[i * 5 + j] -= f * B[p * 5 + j];
            if (withc)
                for (int j = 0; j < 5; j++)
                    C[i * 5 + j] -= f * C[p * 5 + j];
            r[i] -= f * r[p];
        }
    }
}

/* How a cell's lines along d are walked: the recursion index t, the batch index b
 * (contiguous x for d = y, z; a single line for d = x) and the outer indices o1, o2;
 * u strides in ghosted points, r strides in points. */
typedef struct {
    int t0, t1, b0, nb, o10, n1, o20, n2;
    long ut, ub, u1, u2, rt, rb, r1, r2;
} walk;

static walk walk_of(const bt_cell *c, int d)
{
    long gx = c->gx, gxy = (long)c->gx * c->gy, sx = c->size[0], sxy = (long)c->size[0] * c->size[1];
    long ustr[3] = {1, gx, gxy}, rstr[3] = {1, sx, sxy};
    int tdim = d, bdim, o1dim, o2dim;
    if (d == 0) {
        bdim = -1, o1dim = 1, o2dim = 2;
    } else {
        bdim = 0, o1dim = -1, o2dim = d == 1 ? 2 : 1;
    }
    walk w = {0};
    w.t0 = c->in0[tdim], w.t1 = c->in1[tdim], w.ut = ustr[tdim], w.rt = rstr[tdim];
#define DIM(dim, o, n, us, rs)                                                                  \
    if ((dim) < 0) {                                                                           \
        o = 0, n = 1, us = 0, rs = 0;                                                          \
    } else {                                                                                   \
        o = c->in0[dim], n = c->in1[dim] - c->in0[dim] + 1, us = ustr[dim], rs = rstr[dim];    \
    }
    DIM(bdim, w.b0, w.nb, w.ub, w.rb)
    DIM(o1dim, w.o10, w.n1, w.u1, w.r1)
    DIM(o2dim, w.o20, w.n2, w.u2, w.r2)
#undef DIM
    return w;
}

static size_t bt_lines(const bt_cell *c, int d)
{
    walk w = walk_of(c, d);
    return (size_t)w.nb * (size_t)w.n1 * (size_t)w.n2;
}

/* Forward elimination of one cell. in: the predecessor's last C' and r per line (30
 * doubles per line; NULL when the cell starts the line at the boundary); out: this
 * cell's last C' and r (NULL when the cell ends the line). jac: 3 * nb * 50 doubles. */
INLINE void forward_dir(const bt_state *s, bt_cell *c, const int d, const double *in,
                        double *out, double *jac)
{
    const walk w = walk_of(c, d);
    const double tmp1 = s->k.dt * s->k.t1[d], tmp2 = s->k.dt * s->k.t2[d];
    const double *dd = s->k.dd[d];
    const long ubase = (long)bt_uidx(c, 0, 0, 0);
    size_t line = 0;
    for (int o2 = w.o20; o2 < w.o20 + w.n2; o2++)
        for (int o1 = w.o10; o1 < w.o10 + w.n1; o1++) {
            long uo = ubase + o1 * w.u1 + o2 * w.u2 + w.b0 * w.ub, ro = o1 * w.r1 + o2 * w.r2 + w.b0 * w.rb;
            for (int t = w.t0 - 1; t <= w.t0; t++)
                for (int b = 0; b < w.nb; b++)
                    jacobians(d, c->u + BT_NVAR * (uo + t * w.ut + b * w.ub),
                              jac + ((size_t)((t + 3) % 3) * w.nb + b) * 50);
            for (int t = w.t0; t <= w.t1; t++) {
                const double *Jm = jac + (size_t)((t + 2) % 3) * w.nb * 50;
                const double *J0 = jac + (size_t)(t % 3) * w.nb * 50;
                double *Jp = jac + (size_t)((t + 1) % 3) * w.nb * 50;
                for (int b = 0; b < w.nb; b++)
                    jacobians(d, c->u + BT_NVAR * (uo + (t + 1) * w.ut + b * w.ub), Jp + b * 50);
                const int end = t == w.t1 && c->last[d];
                for (int b = 0; b < w.nb; b++) {
                    const double *Fm = Jm + b * 50, *Nm = Fm + 25, *F0 = J0 + b * 50, *N0 = F0 + 25;
                    const double *Fp = Jp + b * 50, *Np = Fp + 25;
                    long rp = ro + t * w.rt + b * w.rb;
                    double *rg = c->rhs + BT_NVAR * rp, *cg = c->cp + 25 * rp;
                    /* work on local copies: no aliasing, everything in registers */
                    double B[25], A[25], C[25], r[BT_NVAR];
                    for (int m = 0; m < BT_NVAR; m++)
                        r[m] = rg[m];
                    for (int e = 0; e < 25; e++)
                        B[e] = 2.0 * tmp1 * N0[e];
                    for (int m = 0; m < 5; m++)
                        B[m * 6] += 1.0 + 2.0 * tmp1 * dd[m];
                    const double *cprev = NULL, *rprev = NULL;
                    if (t > w.t0) {
                        cprev = cg - 25 * w.rt;
                        rprev = rg - BT_NVAR * w.rt;
                    } else if (in) {
                        cprev = in + 30 * (line + (size_t)b);
                        rprev = cprev + 25;
                    }
                    if (cprev) {
                        for (int e = 0; e < 25; e++)
                            A[e] = -tmp2 * Fm[e] - tmp1 * Nm[e];
                        for (int m = 0; m < 5; m++)
                            A[m * 6] -= tmp1 * dd[m];
                        matvec_sub(A, rprev, r);
                        matmul_sub(A, cprev, B);
                    }
                    if (end) {
                        binv(B, NULL, r, 0);
                    } else {
                        for (int e = 0; e < 25; e++)
                            C[e] = tmp2 * Fp[e] - tmp1 * Np[e];
                        for (int m = 0; m < 5; m++)
                            C[m * 6] -= tmp1 * dd[m];
                        binv(B, C, r, 1);
                        memcpy(cg, C, sizeof C);
                        if (t == w.t1 && out) {
                            memcpy(out + 30 * (line + (size_t)b), C, sizeof C);
                            memcpy(out + 30 * (line + (size_t)b) + 25, r, sizeof r);
                        }
                    }
                    memcpy(rg, r, sizeof r);
                }
            }
            line += (size_t)w.nb;
        }
}

/* the same with d a constant, so that the Jacobians' structure folds */
static void forward(const bt_state *s, bt_cell *c, int d, const double *in, double *out,
                    double *jac)
{
    switch (d) {
    case 0: forward_dir(s, c, 0, in, out, jac); break;
    case 1: forward_dir(s, c, 1, in, out, jac); break;
    default: forward_dir(s, c, 2, in, out, jac); break;
    }
}

/* Back substitution of one cell. in: the successor's first r per line (NULL at the
 * end of the line); out: this cell's first r (NULL at the start of the line). */
static void backward(bt_cell *c, int d, const double *in, double *out)
{
    const walk w = walk_of(c, d);
    size_t line = 0;
    for (int o2 = w.o20; o2 < w.o20 + w.n2; o2++)
        for (int o1 = w.o10; o1 < w.o10 + w.n1; o1++) {
            long ro = o1 * w.r1 + o2 * w.r2 + w.b0 * w.rb;
            for (int t = w.t1; t >= w.t0; t--)
                for (int b = 0; b < w.nb; b++) {
                    long rp = ro + t * w.rt + b * w.rb;
                    double *rg = c->rhs + BT_NVAR * rp, r[BT_NVAR];
                    const double *next = t < w.t1 ? rg + BT_NVAR * w.rt
                                         : in     ? in + BT_NVAR * (line + (size_t)b)
                                                  : NULL;
                    if (!next && !(t == w.t0 && out))
                        continue;
                    memcpy(r, rg, sizeof r);
                    if (next)
                        matvec_sub(c->cp + 25 * rp, next, r);
                    memcpy(rg, r, sizeof r);
                    if (t == w.t0 && out)
                        memcpy(out + BT_NVAR * (line + (size_t)b), r, sizeof r);
                }
            line += (size_t)w.nb;
        }
}

void bt_solve(bt_state *s, int d)
{
    const int q = s->q;
    size_t stage = 0; /* lines per stage: the largest cell's */
    for (int c = 0; c < q; c++) {
        size_t l = bt_lines(&s->cells[c], d);
        if (l > stage)
            stage = l;
    }
    double *fsend = s->sendbuf, *frecv = s->recvbuf;
    double *bsend = s->sendbuf + (size_t)q * stage * 30, *brecv = s->recvbuf + (size_t)q * stage * 30;
    MPI_Request rr[BT_MAXQ], fr[BT_MAXQ], br[BT_MAXQ];
    for (int st = 0; st < q; st++)
        rr[st] = fr[st] = br[st] = MPI_REQUEST_NULL;

    for (int st = 1; st < q; st++) {
        const bt_cell *c = &s->cells[s->cell_at[d][st]];
        bt_irecv(s, frecv + (size_t)st * stage * 30, bt_lines(c, d) * 30, s->pred[d],
                 CT_TAG_NPB_BT_FWD + d, &rr[st]);
    }
    for (int st = 0; st < q; st++) {
        bt_cell *c = &s->cells[s->cell_at[d][st]];
        if (st > 0)
            bt_waitall(s, 1, &rr[st]);
        double *out = st < q - 1 ? fsend + (size_t)st * stage * 30 : NULL;
        forward(s, c, d, st > 0 ? frecv + (size_t)st * stage * 30 : NULL, out, s->jac);
        if (out)
            bt_isend(s, out, bt_lines(c, d) * 30, s->succ[d], CT_TAG_NPB_BT_FWD + d, &fr[st]);
    }
    for (int st = q - 2; st >= 0; st--) { /* in the order the successor sends them */
        const bt_cell *c = &s->cells[s->cell_at[d][st]];
        bt_irecv(s, brecv + (size_t)st * stage * BT_NVAR, bt_lines(c, d) * BT_NVAR, s->succ[d],
                 CT_TAG_NPB_BT_BACK + d, &rr[st]);
    }
    for (int st = q - 1; st >= 0; st--) {
        bt_cell *c = &s->cells[s->cell_at[d][st]];
        if (st < q - 1)
            bt_waitall(s, 1, &rr[st]);
        double *out = st > 0 ? bsend + (size_t)st * stage * BT_NVAR : NULL;
        backward(c, d, st < q - 1 ? brecv + (size_t)st * stage * BT_NVAR : NULL, out);
        if (out)
            bt_isend(s, out, bt_lines(c, d) * BT_NVAR, s->pred[d], CT_TAG_NPB_BT_BACK + d, &br[st]);
    }
    bt_waitall(s, q, fr);
    bt_waitall(s, q, br);
}

void bt_add(bt_state *s)
{
    for (int c = 0; c < s->q; c++) {
        bt_cell *cl = &s->cells[c];
        for (int k = cl->in0[2]; k <= cl->in1[2]; k++)
            for (int j = cl->in0[1]; j <= cl->in1[1]; j++)
                for (int i = cl->in0[0]; i <= cl->in1[0]; i++) {
                    double *u = cl->u + BT_NVAR * bt_uidx(cl, i, j, k);
                    const double *r = cl->rhs + BT_NVAR * bt_ridx(cl, i, j, k);
                    for (int m = 0; m < BT_NVAR; m++)
                        u[m] += r[m];
                }
    }
}
