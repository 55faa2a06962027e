/* ct-gemm - distributed matrix product C = A B (SUMMA) on a P x Q block-cyclic grid in
 * single, double, complex and double complex, or, with --local, every rank multiplying
 * its own matrices with no communication (the machine's aggregate xGEMM rate, the peak
 * Linpack is compared with).
 *
 * SUMMA: for each block column k of A / block row k of B, the owning process column
 * broadcasts its piece of A along the process rows and the owning process row its piece
 * of B along the process columns; every process adds the product into its C. Each
 * sample carries the spread over ranks of the time in those broadcasts and in the local
 * multiplications (phase_stats).
 *
 * --local --k LIST: each rank's product has depth K (C n x n += A n x K times B K x n), the
 * shape of the LU's trailing update for K = NB; best_dgemm_gflops counts square products
 * only. A --local sample also carries cpu_s, the most CPU time a rank's process spent in
 * its product, and cpu_gflops, the rate by that time: what the library does when it has
 * its core, which a neighbour sharing the core changes less than the wall-clock rate
 * (the host's BLAS choice ranks by it, levels/linpack/choice.py).
 *
 * Flop counts: 2 M N K for real types; 8 M N K for complex ones (a complex multiply-add
 * is 4 real multiplications and 4 additions), which is why complex GEMM shows a higher
 * rate for the same data movement (seeds/002).
 *
 * Verification: entries of C are compared with the serial product computed from the
 * generator (any element of A and B can be regenerated anywhere): every local entry for
 * N <= --check-all (default 256), otherwise 64 entries per rank, drawn afresh for every
 * product from the seed, the rank, the repeat, N and the type, so that over ranks and
 * repeats a fault anywhere in C can be caught; tolerance 4 K eps max|a| max|b| per
 * entry. One failed product makes the run "failed" and the exit status 1.
 * --inject-fault (tests): the last rank of the grid corrupts one entry of its part of the
 * first product, drawn from the same seeds (caught for sure when N <= --check-all, else
 * when a checked entry hits it).
 * --check-only --np N: as ct-linpack's, for the flags. */
#define _POSIX_C_SOURCE 200809L
#include "ct.h"
#include "ct_opt.h"
#include "lp.h"

#include <complex.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef size_t flen;
extern void sgemm_(const char *, const char *, const int *, const int *, const int *, const void *,
                   const void *, const int *, const void *, const int *, const void *, void *,
                   const int *, flen, flen);
extern void dgemm_(const char *, const char *, const int *, const int *, const int *, const void *,
                   const void *, const int *, const void *, const int *, const void *, void *,
                   const int *, flen, flen);
extern void cgemm_(const char *, const char *, const int *, const int *, const int *, const void *,
                   const void *, const int *, const void *, const int *, const void *, void *,
                   const int *, flen, flen);
extern void zgemm_(const char *, const char *, const int *, const int *, const int *, const void *,
                   const void *, const int *, const void *, const int *, const void *, void *,
                   const int *, flen, flen);

typedef struct {
    char name;         /* s d c z */
    size_t size;       /* bytes per element */
    int complex_;      /* 1 for c, z */
    double flops_mnk;  /* flops per (m, n, k) triple */
    double eps;
    MPI_Datatype mpi;
    void (*gemm)(const char *, const char *, const int *, const int *, const int *, const void *,
                 const void *, const int *, const void *, const int *, const void *, void *,
                 const int *, flen, flen);
} gtype;

static gtype type_of(char c)
{
    switch (c) {
    case 's': return (gtype){'s', 4, 0, 2.0, FLT_EPSILON, MPI_FLOAT, sgemm_};
    case 'c': return (gtype){'c', 8, 1, 8.0, FLT_EPSILON, MPI_C_FLOAT_COMPLEX, cgemm_};
    case 'z': return (gtype){'z', 16, 1, 8.0, DBL_EPSILON, MPI_C_DOUBLE_COMPLEX, zgemm_};
    default: return (gtype){'d', 8, 0, 2.0, DBL_EPSILON, MPI_DOUBLE, dgemm_};
    }
}

/* Element (i, j) of matrix `which` (0 = A, 1 = B), part 0 real / 1 imaginary. */
static double gen(uint64_t seed, int which, int part, int n, int i, int j)
{
    uint64_t idx = ((uint64_t)j * (uint64_t)n + (uint64_t)i) * 4u + (uint64_t)(which * 2 + part);
    return (double)(lp_mix64(seed + idx * 0x9e3779b97f4a7c15ULL) >> 11) * (1.0 / 9007199254740992.0) - 0.5;
}

static void put(const gtype *t, void *base, size_t at, double re, double im)
{
    switch (t->name) {
    case 's': ((float *)base)[at] = (float)re; break;
    case 'd': ((double *)base)[at] = re; break;
    case 'c': ((float complex *)base)[at] = (float)re + (float)im * I; break;
    default: ((double complex *)base)[at] = re + im * I; break;
    }
}

static void get(const gtype *t, const void *base, size_t at, double *re, double *im)
{
    *im = 0.0;
    switch (t->name) {
    case 's': *re = ((const float *)base)[at]; break;
    case 'd': *re = ((const double *)base)[at]; break;
    case 'c': *re = crealf(((const float complex *)base)[at]); *im = cimagf(((const float complex *)base)[at]); break;
    default: *re = creal(((const double complex *)base)[at]); *im = cimag(((const double complex *)base)[at]); break;
    }
}

/* Local block of an n x n matrix (--local: rows x cols of it), generated; local layout
 * column-major, ld = mloc. */
static void fill(const gtype *t, const lp_grid *g, int n, int rows, int cols, int nb, uint64_t seed,
                 int which, void *m, int ld, int local)
{
    int mloc = local ? rows : lp_numroc(n, nb, g->myrow, g->nprow);
    int nloc = local ? cols : lp_numroc(n, nb, g->mycol, g->npcol);
    for (int lc = 0; lc < nloc; lc++) {
        int gj = local ? lc : lp_l2g(lc, nb, g->mycol, g->npcol);
        for (int lr = 0; lr < mloc; lr++) {
            int gi = local ? lr : lp_l2g(lr, nb, g->myrow, g->nprow);
            put(t, m, (size_t)lc * ld + lr, gen(seed, which, 0, n, gi, gj),
                t->complex_ ? gen(seed, which, 1, n, gi, gj) : 0.0);
        }
    }
}

/* The options; every rank reads them itself (no file is involved). */
typedef struct {
    lp_list n, k; /* k.count 0: square products */
    int nb, p, q, local, check_all, inject_fault, help;
    long repeat, seed;
    const char *types;
    ct_check_only check;
} options;

static int parse_types(const ct_opt *opt, const char *text, char *expected, size_t len)
{
    size_t n = strlen(text);
    if (n >= 1 && n <= 4 && strspn(text, "sdcz") == n) {
        *(const char **)opt->dest = text;
        return 0;
    }
    snprintf(expected, len, "1 to 4 of the letters s, d, c, z");
    return -1;
}

/* Returns 0, or -1 with one line "ct-gemm: ..." in err. */
static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen)
{
    *o = (options){.n = {1, {1000}}, .nb = 192, .p = 1, .check_all = 256, .repeat = 1,
                   .seed = 42, .types = "sdcz"};
    ct_opt check[CT_CHECK_ONLY_NOPTS];
    ct_check_only_options(&o->check, check);
    const ct_opt table[] = {
        {"-N", CT_OPT_CUSTOM, .dest = &o->n, .min = 0, .max = INT_MAX, .parse = lp_opt_list},
        {"--nb", CT_OPT_INT, .dest = &o->nb, .min = 1, .max = INT_MAX},
        {"--k", CT_OPT_CUSTOM, .dest = &o->k, .min = 1, .max = INT_MAX, .parse = lp_opt_list},
        {"-P", CT_OPT_INT, .dest = &o->p, .min = 1, .max = INT_MAX},
        {"-Q", CT_OPT_INT, .dest = &o->q, .min = 1, .max = INT_MAX},
        {"--type", CT_OPT_CUSTOM, .dest = &o->types, .parse = parse_types},
        {"--local", CT_OPT_FLAG, .dest = &o->local},
        {"--repeat", CT_OPT_LONG, .dest = &o->repeat, .min = 1, .max = INT_MAX},
        {"--seed", CT_OPT_LONG, .dest = &o->seed, .min = 0, .max = LONG_MAX},
        {"--check-all", CT_OPT_INT, .dest = &o->check_all, .min = 0, .max = INT_MAX},
        {"--inject-fault", CT_OPT_FLAG, .dest = &o->inject_fault},
        {"--help", CT_OPT_FLAG, .dest = &o->help},
        {NULL, CT_OPT_TABLE, .table = check},
        {.type = CT_OPT_END},
    };
    if (ct_opt_parse(table, argc, argv, err, errlen))
        return -1;
    if (o->k.count && !o->local) {
        snprintf(err, errlen, "ct-gemm: --k: needs --local (each rank's own product of depth K)");
        return -1;
    }
    return ct_check_only_validate(&o->check, ct_basename(argv[0]), err, errlen);
}

/* The grid on nprocs ranks: --local uses all of them, one block each; -Q defaults to
 * every rank. Returns 0, or -1 with the message in err when the grid does not fit. */
static int grid_of(options *o, int nprocs, const char *prog, char *err, size_t errlen)
{
    if (o->local) {
        o->p = 1;
        o->q = nprocs;
    } else if (o->q == 0) {
        o->q = nprocs;
    }
    if ((long long)o->p * o->q <= nprocs)
        return 0;
    snprintf(err, errlen, "%s: -P/-Q: grid %d x %d (P*Q=%lld) needs more than the %d processes "
             "available", prog, o->p, o->q, (long long)o->p * o->q, nprocs);
    return -1;
}

/* Compares local entries of C with the product (of depth kd) recomputed from the
 * generator: all of them for N <= check_all, else 64 drawn from `pick`. */
static int check(const gtype *t, const lp_grid *g, int n, int kd, int nb, uint64_t seed,
                 uint64_t pick, const void *c, int ld, int local, int check_all, double *worst)
{
    int mloc = local ? n : lp_numroc(n, nb, g->myrow, g->nprow);
    int nloc = local ? n : lp_numroc(n, nb, g->mycol, g->npcol);
    long total = (long)mloc * nloc;
    int all = n <= check_all;
    long count = all ? total : (total < 64 ? total : 64);
    double tol = 4.0 * kd * t->eps * (t->complex_ ? 2.0 : 1.0) * 0.25; /* |a|,|b| <= 0.5 */
    int ok = 1;
    *worst = 0.0;
    for (long e = 0; e < count; e++) {
        long at = all ? e : (long)(lp_mix64(pick + (uint64_t)e) % (uint64_t)total);
        int lr = (int)(at % mloc), lc = (int)(at / mloc);
        int gi = local ? lr : lp_l2g(lr, nb, g->myrow, g->nprow);
        int gj = local ? lc : lp_l2g(lc, nb, g->mycol, g->npcol);
        long double re = 0, im = 0;
        for (int k = 0; k < kd; k++) {
            double ar = gen(seed, 0, 0, n, gi, k), br = gen(seed, 1, 0, n, k, gj);
            if (t->complex_) {
                double ai = gen(seed, 0, 1, n, gi, k), bi = gen(seed, 1, 1, n, k, gj);
                re += (long double)ar * br - (long double)ai * bi;
                im += (long double)ar * bi + (long double)ai * br;
            } else {
                re += (long double)ar * br;
            }
        }
        double cr, ci;
        get(t, c, (size_t)lc * ld + lr, &cr, &ci);
        double err = fabs(cr - (double)re) + fabs(ci - (double)im);
        if (err / tol > *worst)
            *worst = err / tol;
        if (!(err <= tol))
            ok = 0;
    }
    return ok;
}

enum { PH_BCAST, PH_GEMM, NPHASE };

typedef struct {
    double time_s, cpu_s, worst;
    int ok;
    ct_phase_summary phases; /* on rank 0 of the grid */
} product;

/* One product C = A B of order n (--local: depth kd), timed and checked; collective over
 * the grid. */
static void multiply(const gtype *t, const lp_grid *g, const options *o, int n, int kd, long repeat,
                     int fault, product *out)
{
    static const char *const phase_names[NPHASE] = {"bcast", "gemm"};
    int local = o->local, nb = o->nb;
    int mloc = local ? n : lp_numroc(n, nb, g->myrow, g->nprow);
    int nloc = local ? n : lp_numroc(n, nb, g->mycol, g->npcol);
    int ld = mloc > 0 ? mloc : 1;
    size_t es = t->size, mat = (size_t)ld * (size_t)(nloc > 0 ? nloc : 1) * es;
    /* --local A is n x kd, B kd x n (leading dimension kd); SUMMA kd == n */
    int ldb = local ? (kd > 0 ? kd : 1) : ld;
    size_t amat = local ? (size_t)ld * (size_t)(kd > 0 ? kd : 1) * es : mat;
    size_t bmat = local ? (size_t)ldb * (size_t)(nloc > 0 ? nloc : 1) * es : mat;
    ct_alloc_failure f = {0};
    char *a = ct_mpi_try_alloc(&f, amat, "matrix A");
    char *b = ct_mpi_try_alloc(&f, bmat, "matrix B");
    char *c = ct_mpi_try_alloc(&f, mat, "matrix C");
    char *pa = ct_mpi_try_alloc(&f, ((size_t)ld * nb + 1) * es, "the broadcast piece of A");
    char *pb = ct_mpi_try_alloc(&f, ((size_t)nb * (nloc > 0 ? nloc : 1) + 1) * es,
                                "the broadcast piece of B");
    ct_mpi_agree(g->all, &f);
    fill(t, g, n, n, kd, nb, (uint64_t)o->seed, 0, a, ld, local);
    fill(t, g, n, kd, n, nb, (uint64_t)o->seed, 1, b, ldb, local);
    memset(c, 0, mat);
    double one[2] = {1.0, 0.0};
    float onef[2] = {1.0f, 0.0f};
    const void *alpha = (t->name == 's' || t->name == 'c') ? (const void *)onef : (const void *)one;
    ct_phases ph;
    ct_phases_init(&ph, NPHASE, phase_names);
    CT_MPI_CHECK(MPI_Barrier(g->all));
    double t0 = MPI_Wtime();
    struct timespec cpu0, cpu1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
    if (local) {
        ct_phase_start(&ph, PH_GEMM);
        if (n > 0)
            t->gemm("N", "N", &n, &n, &kd, alpha, a, &ld, b, &ldb, alpha, c, &ld, 1, 1);
        ct_phase_stop(&ph, PH_GEMM);
    } else {
        for (int k0 = 0; k0 < n; k0 += nb) {
            int kw = n - k0 < nb ? n - k0 : nb;
            int kcol = lp_owner(k0, nb, g->npcol), krow = lp_owner(k0, nb, g->nprow);
            ct_phase_start(&ph, PH_BCAST);
            /* A(:, k0:k0+kw) along my process row */
            if (g->mycol == kcol)
                memcpy(pa, a + (size_t)lp_g2l(k0, nb, g->npcol) * ld * es, (size_t)ld * kw * es);
            CT_MPI_CHECK(MPI_Bcast(pa, ld * kw, t->mpi, kcol, g->row));
            /* B(k0:k0+kw, :) along my process column, packed kw x nloc */
            if (g->myrow == krow) {
                int lr = lp_g2l(k0, nb, g->nprow);
                for (int j = 0; j < nloc; j++)
                    memcpy(pb + ((size_t)j * kw) * es, b + ((size_t)j * ld + lr) * es,
                           (size_t)kw * es);
            }
            CT_MPI_CHECK(MPI_Bcast(pb, kw * nloc, t->mpi, krow, g->col));
            ct_phase_stop(&ph, PH_BCAST);
            ct_phase_start(&ph, PH_GEMM);
            if (mloc > 0 && nloc > 0)
                t->gemm("N", "N", &mloc, &nloc, &kw, alpha, pa, &ld, pb, &kw, alpha, c, &ld, 1, 1);
            ct_phase_stop(&ph, PH_GEMM);
        }
    }
    double dt = MPI_Wtime() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
    out->cpu_s = (double)(cpu1.tv_sec - cpu0.tv_sec) + 1e-9 * (double)(cpu1.tv_nsec - cpu0.tv_nsec);
    CT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, g->all));
    CT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &out->cpu_s, 1, MPI_DOUBLE, MPI_MAX, g->all));
    out->time_s = dt;
    ct_phases_reduce(&ph, g->all, 0, &out->phases);
    /* where this rank looks (and --inject-fault strikes) in this product */
    uint64_t pick = lp_mix64(lp_mix64(lp_mix64((uint64_t)o->seed + (uint64_t)g->rank) +
                                      (uint64_t)repeat) +
                             ((uint64_t)n << 8 | (uint64_t)t->name));
    long total = (long)mloc * nloc;
    if (fault && total > 0) {
        size_t at = (size_t)(lp_mix64(~pick) % (uint64_t)total);
        double re, im;
        get(t, c, at, &re, &im);
        put(t, c, at, re + 1.0, im);
    }
    int mine = total == 0 || check(t, g, n, kd, nb, (uint64_t)o->seed, pick, c, ld, local,
                                   o->check_all, &out->worst);
    if (total == 0)
        out->worst = 0.0;
    CT_MPI_CHECK(MPI_Allreduce(&mine, &out->ok, 1, MPI_INT, MPI_MIN, g->all));
    CT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &out->worst, 1, MPI_DOUBLE, MPI_MAX, g->all));
    free(a);
    free(b);
    free(c);
    free(pa);
    free(pb);
}

typedef struct {
    int all_ok;
    double best_d;
} summary;

static void result_figures(ct_json *j, const void *arg)
{
    ct_json_number(j, "best_dgemm_gflops", ((const summary *)arg)->best_d);
}

static void result_detail(ct_json *j, const void *arg)
{
    (void)arg;
    lp_blas_json(j);
}

static void usage(void)
{
    printf("usage: ct-gemm -N LIST [--nb NB] [-P P -Q Q] [--type sdcz] [--local [--k LIST]]\n"
           "               [--repeat R]\n"
           "               [--seed S] [--check-all N] [--check-only --np N] [--inject-fault]\n");
}

static int check_grid(void *o, int np, const char *prog, char *err, size_t errlen)
{
    return grid_of(o, np, prog, err, errlen);
}

int main(int argc, char **argv)
{
    options o;
    char err[1024];
    /* read before MPI starts, so that --check-only and --help never start it */
    int bad = parse_options(argc, argv, &o, err, sizeof err) != 0;
    int rank, size;
    ct_mpi_start_args start = {.parse_failed = bad, .help = o.help, .usage = usage,
                               .check_only = &o.check, .check = check_grid, .opts = &o,
                               .err = err, .errlen = sizeof err};
    int status = ct_mpi_start(&start, &argc, &argv, &rank, &size);
    if (status != CT_MPI_RUN)
        return status;
    lp_grid g;
    int in = lp_grid_init(&g, MPI_COMM_WORLD, o.p, o.q, 0);
    summary sum = {.all_ok = 1};
    for (int i = 0; in && i < o.n.count; i++)
        for (const char *tc = o.types; *tc; tc++) {
            gtype t = type_of(*tc);
            int depths = o.k.count ? o.k.count : 1;
            for (int ki = 0; ki < depths; ki++)
            for (long r = 0; r < o.repeat; r++) {
                int n = o.n.v[i], kd = o.k.count ? o.k.v[ki] : n;
                int fault = o.inject_fault && i == 0 && tc == o.types && ki == 0 && r == 0 &&
                            g.rank == o.p * o.q - 1;
                product pr;
                multiply(&t, &g, &o, n, kd, r, fault, &pr);
                double flops = t.flops_mnk * (double)n * n * kd * (o.local ? o.p * o.q : 1);
                double gf = pr.time_s > 0 ? flops / pr.time_s / 1e9 : 0.0;
                sum.all_ok &= pr.ok;
                if (t.name == 'd' && pr.ok && kd == n && gf > sum.best_d)
                    sum.best_d = gf;
                if (g.rank == 0) {
                    ct_json j;
                    ct_json_start(&j, stdout, "sample");
                    char tn[2] = {t.name, 0};
                    ct_json_string(&j, "dtype", tn);
                    ct_json_string(&j, "mode", o.local ? "local" : "summa");
                    ct_json_integer(&j, "n", n);
                    ct_json_integer(&j, "k", kd);
                    ct_json_integer(&j, "nb", o.nb);
                    ct_json_integer(&j, "p", o.p);
                    ct_json_integer(&j, "q", o.q);
                    ct_json_number(&j, "time_s", pr.time_s);
                    if (o.local) {
                        ct_json_number(&j, "cpu_s", pr.cpu_s);
                        ct_json_number(&j, "cpu_gflops", pr.cpu_s > 0 ? flops / pr.cpu_s / 1e9 : 0.0);
                    }
                    ct_json_number(&j, "flops", flops);
                    ct_json_number(&j, "gflops", gf);
                    ct_json_bool(&j, "passed", pr.ok);
                    ct_json_number(&j, "error_over_tolerance", pr.worst);
                    ct_phases_json_stats(&j, "phase_stats", &pr.phases);
                    ct_json_end(&j);
                }
                ct_phase_summary_free(&pr.phases);
            }
        }
    ct_mpi_result(sum.all_ok ? "passed" : "failed", result_figures, result_detail, &sum);
    lp_grid_free(&g);
    CT_MPI_CHECK(MPI_Finalize());
    return sum.all_ok ? 0 : 1;
}
