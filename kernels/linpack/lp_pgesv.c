/* lp_pgesv.c - right-looking LU with look-ahead of depth d, then back substitution.
 *
 * Panel k is factored by its process column once every earlier panel has been applied
 * to its columns. With look-ahead depth d, the owner of panel t = j + d brings block t
 * up to date (applies the panels it has not seen yet), factors it and starts its
 * broadcast *before* everyone applies panel j to the rest of the matrix ("bulk" update
 * of the columns right of the look-ahead window). Block b therefore receives panels
 * 0..b-d-1 in bulk updates and panels b-d..b-1 when it is brought up. Depth 0 is the
 * plain right-looking algorithm. The b column (global column N) is never factored: it
 * receives every panel, in bulk or, when it shares the last block with the last panel,
 * right after that panel's factorisation.
 *
 * Broadcast buffers live in depth+2 slots (allocated with the matrix, lp_problem_alloc);
 * a slot is reused only after its broadcast has completed (every send done), which the
 * progress engine guarantees eventually. */
#define _DEFAULT_SOURCE /* madvise */
#include "lp.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void lp_problem_init(lp_problem *pb, const lp_algo *al, const lp_grid *g)
{
    memset(pb, 0, sizeof *pb);
    pb->algo = al;
    pb->grid = g;
    pb->n = al->n;
    pb->nb = al->nb;
    pb->mloc = lp_numroc(al->n, al->nb, g->myrow, g->nprow);
    pb->nloc = lp_numroc(al->n + 1, al->nb, g->mycol, g->npcol);
    int lda = pb->mloc > 0 ? pb->mloc : 1;
    lda = (lda + 7) / 8 * 8;
    if (lda % 512 == 0)
        lda += 8; /* avoid a power-of-two stride between columns */
    pb->lda = lda;
    pb->nslots = al->depth + 2;
}

/* One slot's broadcast buffer [W jb*jb | ipiv jb | L mp*jb], at its largest. */
static size_t panel_doubles(const lp_problem *pb)
{
    size_t nb = (size_t)pb->nb;
    return nb * nb + nb + (size_t)pb->mloc * nb + 1;
}

/* In doubles, so that a combination far too large for memory cannot overflow. */
lp_mem lp_problem_mem(const lp_problem *pb)
{
    const double d = sizeof(double);
    lp_mem m;
    m.matrix = ceil((double)pb->lda * (pb->nloc > 0 ? pb->nloc : 1) * d / 64) * 64;
    m.x = ((double)pb->n + 1) * d;
    /* the slots, their broadcast buffers and pivot vectors: one block */
    m.panels = pb->nslots * (sizeof(lp_panel) + (double)panel_doubles(pb) * d +
                             ((double)pb->nb + 1) * sizeof(int));
    /* U (transposed), displaced rows and two message buffers of update_distributed */
    m.work = pb->grid->nprow > 1 ? (4.0 * pb->nloc * pb->nb + 4) * d : 0.0;
    m.total = m.matrix + m.x + m.panels + m.work;
    return m;
}

/* Asks for 2 MB pages on the whole pages of [p, p + bytes), before anything touches
 * them. With 4 KB pages every column of a large local matrix lies on pages of its own,
 * and the row swaps and the trailing update's stores into C, which walk across columns,
 * miss the TLB at almost every column; Debian's kernel gives transparent huge pages only
 * on request (THP "madvise"). Where it refuses, the matrix simply keeps small pages. */
static void ask_huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t page = 4096;
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)p + bytes) & ~(page - 1);
    if (p && hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

void lp_problem_alloc(lp_problem *pb)
{
    lp_mem m = lp_problem_mem(pb);
    ct_alloc_failure f = {0};
    pb->a = ct_mpi_try_alloc(&f, (size_t)m.matrix, "the local matrix");
    ask_huge_pages(pb->a, (size_t)m.matrix);
    pb->x = ct_mpi_try_alloc(&f, (size_t)m.x, "the solution vector");
    if (m.work > 0)
        pb->work = ct_mpi_try_alloc(&f, (size_t)m.work, "the row-swap work buffer");
    int inject = pb->algo->fail_alloc_rank == pb->grid->rank;
    pb->slot = inject ? NULL : ct_mpi_try_alloc(&f, (size_t)m.panels, "the panel buffers");
    if (inject && !f.what) /* --inject-alloc-failure: as if that malloc had failed */
        f = (ct_alloc_failure){"the panel buffers", m.panels};
    ct_mpi_agree(pb->grid->all, &f);
    memset(pb->slot, 0, (size_t)pb->nslots * sizeof *pb->slot);
    size_t per = panel_doubles(pb);
    double *buf = (double *)(pb->slot + pb->nslots);
    int *ipiv = (int *)(buf + per * (size_t)pb->nslots);
    for (int i = 0; i < pb->nslots; i++) {
        pb->slot[i].buf = buf + per * (size_t)i;
        pb->slot[i].ipiv = ipiv + ((size_t)pb->nb + 1) * (size_t)i;
    }
}

void lp_problem_free(lp_problem *pb)
{
    free(pb->slot);
    free(pb->a);
    free(pb->x);
    free(pb->work);
}

static void wait_data(lp_panel *pn)
{
    if (pn->have_data)
        return;
    ct_phase_start(&lp_phases, LP_T_WAIT);
    while (!pn->have_data) {
        lp_bcast_progress(pn);
        if (!pn->have_data) {
            lp_progress_all();
            lp_idle();
        }
    }
    ct_phase_stop(&lp_phases, LP_T_WAIT);
}

static void wait_finished(lp_panel *pn)
{
    ct_phase_start(&lp_phases, LP_T_WAIT);
    while (pn->active && !pn->finished) {
        lp_progress_all();
        lp_idle();
    }
    pn->active = 0;
    ct_phase_stop(&lp_phases, LP_T_WAIT);
}

static void inject_fault(lp_problem *pb, const lp_panel *pn)
{
    /* Corrupt the stored U11 diagonal after the trailing matrix has been updated with
     * the correct panel: the back substitution then solves a different system. */
    const lp_grid *g = pb->grid;
    if (g->myrow == pn->prow && g->mycol == pn->pcol)
        pb->a[pn->ii0 + (size_t)pb->lda * pn->lcol] += 1.0;
}

static int block_local_end(const lp_problem *pb, int t)
{
    int gend = (t + 1) * pb->nb;
    if (gend > pb->n + 1)
        gend = pb->n + 1;
    return lp_numroc(gend, pb->nb, pb->grid->mycol, pb->grid->npcol);
}

static void back_substitution(lp_problem *pb)
{
    const lp_grid *g = pb->grid;
    int n = pb->n, nb = pb->nb, lda = pb->lda;
    int np = (n + nb - 1) / nb;
    ct_phase_start(&lp_phases, LP_T_SOLVE);
    /* x at my local columns */
    double *xloc = ct_mpi_alloc(((size_t)pb->nloc + 1) * sizeof(double), "the local solution");
    double *s = ct_mpi_alloc((size_t)nb * sizeof(double), "the solve's partial sums");
    double *r = ct_mpi_alloc((size_t)nb * sizeof(double), "the solve's row sums");
    memset(xloc, 0, ((size_t)pb->nloc + 1) * sizeof(double));
    int bcol = lp_owner(n, nb, g->npcol), lbcol = lp_g2l(n, nb, g->npcol);
    int lcn = lp_numroc(n, nb, g->mycol, g->npcol); /* local columns < N */
    memset(pb->x, 0, (size_t)n * sizeof(double));
    for (int k = np - 1; k >= 0; k--) {
        int jj = k * nb, jb = n - jj < nb ? n - jj : nb;
        int prow = k % g->nprow, pcol = k % g->npcol;
        if (g->myrow == prow) {
            int ii = lp_g2l(jj, nb, g->nprow);
            int lcs = lp_numroc(jj + jb, nb, g->mycol, g->npcol);
            /* s = b_k - U_k,right x_right, summed over the process row */
            if (g->mycol == bcol)
                for (int i = 0; i < jb; i++)
                    s[i] = pb->a[ii + i + (size_t)lda * lbcol];
            else
                memset(s, 0, (size_t)jb * sizeof(double));
            lp_dgemv('N', jb, lcn - lcs, -1.0, pb->a + ii + (size_t)lda * lcs, lda, xloc + lcs, 1,
                     1.0, s, 1);
            if (g->npcol > 1) {
                MPI_Request rq;
                CT_MPI_CHECK(MPI_Ireduce(s, r, jb, MPI_DOUBLE, MPI_SUM, pcol, g->row, &rq));
                lp_wait_all(1, &rq);
                if (g->mycol != pcol)
                    lp_count_send((double)jb * sizeof(double));
            } else {
                memcpy(r, s, (size_t)jb * sizeof(double));
            }
            if (g->mycol == pcol) {
                int lc = lp_g2l(jj, nb, g->npcol);
                lp_dtrsv('U', 'N', 'N', jb, pb->a + ii + (size_t)lda * lc, lda, r, 1);
                memcpy(pb->x + jj, r, (size_t)jb * sizeof(double));
            }
        }
        MPI_Request rq;
        CT_MPI_CHECK(MPI_Ibcast(pb->x + jj, jb, MPI_DOUBLE, lp_grid_rank_of(g, prow, pcol),
                                g->all, &rq));
        lp_wait_all(1, &rq);
        if (g->mycol == pcol) {
            int lc = lp_g2l(jj, nb, g->npcol);
            memcpy(xloc + lc, pb->x + jj, (size_t)jb * sizeof(double));
        }
    }
    free(xloc);
    free(s);
    free(r);
    ct_phase_stop(&lp_phases, LP_T_SOLVE);
}

void lp_pgesv(lp_problem *pb)
{
    const lp_algo *al = pb->algo;
    const lp_grid *g = pb->grid;
    int n = pb->n, nb = pb->nb;
    int np = (n + nb - 1) / nb;
    int depth = al->depth;
    int nslots = pb->nslots;
    lp_panel *slot = pb->slot;
    double user0, system0, user1, system1;
    ct_cpu_times(&user0, &system0);
    ct_phase_start(&lp_parts, LP_P_LU);
    lp_progress_register(slot, nslots);
    int fault_panel = al->inject_fault ? np / 2 : -1;
    for (int j = -depth; j < np; j++) {
        int t = j + depth;
        if (t >= 0 && t < np) {
            lp_panel *pn = &slot[t % nslots];
            wait_finished(pn);
            lp_panel_setup(pn, pb, t);
            if (g->mycol == pn->pcol) {
                int lc1 = block_local_end(pb, t);
                for (int k = t - depth > 0 ? t - depth : 0; k < t; k++) {
                    lp_panel *pk = &slot[k % nslots];
                    wait_data(pk);
                    ct_phase_start(&lp_parts, LP_P_LOOKAHEAD);
                    lp_update(pb, pk, pn->lcol, lc1, 0);
                    ct_phase_stop(&lp_parts, LP_P_LOOKAHEAD);
                }
                lp_pfact(pb, pn);
                lp_bcast_start(pn, pb);
                /* the b column, when it shares the last block with the last panel */
                lp_update(pb, pn, lp_numroc(pn->jj + pn->jb, nb, g->mycol, g->npcol), lc1, 0);
                if (t == fault_panel)
                    inject_fault(pb, pn);
            } else {
                lp_bcast_start(pn, pb);
            }
        }
        if (j >= 0) {
            lp_panel *pn = &slot[j % nslots];
            wait_data(pn);
            int bstart = j + depth + 1 < np ? j + depth + 1 : np;
            int gstart = bstart * nb;
            if (gstart <= n)
                lp_update(pb, pn, lp_numroc(gstart, nb, g->mycol, g->npcol), pb->nloc, 1);
        }
    }
    for (int i = 0; i < nslots; i++)
        wait_finished(&slot[i]);
    lp_progress_register(NULL, 0);
    back_substitution(pb);
    ct_phase_stop(&lp_parts, LP_P_LU);
    ct_cpu_times(&user1, &system1);
    ct_phase_add(&lp_parts, LP_P_LU_CPU, user1 - user0 + system1 - system0);
}
