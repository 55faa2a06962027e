/* ct-gemm - distributed matrix product C = A B (SUMMA) on a P x Q block-cyclic grid in
 * single, double, complex and double complex, or, with --local, every rank multiplying
 * its own matrices with no communication (the machine's aggregate xGEMM rate, the peak
 * Linpack is compared with).
 *
 * SUMMA: for each block column k of A / block row k of B, the owning process column
 * broadcasts its piece of A along the process rows and the owning process row its piece
 * of B along the process columns; every process adds the product into its C.
 *
 * Flop counts: 2 M N K for real types; 8 M N K for complex ones (a complex multiply-add
 * is 4 real multiplications and 4 additions), which is why complex GEMM shows a higher
 * rate for the same data movement (seeds/002).
 *
 * Verification: entries of C are compared with the serial product computed from the
 * generator (any element of A and B can be regenerated anywhere): every local entry for
 * N <= --check-all (default 256), otherwise a sample of 64 entries per rank; tolerance
 * 4 K eps max|a| max|b| per entry. */
#define _POSIX_C_SOURCE 200809L
#include "ct.h"
#include "lp.h"

#include <complex.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Element (i, j) of matrix `which` (0 = A, 1 = B), part 0 real / 1 imaginary. */
static double gen(uint64_t seed, int which, int part, int n, int i, int j)
{
    uint64_t idx = ((uint64_t)j * (uint64_t)n + (uint64_t)i) * 4u + (uint64_t)(which * 2 + part);
    return (double)(mix64(seed + idx * 0x9e3779b97f4a7c15ULL) >> 11) * (1.0 / 9007199254740992.0) - 0.5;
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

/* Local block of an n x n matrix, generated; local layout column-major, ld = mloc. */
static void fill(const gtype *t, const lp_grid *g, int n, int nb, uint64_t seed, int which, void *m,
                 int ld, int local)
{
    int mloc = local ? n : lp_numroc(n, nb, g->myrow, g->nprow);
    int nloc = local ? n : lp_numroc(n, nb, g->mycol, g->npcol);
    for (int lc = 0; lc < nloc; lc++) {
        int gj = local ? lc : lp_l2g(lc, nb, g->mycol, g->npcol);
        for (int lr = 0; lr < mloc; lr++) {
            int gi = local ? lr : lp_l2g(lr, nb, g->myrow, g->nprow);
            put(t, m, (size_t)lc * ld + lr, gen(seed, which, 0, n, gi, gj),
                t->complex_ ? gen(seed, which, 1, n, gi, gj) : 0.0);
        }
    }
}

/* Compares local entries of C with the product recomputed from the generator. */
static int check(const gtype *t, const lp_grid *g, int n, int nb, uint64_t seed, const void *c, int ld,
                 int local, int check_all, double *worst)
{
    int mloc = local ? n : lp_numroc(n, nb, g->myrow, g->nprow);
    int nloc = local ? n : lp_numroc(n, nb, g->mycol, g->npcol);
    long total = (long)mloc * nloc;
    int all = n <= check_all;
    long count = all ? total : (total < 64 ? total : 64);
    double tol = 4.0 * n * t->eps * (t->complex_ ? 2.0 : 1.0) * 0.25; /* |a|,|b| <= 0.5 */
    int ok = 1;
    *worst = 0.0;
    for (long e = 0; e < count; e++) {
        long at = all ? e : (long)(mix64(seed ^ (uint64_t)(e + 17)) % (uint64_t)total);
        int lr = (int)(at % (mloc > 0 ? mloc : 1)), lc = (int)(at / (mloc > 0 ? mloc : 1));
        int gi = local ? lr : lp_l2g(lr, nb, g->myrow, g->nprow);
        int gj = local ? lc : lp_l2g(lc, nb, g->mycol, g->npcol);
        long double re = 0, im = 0;
        for (int k = 0; k < n; k++) {
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

static double run_one(const gtype *t, const lp_grid *g, int n, int nb, uint64_t seed, int local,
                      int check_all, int *ok, double *worst)
{
    int mloc = local ? n : lp_numroc(n, nb, g->myrow, g->nprow);
    int nloc = local ? n : lp_numroc(n, nb, g->mycol, g->npcol);
    int ld = mloc > 0 ? mloc : 1;
    size_t es = t->size;
    char *a = calloc((size_t)ld * (nloc > 0 ? nloc : 1), es), *b = calloc((size_t)ld * (nloc > 0 ? nloc : 1), es);
    char *c = calloc((size_t)ld * (nloc > 0 ? nloc : 1), es);
    char *pa = calloc((size_t)ld * nb + 1, es), *pb = calloc((size_t)nb * (nloc > 0 ? nloc : 1) + 1, es);
    fill(t, g, n, nb, seed, 0, a, ld, local);
    fill(t, g, n, nb, seed, 1, b, ld, local);
    double one[2] = {1.0, 0.0};
    float onef[2] = {1.0f, 0.0f};
    const void *alpha = (t->name == 's' || t->name == 'c') ? (const void *)onef : (const void *)one;
    MPI_Barrier(g->all);
    double t0 = MPI_Wtime();
    if (local) {
        if (n > 0)
            t->gemm("N", "N", &n, &n, &n, alpha, a, &ld, b, &ld, alpha, c, &ld, 1, 1);
    } else {
        for (int k0 = 0; k0 < n; k0 += nb) {
            int kw = n - k0 < nb ? n - k0 : nb;
            int kcol = lp_owner(k0, nb, g->npcol), krow = lp_owner(k0, nb, g->nprow);
            /* A(:, k0:k0+kw) along my process row */
            if (g->mycol == kcol)
                memcpy(pa, a + (size_t)lp_g2l(k0, nb, g->npcol) * ld * es, (size_t)ld * kw * es);
            MPI_Bcast(pa, ld * kw, t->mpi, kcol, g->row);
            /* B(k0:k0+kw, :) along my process column, packed kw x nloc */
            if (g->myrow == krow) {
                int lr = lp_g2l(k0, nb, g->nprow);
                for (int j = 0; j < nloc; j++)
                    memcpy(pb + ((size_t)j * kw) * es, b + ((size_t)j * ld + lr) * es, (size_t)kw * es);
            }
            MPI_Bcast(pb, kw * nloc, t->mpi, krow, g->col);
            if (mloc > 0 && nloc > 0)
                t->gemm("N", "N", &mloc, &nloc, &kw, alpha, pa, &ld, pb, &kw, alpha, c, &ld, 1, 1);
        }
    }
    double dt = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, g->all);
    int mine = check(t, g, n, nb, seed, c, ld, local, check_all, worst);
    MPI_Allreduce(&mine, ok, 1, MPI_INT, MPI_MIN, g->all);
    MPI_Allreduce(MPI_IN_PLACE, worst, 1, MPI_DOUBLE, MPI_MAX, g->all);
    free(a);
    free(b);
    free(c);
    free(pa);
    free(pb);
    return dt;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int ns[LP_MAX_PARAM] = {1000}, nn = 1, nbv = 192, p = 1, q = size, local = 0, check_all = 256;
    long repeat = 1, seedv = 42;
    char types[8] = "sdcz";
    char err[256] = "";
    static const struct option longs[] = {{"nb", required_argument, 0, 'b'}, {"type", required_argument, 0, 't'},
                                          {"local", no_argument, 0, 'l'}, {"repeat", required_argument, 0, 'r'},
                                          {"seed", required_argument, 0, 's'}, {"check-all", required_argument, 0, 'c'},
                                          {0, 0, 0, 0}};
    int o, bad = 0;
    opterr = 0;
    while (!bad && (o = getopt_long(argc, argv, "N:P:Q:", longs, NULL)) != -1) {
        long v;
        switch (o) {
        case 'N': bad = lp_parse_list(optarg, 0, ns, &nn, err, sizeof err); break;
        case 'P': bad = ct_parse_long(optarg, &v) || v < 1; p = (int)v; break;
        case 'Q': bad = ct_parse_long(optarg, &v) || v < 1; q = (int)v; break;
        case 'b': bad = ct_parse_long(optarg, &v) || v < 1; nbv = (int)v; break;
        case 'r': bad = ct_parse_long(optarg, &repeat) || repeat < 1; break;
        case 's': bad = ct_parse_long(optarg, &seedv); break;
        case 'c': bad = ct_parse_long(optarg, &v); check_all = (int)v; break;
        case 'l': local = 1; break;
        case 't':
            bad = strlen(optarg) == 0 || strlen(optarg) > 4 || strspn(optarg, "sdcz") != strlen(optarg);
            snprintf(types, sizeof types, "%s", optarg);
            break;
        default: bad = 1;
        }
        if (bad && !err[0])
            snprintf(err, sizeof err, "bad option or value near '%s'", argv[optind - 1]);
    }
    if (!bad && !local && p * q > size) {
        bad = 1;
        snprintf(err, sizeof err, "P*Q=%d needs more than the %d processes available", p * q, size);
    }
    if (bad) {
        if (rank == 0)
            ct_report_error("%s (usage: ct-gemm -N LIST [--nb NB] [-P P -Q Q] [--type sdcz] [--local] [--repeat R])", err);
        MPI_Finalize();
        return 2;
    }
    lp_grid g;
    if (local)
        p = 1, q = size;
    int in = lp_grid_init(&g, MPI_COMM_WORLD, p, q, 0);
    int all_ok = 1;
    double best_d = 0.0;
    if (in) {
        for (int i = 0; i < nn; i++)
            for (const char *tc = types; *tc; tc++) {
                gtype t = type_of(*tc);
                for (long r = 0; r < repeat; r++) {
                    int ok;
                    double worst;
                    double dt = run_one(&t, &g, ns[i], nbv, (uint64_t)seedv, local, check_all, &ok, &worst);
                    double n3 = (double)ns[i] * ns[i] * ns[i];
                    double flops = t.flops_mnk * n3 * (local ? p * q : 1);
                    double gf = dt > 0 ? flops / dt / 1e9 : 0.0;
                    all_ok &= ok;
                    if (t.name == 'd' && ok && gf > best_d)
                        best_d = gf;
                    if (g.rank == 0) {
                        ct_json j;
                        ct_json_start(&j, stdout, "sample");
                        char tn[2] = {t.name, 0};
                        ct_json_string(&j, "dtype", tn);
                        ct_json_string(&j, "mode", local ? "local" : "summa");
                        ct_json_integer(&j, "n", ns[i]);
                        ct_json_integer(&j, "nb", nbv);
                        ct_json_integer(&j, "p", p);
                        ct_json_integer(&j, "q", q);
                        ct_json_number(&j, "time_s", dt);
                        ct_json_number(&j, "flops", flops);
                        ct_json_number(&j, "gflops", gf);
                        ct_json_bool(&j, "passed", ok);
                        ct_json_number(&j, "error_over_tolerance", worst);
                        ct_json_end(&j);
                    }
                }
            }
    }
    if (rank == 0) {
        lp_blas_info bi;
        lp_blas_identify(&bi);
        ct_json j;
        ct_json_start(&j, stdout, "result");
        ct_json_string(&j, "verification", all_ok ? "passed" : "failed");
        ct_json_open_object(&j, "figures");
        ct_json_number(&j, "best_dgemm_gflops", best_d);
        ct_json_close_object(&j);
        ct_json_open_object(&j, "detail");
        ct_json_integer(&j, "ranks", size);
        ct_json_open_object(&j, "blas");
        ct_json_string(&j, "library", bi.library);
        ct_json_string(&j, "core", bi.core);
        ct_json_string(&j, "config", bi.config);
        ct_json_close_object(&j);
        ct_json_close_object(&j);
        ct_json_end(&j);
    }
    lp_grid_free(&g);
    MPI_Finalize();
    return 0;
}
