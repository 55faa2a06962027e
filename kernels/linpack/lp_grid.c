/* lp_grid.c - the P x Q process grid, block-cyclic counts and the matrix generator. */
#include "lp.h"

ct_phases lp_phases, lp_parts, lp_counts;

void lp_stats_reset(void)
{
    static const char *const phases[LP_T_NPHASE] = {"pfact", "bcast", "swap",
                                                    "update", "wait", "solve"};
    static const char *const parts[LP_P_NPART] = {"dtrsm", "dgemm", "lookahead", "lu",
                                                  "lu_cpu"};
    static const char *const counts[LP_C_NCOUNT] = {"bytes_sent", "dgemm_flops"};
    ct_phases_init(&lp_phases, LP_T_NPHASE, phases);
    ct_phases_init(&lp_parts, LP_P_NPART, parts);
    ct_phases_init(&lp_counts, LP_C_NCOUNT, counts);
}

void lp_count_send(double bytes) { ct_phase_add(&lp_counts, LP_C_BYTES_SENT, bytes); }

int lp_grid_init(lp_grid *g, MPI_Comm comm, int p, int q, int colmajor)
{
    int rank, size;
    CT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    CT_MPI_CHECK(MPI_Comm_size(comm, &size));
    g->nprow = p;
    g->npcol = q;
    /* ranks beyond P*Q sit this run out, as in xhpl */
    int in = rank < p * q;
    CT_MPI_CHECK(MPI_Comm_split(comm, in ? 0 : MPI_UNDEFINED, rank, &g->all));
    if (!in) {
        g->row = g->col = MPI_COMM_NULL;
        return 0;
    }
    g->rank = rank;
    g->colmajor = colmajor;
    if (colmajor) {
        g->myrow = rank % p;
        g->mycol = rank / p;
    } else {
        g->myrow = rank / q;
        g->mycol = rank % q;
    }
    CT_MPI_CHECK(MPI_Comm_split(g->all, g->myrow, g->mycol, &g->row));
    CT_MPI_CHECK(MPI_Comm_split(g->all, g->mycol, g->myrow, &g->col));
    return 1;
}

void lp_grid_free(lp_grid *g)
{
    if (g->row != MPI_COMM_NULL)
        CT_MPI_CHECK(MPI_Comm_free(&g->row));
    if (g->col != MPI_COMM_NULL)
        CT_MPI_CHECK(MPI_Comm_free(&g->col));
    if (g->all != MPI_COMM_NULL)
        CT_MPI_CHECK(MPI_Comm_free(&g->all));
}

int lp_grid_rank_of(const lp_grid *g, int prow, int pcol)
{
    /* g->all keeps the world order, which is the PMAP order */
    return g->colmajor ? pcol * g->nprow + prow : prow * g->npcol + pcol;
}

int lp_numroc(int n, int nb, int iproc, int nprocs)
{
    int nblocks = n / nb;
    int count = (nblocks / nprocs) * nb;
    int extra = nblocks % nprocs;
    if (iproc < extra)
        count += nb;
    else if (iproc == extra)
        count += n % nb;
    return count;
}

void lp_matgen(const lp_grid *g, int n, int nb, uint64_t seed, double *a, int lda)
{
    int mloc = lp_numroc(n, nb, g->myrow, g->nprow);
    int nloc = lp_numroc(n + 1, nb, g->mycol, g->npcol);
    uint64_t key = lp_mix64(seed ^ 0x6a09e667f3bcc909ULL);
    const double scale = 1.0 / 9007199254740992.0; /* 2^-53 */
    for (int lc = 0; lc < nloc; lc++) {
        uint64_t gj = (uint64_t)lp_l2g(lc, nb, g->mycol, g->npcol);
        double *col = a + (size_t)lc * (size_t)lda;
        for (int lr0 = 0; lr0 < mloc; lr0 += nb) {
            int gi0 = lp_l2g(lr0, nb, g->myrow, g->nprow);
            int len = mloc - lr0 < nb ? mloc - lr0 : nb;
            uint64_t base = key + (gj * (uint64_t)n + (uint64_t)gi0) * 0x9e3779b97f4a7c15ULL;
            for (int i = 0; i < len; i++) {
                uint64_t r = lp_mix64(base + (uint64_t)i * 0x9e3779b97f4a7c15ULL);
                col[lr0 + i] = (double)(r >> 11) * scale - 0.5;
            }
        }
    }
}
