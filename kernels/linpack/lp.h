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

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LP_MAX_PARAM 20 /* values per HPL.dat list, as HPL */
#define LP_MAX_WARN 32

enum lp_fact { LP_LEFT = 0, LP_CROUT = 1, LP_RIGHT = 2 };
enum lp_bcast { LP_1RING = 0, LP_1RINGM = 1, LP_2RING = 2, LP_2RINGM = 3, LP_LONG = 4, LP_LONGM = 5 };
enum lp_swap { LP_SWAP_BINEXCH = 0, LP_SWAP_LONG = 1, LP_SWAP_MIX = 2 };

/* Everything one HPL.dat (or one set of flags) asks for: lists whose Cartesian product
 * is run, plus the scalars that apply to every run. */
typedef struct {
    int nn, n[LP_MAX_PARAM];
    int nnb, nb[LP_MAX_PARAM];
    int colmajor; /* PMAP: 0 row-major, 1 column-major */
    int npq, p[LP_MAX_PARAM], q[LP_MAX_PARAM];
    double threshold;
    int npfact, pfact[LP_MAX_PARAM];
    int nnbmin, nbmin[LP_MAX_PARAM];
    int nndiv, ndiv[LP_MAX_PARAM];
    int nrfact, rfact[LP_MAX_PARAM];
    int nbcast, bcast[LP_MAX_PARAM];
    int ndepth, depth[LP_MAX_PARAM];
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
/* Parses a comma-separated list of integers (or letters L/C/R for factorisations). */
int lp_parse_list(const char *text, int letters, int *vals, int *count, char *err, size_t errlen);

/* One run's algorithm choices. */
typedef struct {
    int n, nb, p, q, colmajor;
    int pfact, nbmin, ndiv, rfact, bcast, depth, swap, swap_threshold;
    double threshold;
    uint64_t seed;
    int inject_fault;
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

/* Fills the local part of [A | b] (N x N+1) from the seed; element (i, j) depends on
 * (seed, N, i, j) only, so every P x Q and NB sees the same system. */
void lp_matgen(const lp_grid *g, int n, int nb, uint64_t seed, double *a, int lda);

/* Per-rank phase timers (seconds) and traffic. */
enum { LP_T_PFACT, LP_T_BCAST, LP_T_SWAP, LP_T_UPDATE, LP_T_WAIT, LP_T_SOLVE, LP_T_NPHASE };
typedef struct {
    double t[LP_T_NPHASE];
    double bytes_sent;
} lp_stats;
extern lp_stats lp_stat;
extern const char *const lp_phase_names[LP_T_NPHASE];
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
    double *work; /* U rows and swap buffers */
    size_t work_cap;
    double *x;    /* solution, replicated */
} lp_problem;

void lp_panel_setup(lp_panel *pn, const lp_problem *pb, int k);
int lp_panel_alloc(lp_panel *pn, const lp_problem *pb);
void lp_panel_free(lp_panel *pn);
void lp_pfact(lp_problem *pb, lp_panel *pn);
void lp_bcast_start(lp_panel *pn, const lp_problem *pb);
void lp_bcast_progress(lp_panel *pn);
void lp_progress_register(lp_panel *panels, int count);
void lp_progress_all(void);
void lp_wait_all(int count, MPI_Request *reqs); /* waits while progressing broadcasts */
void lp_idle(void);
void lp_panel_unpack(lp_panel *pn);
void lp_update(lp_problem *pb, lp_panel *pn, int lc0, int lc1, int chunked);
int lp_pgesv(lp_problem *pb);
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
typedef struct {
    char library[512]; /* shared object that provides dgemm_ */
    char core[64];     /* OpenBLAS core name, or "" */
    char config[256];  /* OpenBLAS/BLIS configuration string, or "" */
} lp_blas_info;
void lp_blas_identify(lp_blas_info *info);

/* --- HPL-format text output --- */
void lp_out_header(FILE *f, const lp_params *prm);
void lp_out_result(FILE *f, const lp_algo *a, double time_s, double gflops);
void lp_out_residual(FILE *f, double resid, double threshold, int passed, const double norms[4],
                     double eps);
void lp_out_skip(FILE *f, const lp_algo *a, const char *reason);
void lp_out_summary(FILE *f, int total, int passed, int failed, int skipped);

#endif
