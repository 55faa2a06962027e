/* lp_grid.c - the P x Q process grid, block-cyclic counts and the matrix generator. */
#include "lp.h"

lp_stats lp_stat;
const char *const lp_phase_names[LP_T_NPHASE] = {"pfact", "bcast", "swap",
                                                 "update", "wait", "solve"};

void lp_count_send(double bytes) { lp_stat.bytes_sent += bytes; }

int lp_grid_init(lp_grid *g, MPI_Comm comm, int p, int q, int colmajor)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    g->nprow = p;
    g->npcol = q;
    /* ranks beyond P*Q sit this run out, as in xhpl */
    int in = rank < p * q;
    MPI_Comm_split(comm, in ? 0 : MPI_UNDEFINED, rank, &g->all);
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
    MPI_Comm_split(g->all, g->myrow, g->mycol, &g->row);
    MPI_Comm_split(g->all, g->mycol, g->myrow, &g->col);
    return 1;
}

void lp_grid_free(lp_grid *g)
{
    if (g->row != MPI_COMM_NULL)
        MPI_Comm_free(&g->row);
    if (g->col != MPI_COMM_NULL)
        MPI_Comm_free(&g->col);
    if (g->all != MPI_COMM_NULL)
        MPI_Comm_free(&g->all);
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

/* splitmix64 finaliser: a counter-based generator, so any element can be produced
 * independently of the others (parallel, layout-free generation). */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void lp_matgen(const lp_grid *g, int n, int nb, uint64_t seed, double *a, int lda)
{
    int mloc = lp_numroc(n, nb, g->myrow, g->nprow);
    int nloc = lp_numroc(n + 1, nb, g->mycol, g->npcol);
    uint64_t key = mix64(seed ^ 0x6a09e667f3bcc909ULL);
    const double scale = 1.0 / 9007199254740992.0; /* 2^-53 */
    for (int lc = 0; lc < nloc; lc++) {
        uint64_t gj = (uint64_t)lp_l2g(lc, nb, g->mycol, g->npcol);
        double *col = a + (size_t)lc * (size_t)lda;
        for (int lr0 = 0; lr0 < mloc; lr0 += nb) {
            int gi0 = lp_l2g(lr0, nb, g->myrow, g->nprow);
            int len = mloc - lr0 < nb ? mloc - lr0 : nb;
            uint64_t base = key + (gj * (uint64_t)n + (uint64_t)gi0) * 0x9e3779b97f4a7c15ULL;
            for (int i = 0; i < len; i++) {
                uint64_t r = mix64(base + (uint64_t)i * 0x9e3779b97f4a7c15ULL);
                col[lr0 + i] = (double)(r >> 11) * scale - 0.5;
            }
        }
    }
}
