/* lp_pfact.c - factorisation of one panel (jb columns) by its process column.
 *
 * The panel is seen as a stack of two parts: the top block W (the jb rows jj..jj+jb-1,
 * jb x jb) and the rows below, B (mb local rows). W lives in A on the process row that
 * owns it (the "diagonal" process) and is a replicated copy on the other processes of
 * the column, kept identical by applying the same operations with the same data:
 * every pivot search ends with a reduction that hands every process the pivot row, so
 * each can perform the row interchange on its own W. On the diagonal process W and B
 * are contiguous in A, so each BLAS call covers both at once.
 *
 * Variants (names as in HPL.dat): PFACT is the non-recursive algorithm used for
 * sub-panels of at most NBMIN columns; RFACT is the algorithm that combines the NDIV
 * sub-panels of the recursion: left-looking, Crout or right-looking. */
#include "lp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double *W;
    int ldw;
    double *B;
    int ldb, mb;
    int contiguous; /* B == W + jb with the same leading dimension */
    int jb, jj, diag;
    const lp_problem *pb;
    lp_panel *pn;
    double *red; /* reduction buffers: [|v|, global row, row(jb)] x 2 */
    MPI_Datatype rowtype;
    MPI_Op op;
} pstack;

static double *wp(const pstack *s, int r, int c) { return s->W + r + (size_t)s->ldw * c; }
static double *bp(const pstack *s, int r, int c) { return s->B + r + (size_t)s->ldb * c; }

/* Rows r0.. of the stack (W rows r0..jb-1 then B): C[:, cc..cc+nn) -= X[:, ca..ca+kk) *
 * W[ca..ca+kk, cc..cc+nn). */
static void stack_gemm(const pstack *s, int r0, int ca, int kk, int cc, int nn)
{
    if (kk <= 0 || nn <= 0)
        return;
    if (s->contiguous) {
        lp_dgemm('N', 'N', s->jb - r0 + s->mb, nn, kk, -1.0, wp(s, r0, ca), s->ldw, wp(s, ca, cc),
                 s->ldw, 1.0, wp(s, r0, cc), s->ldw);
        return;
    }
    lp_dgemm('N', 'N', s->jb - r0, nn, kk, -1.0, wp(s, r0, ca), s->ldw, wp(s, ca, cc), s->ldw, 1.0,
             wp(s, r0, cc), s->ldw);
    lp_dgemm('N', 'N', s->mb, nn, kk, -1.0, bp(s, 0, ca), s->ldb, wp(s, ca, cc), s->ldw, 1.0,
             bp(s, 0, cc), s->ldb);
}

/* Column c, rows r0..: y -= X[:, ca..ca+kk) * W[ca..ca+kk, c]. */
static void stack_gemv(const pstack *s, int r0, int ca, int kk, int c)
{
    if (kk <= 0)
        return;
    if (s->contiguous) {
        lp_dgemv('N', s->jb - r0 + s->mb, kk, -1.0, wp(s, r0, ca), s->ldw, wp(s, ca, c), 1, 1.0,
                 wp(s, r0, c), 1);
        return;
    }
    lp_dgemv('N', s->jb - r0, kk, -1.0, wp(s, r0, ca), s->ldw, wp(s, ca, c), 1, 1.0, wp(s, r0, c), 1);
    lp_dgemv('N', s->mb, kk, -1.0, bp(s, 0, ca), s->ldb, wp(s, ca, c), 1, 1.0, bp(s, 0, c), 1);
}

/* Rank-1 update of rows k+1.. and columns k+1..ce-1 with column k and row k. */
static void stack_ger(const pstack *s, int k, int ce)
{
    int nn = ce - k - 1;
    if (nn <= 0)
        return;
    if (s->contiguous) {
        lp_dger(s->jb - k - 1 + s->mb, nn, -1.0, wp(s, k + 1, k), 1, wp(s, k, k + 1), s->ldw,
                wp(s, k + 1, k + 1), s->ldw);
        return;
    }
    lp_dger(s->jb - k - 1, nn, -1.0, wp(s, k + 1, k), 1, wp(s, k, k + 1), s->ldw,
            wp(s, k + 1, k + 1), s->ldw);
    lp_dger(s->mb, nn, -1.0, bp(s, 0, k), 1, wp(s, k, k + 1), s->ldw, bp(s, 0, k + 1), s->ldb);
}

static int b_global_row(const pstack *s, int i)
{
    const lp_grid *g = s->pb->grid;
    return lp_l2g(s->pn->ii1 + i, s->pb->nb, g->myrow, g->nprow);
}

/* Reduction operator: keep the candidate with the larger |pivot|; on a tie the smaller
 * global row, so the result does not depend on the reduction order. */
static void pivot_op(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int size;
    CT_MPI_CHECK(MPI_Type_size(*dt, &size));
    size_t width = (size_t)size / sizeof(double);
    for (int e = 0; e < *len; e++) {
        double *a = (double *)in + (size_t)e * width, *b = (double *)inout + (size_t)e * width;
        if (a[0] > b[0] || (a[0] == b[0] && a[1] < b[1]))
            memcpy(b, a, width * sizeof(double));
    }
}

/* Choose the pivot of column k, interchange it into row k of the panel (whole panel
 * width) and scale the column below the diagonal. */
static void pivot_and_scale(pstack *s, int k)
{
    int jb = s->jb;
    int gpiv;
    if (s->pn->prow >= 0 && s->pb->grid->nprow == 1) {
        /* one process row: everything is local */
        int t = lp_idamax(jb - k + s->mb, wp(s, k, k), 1);
        if (t < 0)
            t = 0;
        if (t > 0)
            lp_dswap(jb, wp(s, k, 0), s->ldw, wp(s, k + t, 0), s->ldw);
        gpiv = s->jj + k + t;
    } else {
        double *cand = s->red, *res = s->red + jb + 2;
        cand[0] = -1.0;
        cand[1] = INFINITY;
        if (s->diag) { /* contiguous W+B */
            int t = lp_idamax(jb - k + s->mb, wp(s, k, k), 1);
            if (t >= 0) {
                cand[0] = fabs(*wp(s, k + t, k));
                if (t < jb - k) {
                    cand[1] = s->jj + k + t;
                    for (int c = 0; c < jb; c++)
                        cand[2 + c] = *wp(s, k + t, c);
                } else {
                    int i = t - (jb - k);
                    cand[1] = b_global_row(s, i);
                    for (int c = 0; c < jb; c++)
                        cand[2 + c] = *bp(s, i, c);
                }
            }
        } else if (s->mb > 0) {
            int i = lp_idamax(s->mb, bp(s, 0, k), 1);
            cand[0] = fabs(*bp(s, i, k));
            cand[1] = b_global_row(s, i);
            for (int c = 0; c < jb; c++)
                cand[2 + c] = *bp(s, i, c);
        }
        MPI_Request rq;
        CT_MPI_CHECK(MPI_Iallreduce(cand, res, 1, s->rowtype, s->op, s->pb->grid->col, &rq));
        lp_count_send((double)(jb + 2) * sizeof(double));
        lp_wait_all(1, &rq);
        gpiv = (int)res[1];
        if (gpiv >= s->jj && gpiv < s->jj + jb) {
            int r = gpiv - s->jj;
            if (r != k)
                lp_dswap(jb, wp(s, k, 0), s->ldw, wp(s, r, 0), s->ldw);
        } else {
            const lp_grid *g = s->pb->grid;
            if (lp_owner(gpiv, s->pb->nb, g->nprow) == g->myrow) {
                int i = lp_g2l(gpiv, s->pb->nb, g->nprow) - s->pn->ii1;
                for (int c = 0; c < jb; c++)
                    *bp(s, i, c) = *wp(s, k, c);
            }
            for (int c = 0; c < jb; c++)
                *wp(s, k, c) = res[2 + c];
        }
    }
    s->pn->ipiv[k] = gpiv;
    double piv = *wp(s, k, k);
    if (piv != 0.0) {
        /* reciprocal scaling unless it would overflow */
        if (fabs(piv) >= 2.2250738585072014e-308) {
            double inv = 1.0 / piv;
            if (s->contiguous)
                lp_dscal(jb - k - 1 + s->mb, inv, wp(s, k + 1, k), 1);
            else {
                lp_dscal(jb - k - 1, inv, wp(s, k + 1, k), 1);
                lp_dscal(s->mb, inv, bp(s, 0, k), 1);
            }
        } else {
            for (int r = k + 1; r < jb; r++)
                *wp(s, r, k) /= piv;
            for (int i = 0; i < s->mb; i++)
                *bp(s, i, k) /= piv;
        }
    }
}

/* Non-recursive factorisations of columns [c0, c0+w). */
static void pfact_right(pstack *s, int c0, int w)
{
    for (int k = c0; k < c0 + w; k++) {
        pivot_and_scale(s, k);
        stack_ger(s, k, c0 + w);
    }
}

static void pfact_left(pstack *s, int c0, int w)
{
    for (int k = c0; k < c0 + w; k++) {
        if (k > c0) {
            lp_dtrsv('L', 'N', 'U', k - c0, wp(s, c0, c0), s->ldw, wp(s, c0, k), 1);
            stack_gemv(s, k, c0, k - c0, k);
        }
        pivot_and_scale(s, k);
    }
}

static void pfact_crout(pstack *s, int c0, int w)
{
    for (int k = c0; k < c0 + w; k++) {
        stack_gemv(s, k, c0, k - c0, k);
        pivot_and_scale(s, k);
        int nn = c0 + w - k - 1;
        if (k > c0 && nn > 0)
            lp_dgemv('T', k - c0, nn, -1.0, wp(s, c0, k + 1), s->ldw, wp(s, k, c0), s->ldw, 1.0,
                     wp(s, k, k + 1), s->ldw);
    }
}

/* Recursive factorisation of columns [c0, c0+w): NDIV pieces, each factored
 * recursively, combined left-looking, Crout or right-looking (RFACT). */
static void rfact(pstack *s, int c0, int w)
{
    const lp_algo *al = s->pb->algo;
    if (w <= al->nbmin || w < 2) {
        if (al->pfact == LP_LEFT)
            pfact_left(s, c0, w);
        else if (al->pfact == LP_CROUT)
            pfact_crout(s, c0, w);
        else
            pfact_right(s, c0, w);
        return;
    }
    int ws = w / al->ndiv;
    if (ws < al->nbmin)
        ws = al->nbmin;
    if (ws < 1)
        ws = 1;
    int ce = c0 + w;
    for (int p0 = c0; p0 < ce; p0 += ws) {
        int pw = ce - p0 < ws ? ce - p0 : ws;
        int right = ce - (p0 + pw);
        if (al->rfact == LP_LEFT && p0 > c0) {
            lp_dtrsm('L', 'L', 'N', 'U', p0 - c0, pw, 1.0, wp(s, c0, c0), s->ldw, wp(s, c0, p0),
                     s->ldw);
            stack_gemm(s, p0, c0, p0 - c0, p0, pw);
        } else if (al->rfact == LP_CROUT && p0 > c0) {
            stack_gemm(s, p0, c0, p0 - c0, p0, pw);
        }
        rfact(s, p0, pw);
        if (right > 0 && al->rfact == LP_RIGHT) {
            lp_dtrsm('L', 'L', 'N', 'U', pw, right, 1.0, wp(s, p0, p0), s->ldw, wp(s, p0, p0 + pw),
                     s->ldw);
            stack_gemm(s, p0 + pw, p0, pw, p0 + pw, right);
        } else if (right > 0 && al->rfact == LP_CROUT) {
            if (p0 > c0)
                lp_dgemm('N', 'N', pw, right, p0 - c0, -1.0, wp(s, p0, c0), s->ldw, wp(s, c0, p0 + pw),
                         s->ldw, 1.0, wp(s, p0, p0 + pw), s->ldw);
            lp_dtrsm('L', 'L', 'N', 'U', pw, right, 1.0, wp(s, p0, p0), s->ldw, wp(s, p0, p0 + pw),
                     s->ldw);
        }
    }
}

/* Factor panel pn (called by every process of its column), then pack what the row
 * broadcast carries: W, the pivots and this process row's L rows. */
void lp_pfact(lp_problem *pb, lp_panel *pn)
{
    const lp_grid *g = pb->grid;
    ct_phase_start(&lp_phases, LP_T_PFACT);
    int jb = pn->jb;
    pstack s = {.jb = jb, .jj = pn->jj, .pb = pb, .pn = pn};
    s.diag = g->myrow == pn->prow;
    double *acol = pb->a + (size_t)pb->lda * pn->lcol;
    s.B = acol + pn->ii1;
    s.ldb = pb->lda;
    s.mb = pn->mp;
    if (s.diag) {
        s.W = acol + pn->ii0;
        s.ldw = pb->lda;
    } else {
        s.W = pn->W;
        s.ldw = jb;
    }
    s.contiguous = s.diag;
    if (g->nprow > 1) {
        /* every process of the column starts from the diagonal process's top block */
        if (s.diag)
            for (int c = 0; c < jb; c++)
                memcpy(pn->W + (size_t)jb * c, acol + pn->ii0 + (size_t)pb->lda * c,
                       (size_t)jb * sizeof(double));
        MPI_Request rq;
        CT_MPI_CHECK(MPI_Ibcast(pn->W, jb * jb, MPI_DOUBLE, pn->prow, g->col, &rq));
        if (s.diag)
            lp_count_send((double)jb * jb * sizeof(double));
        lp_wait_all(1, &rq);
        s.red = ct_mpi_alloc(2 * (size_t)(jb + 2) * sizeof(double), "the pivot search buffers");
        CT_MPI_CHECK(MPI_Type_contiguous(jb + 2, MPI_DOUBLE, &s.rowtype));
        CT_MPI_CHECK(MPI_Type_commit(&s.rowtype));
        CT_MPI_CHECK(MPI_Op_create(pivot_op, 1, &s.op));
    }
    rfact(&s, 0, jb);
    if (g->nprow > 1) {
        CT_MPI_CHECK(MPI_Op_free(&s.op));
        CT_MPI_CHECK(MPI_Type_free(&s.rowtype));
        free(s.red);
    }
    /* pack: W (from A on the diagonal process), pivots, L rows */
    if (s.diag)
        for (int c = 0; c < jb; c++)
            memcpy(pn->W + (size_t)jb * c, acol + pn->ii0 + (size_t)pb->lda * c,
                   (size_t)jb * sizeof(double));
    double *piv = pn->W + (size_t)jb * jb;
    for (int k = 0; k < jb; k++)
        piv[k] = (double)pn->ipiv[k];
    double *l = piv + jb;
    if (g->npcol > 1)
        for (int c = 0; c < jb; c++)
            memcpy(l + (size_t)pn->mp * c, acol + pn->ii1 + (size_t)pb->lda * c,
                   (size_t)pn->mp * sizeof(double));
    /* the owner column uses L where it lies, in A */
    pn->L = acol + pn->ii1;
    pn->ldl = pb->lda;
    pn->have_data = 1;
    ct_phase_stop(&lp_phases, LP_T_PFACT);
}
