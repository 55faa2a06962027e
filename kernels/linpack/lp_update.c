/* lp_update.c - applying a factored panel to a range of local columns: row swaps,
 * U = L11^-1 U, trailing update A22 -= L21 U.
 *
 * One process row (P = 1): the interchanges are local and everything happens in place.
 *
 * Several process rows: the panel's interchanges, applied in sequence, move jb rows into
 * the top block (the rows of U) and move some original top-block rows out to the rows
 * they replaced. Both sets follow from the pivot vector alone, so every process knows
 * who owns what without asking. U (stored transposed, nc x jb, so that each of its rows
 * is contiguous) is then assembled on every process row by one of HPL's swap algorithms:
 *   bin-exch  a binary-exchange (recursive doubling) all-gather of the rows of U among
 *             the P process rows (with a fold-in/fold-out step when P is not a power of 2);
 *   long      the rows of U are gathered on the top block's process row, which then
 *             broadcasts U with the spread-roll program of lp_bcast.c;
 *   mix       bin-exch when the number of columns is at most the swapping threshold,
 *             long otherwise.
 * The displaced top-block rows go from the top block's process row straight to their
 * owners in both cases. */
#include "lp.h"

#include <stdlib.h>
#include <string.h>

void lp_panel_setup(lp_panel *pn, const lp_problem *pb, int k)
{
    const lp_grid *g = pb->grid;
    int nb = pb->nb;
    pn->k = k;
    pn->jj = k * nb;
    pn->jb = pb->n - pn->jj < nb ? pb->n - pn->jj : nb;
    pn->prow = k % g->nprow;
    pn->pcol = k % g->npcol;
    pn->ii0 = lp_numroc(pn->jj, nb, g->myrow, g->nprow);
    pn->ii1 = lp_numroc(pn->jj + pn->jb, nb, g->myrow, g->nprow);
    pn->mp = pb->mloc - pn->ii1;
    pn->lcol = lp_numroc(pn->jj, nb, g->mycol, g->npcol);
    pn->W = pn->buf;
    pn->count = (size_t)pn->jb * pn->jb + pn->jb + (size_t)pn->mp * pn->jb;
    pn->have_data = 0;
}

void lp_panel_unpack(lp_panel *pn)
{
    int jb = pn->jb;
    const double *piv = pn->buf + (size_t)jb * jb;
    for (int k = 0; k < jb; k++)
        pn->ipiv[k] = (int)piv[k];
    pn->L = pn->buf + (size_t)jb * jb + jb;
    pn->ldl = pn->mp > 0 ? pn->mp : 1;
}

/* Columns per piece of a bulk update of ncols columns, between which broadcasts are
 * progressed so that a ring forwards a panel while its forwarder updates. Each piece
 * costs the BLAS a fresh packing of the tall L panel, a memory-bound pass of ~1.5 %
 * of a 2048-column piece's multiply; a process row of at most two processes forwards
 * nothing (the panel's owner sends to the one other process, which takes it when it
 * needs it), so there the update is one DGEMM over all its columns. CT_LINPACK_CHUNK
 * (read and checked with the command line) sets the piece, at least NB. */
static int update_chunk(const lp_problem *pb, int ncols)
{
    int asked = pb->algo->chunk;
    if (!asked && pb->grid->npcol <= 2)
        return ncols;
    int nb = pb->nb, cols = asked ? asked : 2048;
    if (cols < nb)
        cols = nb;
    return cols / nb * nb;
}

/* The update's two BLAS calls, timed apart (lp_parts) with the DGEMM's flops counted,
 * so that its rate can be set beside a square DGEMM's. */
static void timed_dtrsm(char side, char ta, int m, int n, const double *w, int ldw, double *b,
                        int ldb)
{
    ct_phase_start(&lp_parts, LP_P_DTRSM);
    lp_dtrsm(side, 'L', ta, 'U', m, n, 1.0, w, ldw, b, ldb);
    ct_phase_stop(&lp_parts, LP_P_DTRSM);
}

static void timed_dgemm(char tb, int m, int n, int k, const double *l, int ldl, const double *u,
                        int ldu, double *c, int ldc)
{
    ct_phase_start(&lp_parts, LP_P_DGEMM);
    lp_dgemm('N', tb, m, n, k, -1.0, l, ldl, u, ldu, 1.0, c, ldc);
    ct_phase_stop(&lp_parts, LP_P_DGEMM);
    if (m > 0 && n > 0)
        ct_phase_add(&lp_counts, LP_C_DGEMM_FLOPS, 2.0 * m * n * k);
}

/* ---- one process row ---- */

/* The panel's row interchanges, in order, on columns [0, nc) of a. Each pivot row lies
 * anywhere below the panel, a cache miss in every column; taking the interchanges row
 * by row across SWAP_COLS columns at a time keeps that many independent misses in
 * flight, where a column-by-column loop waits for each in turn. */
enum { SWAP_COLS = 8 };

static void swap_local(const lp_panel *pn, double *a, int lda, int nc)
{
    for (int c0 = 0; c0 < nc; c0 += SWAP_COLS) {
        int w = nc - c0 < SWAP_COLS ? nc - c0 : SWAP_COLS;
        double *block = a + (size_t)lda * c0;
        for (int k = 0; k < pn->jb; k++) {
            int r = pn->ipiv[k];
            if (r == pn->jj + k)
                continue;
            double *x = block + pn->jj + k, *y = block + r;
            for (int c = 0; c < w; c++) {
                double t = x[(size_t)lda * c];
                x[(size_t)lda * c] = y[(size_t)lda * c];
                y[(size_t)lda * c] = t;
            }
        }
    }
}

static void update_local(lp_problem *pb, lp_panel *pn, int lc0, int lc1, int chunked)
{
    int jb = pn->jb, lda = pb->lda;
    int chunk = chunked ? update_chunk(pb, lc1 - lc0) : lc1 - lc0;
    for (int c0 = lc0; c0 < lc1; c0 += chunk) {
        int nc = lc1 - c0 < chunk ? lc1 - c0 : chunk;
        double *a = pb->a + (size_t)lda * c0;
        ct_phase_start(&lp_phases, LP_T_SWAP);
        swap_local(pn, a, lda, nc);
        ct_phase_stop(&lp_phases, LP_T_SWAP);
        ct_phase_start(&lp_phases, LP_T_UPDATE);
        timed_dtrsm('L', 'N', jb, nc, pn->W, jb, a + pn->jj, lda);
        timed_dgemm('N', pn->mp, nc, jb, pn->L, pn->ldl, a + pn->jj, lda, a + pn->ii1, lda);
        ct_phase_stop(&lp_phases, LP_T_UPDATE);
        if (chunked)
            lp_progress_all();
    }
}

/* ---- several process rows ---- */

/* Net effect of the panel's interchanges: pos[i] receives the original row src[i].
 * Entries 0..jb-1 are the top block (the rows of U), the rest the rows outside it. */
static void compute_moves(const lp_panel *pn, int *pos, int *src, int *npos)
{
    int n = pn->jb;
    for (int k = 0; k < pn->jb; k++) {
        pos[k] = pn->jj + k;
        src[k] = pn->jj + k;
    }
    for (int k = 0; k < pn->jb; k++) {
        int p2 = pn->ipiv[k];
        if (p2 == pn->jj + k)
            continue;
        int i2 = -1;
        if (p2 < pn->jj + pn->jb)
            i2 = p2 - pn->jj;
        else
            for (int i = pn->jb; i < n; i++)
                if (pos[i] == p2) {
                    i2 = i;
                    break;
                }
        if (i2 < 0) {
            i2 = n++;
            pos[i2] = p2;
            src[i2] = p2;
        }
        int t = src[k];
        src[k] = src[i2];
        src[i2] = t;
    }
    *npos = n;
}

static void pack_row(const lp_problem *pb, int grow, int lc0, int nc, double *dst)
{
    const lp_grid *g = pb->grid;
    const double *a = pb->a + lp_g2l(grow, pb->nb, g->nprow) + (size_t)pb->lda * lc0;
    for (int c = 0; c < nc; c++)
        dst[c] = a[(size_t)pb->lda * c];
}

static void unpack_row(lp_problem *pb, int grow, int lc0, int nc, const double *srcbuf)
{
    const lp_grid *g = pb->grid;
    double *a = pb->a + lp_g2l(grow, pb->nb, g->nprow) + (size_t)pb->lda * lc0;
    for (int c = 0; c < nc; c++)
        a[(size_t)pb->lda * c] = srcbuf[c];
}

static int row_owner(const lp_problem *pb, int grow)
{
    return lp_owner(grow, pb->nb, pb->grid->nprow);
}

/* Recursive-doubling all-gather of the columns of Ut (nc x jb) that each process row
 * holds; own[k] is the process row that contributed column k. */
static void binexch_allgather(lp_problem *pb, double *ut, int nc, int jb, const int *own,
                              double *sbuf, double *rbuf)
{
    const lp_grid *g = pb->grid;
    int P = g->nprow, me = g->myrow;
    int m2 = 1;
    while (m2 * 2 <= P)
        m2 *= 2;
    size_t ncz = (size_t)nc;
    MPI_Request rq[2];
    /* fold-in: processes m2..P-1 hand their columns to me - m2 */
    if (me >= m2) {
        int cnt = 0;
        for (int k = 0; k < jb; k++)
            if (own[k] == me)
                memcpy(sbuf + ncz * cnt++, ut + ncz * k, ncz * sizeof(double));
        CT_MPI_CHECK(MPI_Isend(sbuf, (int)(ncz * cnt), MPI_DOUBLE, me - m2,
                               CT_TAG_LP_SWAP_FOLD_IN, g->col, &rq[0]));
        lp_count_send((double)ncz * cnt * sizeof(double));
        lp_wait_all(1, rq);
    } else if (me + m2 < P) {
        int cnt = 0;
        for (int k = 0; k < jb; k++)
            cnt += own[k] == me + m2;
        CT_MPI_CHECK(MPI_Irecv(rbuf, (int)(ncz * cnt), MPI_DOUBLE, me + m2,
                               CT_TAG_LP_SWAP_FOLD_IN, g->col, &rq[0]));
        lp_wait_all(1, rq);
        cnt = 0;
        for (int k = 0; k < jb; k++)
            if (own[k] == me + m2)
                memcpy(ut + ncz * k, rbuf + ncz * cnt++, ncz * sizeof(double));
    }
    if (me < m2) {
        for (int d = 1; d < m2; d *= 2) {
            int partner = me ^ d;
            int scnt = 0, rcnt = 0;
            for (int k = 0; k < jb; k++) {
                int f = own[k] >= m2 ? own[k] - m2 : own[k];
                if (f / d == me / d)
                    memcpy(sbuf + ncz * scnt++, ut + ncz * k, ncz * sizeof(double));
                else if (f / d == partner / d)
                    rcnt++;
            }
            CT_MPI_CHECK(MPI_Irecv(rbuf, (int)(ncz * rcnt), MPI_DOUBLE, partner,
                                   CT_TAG_LP_SWAP_EXCHANGE, g->col, &rq[0]));
            CT_MPI_CHECK(MPI_Isend(sbuf, (int)(ncz * scnt), MPI_DOUBLE, partner,
                                   CT_TAG_LP_SWAP_EXCHANGE, g->col, &rq[1]));
            lp_count_send((double)ncz * scnt * sizeof(double));
            lp_wait_all(2, rq);
            rcnt = 0;
            for (int k = 0; k < jb; k++) {
                int f = own[k] >= m2 ? own[k] - m2 : own[k];
                if (f / d == partner / d)
                    memcpy(ut + ncz * k, rbuf + ncz * rcnt++, ncz * sizeof(double));
            }
        }
    }
    /* fold-out */
    if (me >= m2) {
        CT_MPI_CHECK(MPI_Irecv(ut, (int)(ncz * jb), MPI_DOUBLE, me - m2,
                               CT_TAG_LP_SWAP_FOLD_OUT, g->col, &rq[0]));
        lp_wait_all(1, rq);
    } else if (me + m2 < P) {
        CT_MPI_CHECK(MPI_Isend(ut, (int)(ncz * jb), MPI_DOUBLE, me + m2,
                               CT_TAG_LP_SWAP_FOLD_OUT, g->col, &rq[0]));
        lp_count_send((double)ncz * jb * sizeof(double));
        lp_wait_all(1, rq);
    }
}

/* Gather the columns of Ut on process row root, then broadcast Ut by spread-roll. */
static void long_gather_bcast(lp_problem *pb, double *ut, int nc, int jb, const int *own, int root,
                              double *sbuf, double *rbuf)
{
    const lp_grid *g = pb->grid;
    int P = g->nprow, me = g->myrow;
    size_t ncz = (size_t)nc;
    if (me != root) {
        int cnt = 0;
        for (int k = 0; k < jb; k++)
            if (own[k] == me)
                memcpy(sbuf + ncz * cnt++, ut + ncz * k, ncz * sizeof(double));
        if (cnt > 0) {
            MPI_Request rq;
            CT_MPI_CHECK(MPI_Isend(sbuf, (int)(ncz * cnt), MPI_DOUBLE, root,
                                   CT_TAG_LP_SWAP_GATHER, g->col, &rq));
            lp_count_send((double)ncz * cnt * sizeof(double));
            lp_wait_all(1, &rq);
        }
    } else {
        MPI_Request *rq = ct_mpi_alloc((size_t)P * sizeof *rq, "the row-swap requests");
        size_t *at = ct_mpi_alloc((size_t)P * sizeof *at, "the row-swap offsets");
        int nrq = 0;
        size_t off = 0;
        for (int r = 0; r < P; r++) {
            int cnt = 0;
            for (int k = 0; k < jb; k++)
                cnt += own[k] == r;
            at[r] = off;
            if (r != root && cnt > 0)
                CT_MPI_CHECK(MPI_Irecv(rbuf + off, (int)(ncz * cnt), MPI_DOUBLE, r,
                                       CT_TAG_LP_SWAP_GATHER, g->col, &rq[nrq++]));
            off += ncz * cnt;
        }
        lp_wait_all(nrq, rq);
        for (int r = 0; r < P; r++) {
            if (r == root)
                continue;
            size_t o = at[r];
            for (int k = 0; k < jb; k++)
                if (own[k] == r) {
                    memcpy(ut + ncz * k, rbuf + o, ncz * sizeof(double));
                    o += ncz;
                }
        }
        free(rq);
        free(at);
    }
    lp_bcprog *pr = ct_mpi_alloc(sizeof *pr, "the U broadcast program");
    lp_bcprog_build(pr, LP_LONG, root, me, P, ncz * jb);
    lp_bcprog_start(pr, ut, g->col, CT_TAG_LP_SWAP_BCAST);
    while (!lp_bcprog_test(pr)) {
        lp_progress_all();
        lp_idle();
    }
    free(pr);
}

static void update_distributed(lp_problem *pb, lp_panel *pn, int lc0, int lc1, int chunked)
{
    const lp_grid *g = pb->grid;
    int jb = pn->jb, nc = lc1 - lc0, me = g->myrow, lda = pb->lda;
    size_t ncz = (size_t)nc;
    ct_phase_start(&lp_phases, LP_T_SWAP);
    int *pos = ct_mpi_alloc((size_t)(2 * jb + 2) * 3 * sizeof(int), "the row-swap map");
    int *src = pos + 2 * jb + 2, *own = src + 2 * jb + 2;
    int npos;
    compute_moves(pn, pos, src, &npos);
    double *ut = pb->work; /* 4 nc jb + 4 doubles: nc <= nloc, jb <= nb (lp_problem_mem) */
    double *disp = ut + ncz * jb, *sbuf = disp + ncz * jb, *rbuf = sbuf + ncz * jb;
    /* rows of U I hold (still in their original place) */
    for (int k = 0; k < jb; k++) {
        own[k] = row_owner(pb, src[k]);
        if (own[k] == me)
            pack_row(pb, src[k], lc0, nc, ut + ncz * k);
    }
    /* displaced top-block rows: packed by the top block's process row, per destination */
    int ndisp = 0;
    MPI_Request *rq = ct_mpi_alloc((size_t)(g->nprow + 1) * sizeof *rq, "the row-swap requests");
    int nrq = 0;
    if (me == pn->prow) {
        for (int r = 0; r < g->nprow; r++) {
            int first = ndisp;
            for (int i = jb; i < npos; i++)
                if (src[i] != pos[i] && row_owner(pb, pos[i]) == r)
                    pack_row(pb, src[i], lc0, nc, disp + ncz * ndisp++);
            if (r != me && ndisp > first) {
                CT_MPI_CHECK(MPI_Isend(disp + ncz * first, (int)(ncz * (ndisp - first)),
                                       MPI_DOUBLE, r, CT_TAG_LP_SWAP_DISPLACED, g->col,
                                       &rq[nrq++]));
                lp_count_send((double)ncz * (ndisp - first) * sizeof(double));
            }
        }
    } else {
        int cnt = 0;
        for (int i = jb; i < npos; i++)
            cnt += src[i] != pos[i] && row_owner(pb, pos[i]) == me;
        if (cnt > 0)
            CT_MPI_CHECK(MPI_Irecv(disp, (int)(ncz * cnt), MPI_DOUBLE, pn->prow,
                                   CT_TAG_LP_SWAP_DISPLACED, g->col, &rq[nrq++]));
    }
    int use_binexch = pb->algo->swap == LP_SWAP_BINEXCH ||
                      (pb->algo->swap == LP_SWAP_MIX && nc <= pb->algo->swap_threshold);
    if (use_binexch)
        binexch_allgather(pb, ut, nc, jb, own, sbuf, rbuf);
    else
        long_gather_bcast(pb, ut, nc, jb, own, pn->prow, sbuf, rbuf);
    lp_wait_all(nrq, rq);
    /* write the displaced rows I own (the top block's row finds its own at the front of
     * its destination-ordered buffer) */
    {
        size_t o = 0;
        if (me == pn->prow) {
            for (int r = 0; r < me; r++)
                for (int i = jb; i < npos; i++)
                    o += (src[i] != pos[i] && row_owner(pb, pos[i]) == r) ? ncz : 0;
        }
        for (int i = jb; i < npos; i++)
            if (src[i] != pos[i] && row_owner(pb, pos[i]) == me) {
                unpack_row(pb, pos[i], lc0, nc, disp + o);
                o += ncz;
            }
    }
    free(rq);
    ct_phase_stop(&lp_phases, LP_T_SWAP);
    ct_phase_start(&lp_phases, LP_T_UPDATE);
    /* U = L11^-1 U, i.e. Ut = Ut L11^-T */
    timed_dtrsm('R', 'T', nc, jb, pn->W, jb, ut, nc);
    if (me == pn->prow)
        for (int k = 0; k < jb; k++)
            unpack_row(pb, pn->jj + k, lc0, nc, ut + ncz * k);
    int chunk = chunked ? update_chunk(pb, nc) : nc;
    for (int c0 = 0; c0 < nc; c0 += chunk) {
        int w = nc - c0 < chunk ? nc - c0 : chunk;
        timed_dgemm('T', pn->mp, w, jb, pn->L, pn->ldl, ut + c0, nc,
                    pb->a + pn->ii1 + (size_t)lda * (lc0 + c0), lda);
        if (chunked)
            lp_progress_all();
    }
    ct_phase_stop(&lp_phases, LP_T_UPDATE);
    free(pos);
}

void lp_update(lp_problem *pb, lp_panel *pn, int lc0, int lc1, int chunked)
{
    if (lc1 <= lc0)
        return;
    if (pb->grid->nprow == 1)
        update_local(pb, pn, lc0, lc1, chunked);
    else
        update_distributed(pb, pn, lc0, lc1, chunked);
}
