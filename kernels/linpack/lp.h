/* lp.h - clustertune's distributed Linpack (HPL-equivalent LU solver).
 *
 * Modules (one file each, HPL-style split of solver / input / driver):
 *   lp_blas.c   Fortran BLAS entry points and identification of the BLAS that ran
 *   lp_dat.c    HPL.dat reader (HPL 1.x and 2.x layouts) and command-line flags
 *   lp_grid.c   P x Q process grid, block-cyclic index maps, matrix generator
 *   lp_pfact.c  panel factorisations: left / Crout / right, recursive (NDIV, NBMIN)
 *   lp_bcast.c  the six panel broadcasts as non-blocking phase programs + progress
 *   lp_update.c row swapping (bin-exch / long / mix) and the trailing update
 *   lp_pgesv.c  right-looking LU with look-ahead, back substitution
 *   lp_verify.c scaled residual
 *   lp_out.c    HPL-format text output
 *   linpack.c   driver: runs every combination, JSON records
 *
 * Storage: the N x (N+1) matrix [A | b] is distributed block-cyclically (NB x NB blocks,
 * source process (0,0)), column-major local array with leading dimension lda. Carrying b
 * as column N means the forward elimination happens inside the factorisation and only
 * U is needed afterwards, as in HPL.
 */
#ifndef LP_H
#define LP_H

#include "ct_mpi.h"
#include "ct_opt.h"
#include "ct_phase.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LP_MAX_PARAM 20 /* values per HPL.dat list, as HPL */
#define LP_MAX_WARN 32

enum lp_fact { LP_LEFT = 0, LP_CROUT = 1, LP_RIGHT = 2 };
enum lp_bcast { LP_1RING = 0, LP_1RINGM = 1, LP_2RING = 2, LP_2RINGM = 3, LP_LONG = 4, LP_LONGM = 5 };
enum lp_swap { LP_SWAP_BINEXCH = 0, LP_SWAP_LONG = 1, LP_SWAP_MIX = 2 };

/* One HPL.dat list line, or the value of one list flag. */
typedef struct {
    int count, v[LP_MAX_PARAM];
} lp_list;

/* Everything one HPL.dat (or one set of flags) asks for: lists whose Cartesian product
 * is run, plus the scalars that apply to every run. */
typedef struct {
    lp_list n, nb;
    int colmajor; /* PMAP: 0 row-major, 1 column-major */
    lp_list p, q; /* paired: grid i is p.v[i] x q.v[i] */
    char pq_from[300]; /* where the grids come from, for messages: a flag or file:line */
    double threshold;
    lp_list pfact, nbmin, ndiv, rfact, bcast, depth;
    int swap, swap_threshold;
    int l1_notrans, u_notrans, equil, align; /* read and echoed; layout is fixed (see docs) */
    char out_name[256];
    int device; /* 6 stdout, 7 stderr, other: file out_name */
    int format; /* 1: HPL 1.x layout (no PMAP line), 2: HPL 2.x */
    int nwarn;
    char warn[LP_MAX_WARN][256];
} lp_params;

/* Reads an HPL.dat. format: 0 auto-detect, 1 or 2 forced. Returns 0, or -1 with a
 * message naming file and line in err. */
int lp_dat_read(const char *path, int format, lp_params *prm, char *err, size_t errlen);
void lp_params_defaults(lp_params *prm);
/* CT_OPT_CUSTOM parser of a list flag into the lp_list at opt->dest: comma-separated
 * integers in [opt->min, opt->max] (no upper bound from INT_MAX on) or, if opt->choices
 * is set, those words (any case) standing for their index. */
int lp_opt_list(const ct_opt *opt, const char *text, char *expected, size_t len);

/* One run's algorithm choices. */
typedef struct {
    int n, nb, p, q, colmajor;
    int pfact, nbmin, ndiv, rfact, bcast, depth, swap, swap_threshold;
    double threshold;
    uint64_t seed;
    int inject_fault;    /* corrupt the factorisation (tests) */
    int fail_alloc_rank; /* this world rank's panel allocation fails (tests); -1: none */
    int chunk;           /* columns per piece of a bulk update (CT_LINPACK_CHUNK); 0: default */
} lp_algo;

void lp_variant_code(const lp_algo *a, char code[16]); /* e.g. WR11C2R4 */

typedef struct {
    MPI_Comm all, row, col; /* row: my process row (rank = mycol); col: my column */
    int nprow, npcol, myrow, mycol, rank, colmajor;
} lp_grid;

int lp_grid_init(lp_grid *g, MPI_Comm comm, int p, int q, int colmajor);
void lp_grid_free(lp_grid *g);
int lp_grid_rank_of(const lp_grid *g, int prow, int pcol);

/* Block-cyclic maps (source process 0). */
int lp_numroc(int n, int nb, int iproc, int nprocs);           /* local count of n */
static inline int lp_owner(int g, int nb, int nprocs) { return (g / nb) % nprocs; }
static inline int lp_g2l(int g, int nb, int nprocs) { return (g / (nb * nprocs)) * nb + g % nb; }
static inline int lp_l2g(int l, int nb, int iproc, int nprocs)
{
    return ((l / nb) * nprocs + iproc) * nb + l % nb;
}

/* splitmix64 finaliser: a counter-based generator, so any element can be produced
 * independently of the others (parallel, layout-free generation). */
static inline uint64_t lp_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Fills the local part of [A | b] (N x N+1) from the seed; element (i, j) depends on
 * (seed, N, i, j) only, so every P x Q and NB sees the same system. */
void lp_matgen(const lp_grid *g, int n, int nb, uint64_t seed, double *a, int lda);

/* Per-rank figures of the running combination (JSON "phases", "phase_parts", ...):
 *   lp_phases  disjoint phase times (seconds);
 *   lp_parts   what lies inside them: the update's DTRSM and DGEMM, the owner's
 *              look-ahead (bringing the next panel's block up to date before factoring
 *              it: its swaps, DTRSM and DGEMM) and the whole LU, so that the LU's time
 *              not covered by lp_phases shows, and the process's CPU time in the LU
 *              (a rate by it moves less with other jobs' load than the wall time);
 *   lp_counts  bytes sent and the update DGEMM's flops (its rate: flops / dgemm time). */
enum { LP_T_PFACT, LP_T_BCAST, LP_T_SWAP, LP_T_UPDATE, LP_T_WAIT, LP_T_SOLVE, LP_T_NPHASE };
enum { LP_P_DTRSM, LP_P_DGEMM, LP_P_LOOKAHEAD, LP_P_LU, LP_P_LU_CPU, LP_P_NPART };
enum { LP_C_BYTES_SENT, LP_C_DGEMM_FLOPS, LP_C_NCOUNT };
extern ct_phases lp_phases, lp_parts, lp_counts;
void lp_stats_reset(void);
void lp_count_send(double bytes);

/* --- panel and its row broadcast --- */
#define LP_MAX_GRID_DIM 32 /* P and Q limit of the broadcast programs */
#define LP_BC_MAXPH (LP_MAX_GRID_DIM + 1)
#define LP_BC_MAXREQ LP_MAX_GRID_DIM
typedef struct {
    int nreq;
    int peer[LP_BC_MAXREQ];
    size_t off[LP_BC_MAXREQ], len[LP_BC_MAXREQ];
    int is_send[LP_BC_MAXREQ];
} lp_bc_phase;

/* A broadcast compiled into phases for one process (lp_bcast.c). */
typedef struct {
    int nph, ph, recv_phases, root, size, tag;
    lp_bc_phase phase[LP_BC_MAXPH];
    MPI_Request req[LP_BC_MAXREQ];
    double *buf;
    MPI_Comm comm;
} lp_bcprog;
void lp_bcprog_build(lp_bcprog *pr, int algo, int root, int rank, int size, size_t count);
void lp_bcprog_start(lp_bcprog *pr, double *buf, MPI_Comm comm, int tag);
int lp_bcprog_test(lp_bcprog *pr);
int lp_bcprog_has_data(const lp_bcprog *pr);

typedef struct {
    int k;              /* panel index */
    int jj, jb;         /* first global row/column, width */
    int prow, pcol;     /* process row holding the top jb x jb block, process column */
    int mp;             /* rows of L below the top block on my process row */
    int ii0, ii1;       /* first local row >= jj and first local row >= jj+jb */
    int lcol;           /* local column of jj on the owner column */
    double *buf;        /* [W jb*jb][ipiv jb][L mp*jb]: what the row broadcast carries */
    size_t count;
    double *W;          /* L11\U11 top block, jb x jb, ld jb (= buf) */
    int *ipiv;          /* global pivot rows */
    double *L;          /* L21 rows (mp x jb) with leading dimension ldl */
    int ldl;
    int active, have_data, finished;
    lp_bcprog prog;
} lp_panel;

typedef struct {
    const lp_algo *algo;
    const lp_grid *grid;
    int n, nb, mloc, nloc, lda;
    double *a;
    double *x;      /* solution, replicated */
    lp_panel *slot; /* depth + 2 panels: broadcast buffers in flight */
    int nslots;
    double *work;   /* U rows and swap buffers (several process rows only) */
} lp_problem;

/* Bytes one rank needs for a combination: what lp_problem_alloc allocates. */
typedef struct {
    double matrix, x, panels, work, total;
} lp_mem;

/* Local sizes of the combination on this rank of the grid; allocates nothing. */
void lp_problem_init(lp_problem *pb, const lp_algo *al, const lp_grid *g);
lp_mem lp_problem_mem(const lp_problem *pb);
/* Collective over the grid: allocates everything the factorisation and the solve use;
 * if any rank fails, every rank reports it and the job aborts (ct_mpi_agree). */
void lp_problem_alloc(lp_problem *pb);
void lp_problem_free(lp_problem *pb);

void lp_panel_setup(lp_panel *pn, const lp_problem *pb, int k);
void lp_pfact(lp_problem *pb, lp_panel *pn);
void lp_bcast_start(lp_panel *pn, const lp_problem *pb);
void lp_bcast_progress(lp_panel *pn);
void lp_progress_register(lp_panel *panels, int count);
void lp_progress_all(void);
void lp_wait_all(int count, MPI_Request *reqs); /* waits while progressing broadcasts */
void lp_idle(void);
void lp_panel_unpack(lp_panel *pn);
void lp_update(lp_problem *pb, lp_panel *pn, int lc0, int lc1, int chunked);
void lp_pgesv(lp_problem *pb);
void lp_verify(lp_problem *pb, double *resid, double norms[4]);

/* --- BLAS (Fortran interface, resolved through libblas.so.3 so any Debian BLAS
 *     alternative can run) --- */
void lp_dgemm(char ta, char tb, int m, int n, int k, double alpha, const double *a, int lda,
              const double *b, int ldb, double beta, double *c, int ldc);
void lp_dtrsm(char side, char uplo, char ta, char diag, int m, int n, double alpha,
              const double *a, int lda, double *b, int ldb);
void lp_dger(int m, int n, double alpha, const double *x, int incx, const double *y, int incy,
             double *a, int lda);
void lp_dgemv(char ta, int m, int n, double alpha, const double *a, int lda, const double *x,
              int incx, double beta, double *y, int incy);
void lp_dtrsv(char uplo, char ta, char diag, int n, const double *a, int lda, double *x, int incx);
void lp_dscal(int n, double alpha, double *x, int incx);
int lp_idamax(int n, const double *x, int incx); /* 0-based */
void lp_dswap(int n, double *x, int incx, double *y, int incy);
/* "blas":{library, core, config, the OPENBLAS_* environment} of a result's detail: the
 * BLAS that ran (the shared object providing dgemm_, OpenBLAS core and configuration or
 * BLIS version and architecture). */
void lp_blas_json(ct_json *j);

/* --- HPL-format text output --- */
void lp_out_header(FILE *f, const lp_params *prm);
void lp_out_result(FILE *f, const lp_algo *a, double time_s, double gflops);
void lp_out_residual(FILE *f, double resid, double threshold, int passed, const double norms[4],
                     double eps);
void lp_out_skip(FILE *f, const lp_algo *a, const char *reason);
void lp_out_summary(FILE *f, int total, int passed, int failed, int skipped);

#endif
