/* ct-linpack - HPL-equivalent distributed Linpack.
 *
 * Runs every combination of an HPL.dat (or of the lists given as flags), like xhpl, and
 * writes one JSON "sample" per combination on stdout as soon as it is measured, then one
 * "result". HPL-format text goes to --hpl-out (default: what the HPL.dat asks for, with
 * stdout replaced by stderr because stdout carries JSON; stderr without a file).
 *
 * Verification: a combination passes when its scaled residual is below the threshold;
 * the run's verification is "passed" only if every combination that ran passed. A
 * negative threshold skips the check (as HPL) and makes the run "not-verified".
 *
 * Memory: a combination is skipped, with its reason, when what its ranks need (matrix,
 * solution, panel slots and work buffers: lp_problem_mem) exceeds the memory their host
 * has available. An allocation that fails all the same stops every rank with a message
 * naming the rank, the buffer and its size (ct_mpi_agree, ct_mpi_alloc), so a run never
 * reports a combination it could not compute, whatever the threshold.
 *
 * --check-only --np N (for the launcher, before mpirun): parses the flags and the HPL.dat
 * exactly as a run would and checks every process grid against N ranks, without starting
 * MPI; prints nothing and exits 0, or prints one line "ct-linpack: <what, where>" on
 * stderr and exits 2. */
#define _POSIX_C_SOURCE 200809L
#include "ct.h"
#include "ct_opt.h"
#include "lp.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SKIP 64
#define REASON_LEN 256
#define SKIP_LEN 320

static const char *prog = "ct-linpack";

/* What every rank runs: rank 0 reads the command line (the HPL.dat need only be readable
 * there) and broadcasts it, so it holds no pointers. */
typedef struct {
    lp_params prm;
    char dat[512], hpl_out[512];
    long seed;
    int inject_fault, fail_alloc_rank;
    int chunk; /* CT_LINPACK_CHUNK, columns per piece of a bulk update; 0: not set */
} options;

/* The command line as given (pointers into argv). */
typedef struct {
    const char *dat, *hpl_out;
    int format, help;
    lp_list p, q;
    int p_given, q_given;
    ct_check_only check;
} cmdline;

static void usage(void)
{
    printf("usage: ct-linpack [--dat HPL.dat [--dat-format auto|1|2]] [options]\n"
           "  -N LIST            problem sizes (comma-separated; overrides the file)\n"
           "  --nb LIST          block sizes\n"
           "  -P LIST, -Q LIST   process grids (paired, as the Ps and Qs lines)\n"
           "  --pmap row|col     process mapping\n"
           "  --threshold T      residual threshold (negative: no check)\n"
           "  --pfact LIST       L, C, R (or 0, 1, 2)\n"
           "  --nbmin LIST, --ndiv LIST, --rfact LIST\n"
           "  --bcast LIST       0=1ring 1=1ringM 2=2ring 3=2ringM 4=long 5=longM\n"
           "  --depth LIST       look-ahead depths\n"
           "  --swap 0|1|2       bin-exch, long, mix;  --swap-threshold COLS\n"
           "  --seed S           matrix generator seed\n"
           "  --hpl-out FILE     HPL-format text output ('-' for stderr)\n"
           "  --check-only --np N  check the arguments for N ranks without running (exit 0/2)\n"
           "  --inject-fault     corrupt the factorisation (tests: the check must FAIL)\n"
           "  --inject-alloc-failure RANK  the panel allocation fails on RANK (tests)\n");
}

static int parse_table(options *o, cmdline *c, int argc, char **argv, char *err, size_t errlen)
{
    static const char *const facts[] = {"L", "C", "R", NULL};
    static const char *const pmaps[] = {"row", "col", NULL};
    static const char *const formats[] = {"auto", "1", "2", NULL};
    lp_params *p = &o->prm;
    ct_opt check[CT_CHECK_ONLY_NOPTS];
    ct_check_only_options(&c->check, check);
    const ct_opt table[] = {
        {"--dat", CT_OPT_STRING, .dest = &c->dat},
        {"--dat-format", CT_OPT_CHOICE, .dest = &c->format, .choices = formats},
        {"-N", CT_OPT_CUSTOM, .dest = &p->n, .min = 0, .max = INT_MAX, .parse = lp_opt_list},
        {"--nb", CT_OPT_CUSTOM, .dest = &p->nb, .min = 1, .max = INT_MAX, .parse = lp_opt_list},
        {"-P", CT_OPT_CUSTOM, .dest = &c->p, .min = 1, .max = INT_MAX, .parse = lp_opt_list,
         .seen = &c->p_given},
        {"-Q", CT_OPT_CUSTOM, .dest = &c->q, .min = 1, .max = INT_MAX, .parse = lp_opt_list,
         .seen = &c->q_given},
        {"--pmap", CT_OPT_CHOICE, .dest = &p->colmajor, .choices = pmaps},
        {"--threshold", CT_OPT_NUMBER, .dest = &p->threshold},
        {"--pfact", CT_OPT_CUSTOM, .dest = &p->pfact, .min = 0, .max = 2, .choices = facts,
         .parse = lp_opt_list},
        {"--nbmin", CT_OPT_CUSTOM, .dest = &p->nbmin, .min = 1, .max = INT_MAX,
         .parse = lp_opt_list},
        {"--ndiv", CT_OPT_CUSTOM, .dest = &p->ndiv, .min = 2, .max = INT_MAX,
         .parse = lp_opt_list},
        {"--rfact", CT_OPT_CUSTOM, .dest = &p->rfact, .min = 0, .max = 2, .choices = facts,
         .parse = lp_opt_list},
        {"--bcast", CT_OPT_CUSTOM, .dest = &p->bcast, .min = 0, .max = 5, .parse = lp_opt_list},
        {"--depth", CT_OPT_CUSTOM, .dest = &p->depth, .min = 0, .max = INT_MAX,
         .parse = lp_opt_list},
        {"--swap", CT_OPT_INT, .dest = &p->swap, .min = 0, .max = 2},
        {"--swap-threshold", CT_OPT_INT, .dest = &p->swap_threshold, .min = 0, .max = INT_MAX},
        {"--seed", CT_OPT_LONG, .dest = &o->seed, .min = 0, .max = LONG_MAX},
        {"--hpl-out", CT_OPT_STRING, .dest = &c->hpl_out},
        {"--inject-fault", CT_OPT_FLAG, .dest = &o->inject_fault},
        {"--inject-alloc-failure", CT_OPT_INT, .dest = &o->fail_alloc_rank, .min = 0,
         .max = INT_MAX},
        {"--help", CT_OPT_FLAG, .dest = &c->help},
        {"-h", CT_OPT_FLAG, .dest = &c->help},
        {NULL, CT_OPT_TABLE, .table = check},
        {.type = CT_OPT_END},
    };
    return ct_opt_parse(table, argc, argv, err, errlen);
}

static int copy_path(char *dst, size_t len, const char *src, const char *flag, char *err,
                     size_t errlen)
{
    if (snprintf(dst, len, "%s", src ? src : "") < (int)len)
        return 0;
    snprintf(err, errlen, "%s: %s: path longer than %zu characters", prog, flag, len - 1);
    return -1;
}

/* Flags override the HPL.dat whatever their order: a first pass checks every flag and
 * finds the file, which is read, and a second pass lays the flags over it. Returns 0, or
 * -1 with one line "ct-linpack: ..." in err (c->help and c->check are set even so). */
static int parse_options(int argc, char **argv, options *o, cmdline *c, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    memset(c, 0, sizeof *c);
    o->seed = 42;
    o->fail_alloc_rank = -1;
    lp_params_defaults(&o->prm);
    options scratch = *o;
    if (parse_table(&scratch, c, argc, argv, err, errlen))
        return -1;
    char why[512];
    if (c->dat && lp_dat_read(c->dat, c->format, &o->prm, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", prog, why);
        return -1;
    }
    parse_table(o, c, argc, argv, err, errlen); /* accepted by the first pass */
    if (c->p_given || c->q_given) {
        if (!c->p_given || !c->q_given || c->p.count != c->q.count) {
            snprintf(err, errlen, "%s: -P/-Q: give both, with as many values each", prog);
            return -1;
        }
        o->prm.p = c->p;
        o->prm.q = c->q;
        snprintf(o->prm.pq_from, sizeof o->prm.pq_from, "-P/-Q");
    }
    if (ct_check_only_validate(&c->check, prog, err, errlen))
        return -1;
    const char *chunk = getenv("CT_LINPACK_CHUNK");
    if (chunk && ct_parse_int_list(chunk, ',', NULL, 1, INT_MAX, &o->chunk, 1) != 1) {
        snprintf(err, errlen,
                 "%s: CT_LINPACK_CHUNK: expected a number of columns >= 1, got '%.100s'", prog,
                 chunk);
        return -1;
    }
    return copy_path(o->dat, sizeof o->dat, c->dat, "--dat", err, errlen) ||
                   copy_path(o->hpl_out, sizeof o->hpl_out, c->hpl_out, "--hpl-out", err, errlen)
               ? -1
               : 0;
}

/* Why a grid cannot run on nprocs ranks (the combinations on it are skipped), or NULL. */
static const char *illegal(int p, int q, int nprocs)
{
    static char why[160];
    if ((long long)p * q > nprocs) {
        snprintf(why, sizeof why,
                 "grid %d x %d (P*Q=%lld) needs more than the %d processes available", p, q,
                 (long long)p * q, nprocs);
        return why;
    }
    if (p > LP_MAX_GRID_DIM || q > LP_MAX_GRID_DIM)
        return "P and Q above 32 are not supported";
    return NULL;
}

/* --inject-alloc-failure names a rank the run does not have (ct_mpi_start's check). */
static int alloc_rank_missing(void *opts, int nprocs, const char *name, char *err, size_t errlen)
{
    const options *o = opts;
    if (o->fail_alloc_rank < nprocs)
        return 0;
    snprintf(err, errlen, "%s: --inject-alloc-failure: rank %d is not among the %d ranks", name,
             o->fail_alloc_rank, nprocs);
    return -1;
}

/* --check-only: a grid a run on np ranks would skip (ct_mpi_start's check_skips). */
static int grid_too_large(void *opts, int np, const char *name, char *err, size_t errlen)
{
    const options *o = opts;
    for (int i = 0; i < o->prm.p.count; i++) {
        const char *why = illegal(o->prm.p.v[i], o->prm.q.v[i], np);
        if (why) {
            snprintf(err, errlen, "%s: %s: %s", name, o->prm.pq_from, why);
            return -1;
        }
    }
    return 0;
}

/* A barrier that yields while it waits (MPICH's blocking collectives spin, which starves
 * the ranks still working when ranks outnumber the cores). */
static void barrier(MPI_Comm comm)
{
    MPI_Request rq;
    CT_MPI_CHECK(MPI_Ibarrier(comm, &rq));
    lp_wait_all(1, &rq);
}

typedef struct {
    double time_s, gflops, resid, norms[4], xsum;
    int passed, checked;
    ct_phase_summary phases, parts, counts; /* per rank, on rank 0 */
} outcome;

/* The grid's communicators, kept from one combination to the next while P, Q and PMAP
 * stay (grids are the outermost loop): creating them takes several blocking collectives,
 * which cost more than a small factorisation when ranks outnumber the cores. grid_host
 * holds the ranks of the grid that share a host, whose memory they share. */
static lp_grid grid;
static MPI_Comm grid_host;
static int grid_p, grid_q, grid_colmajor, grid_in = -1;

static void grid_free(void)
{
    if (grid_in == 1)
        CT_MPI_CHECK(MPI_Comm_free(&grid_host));
    if (grid_in >= 0)
        lp_grid_free(&grid);
}

static int grid_for(const lp_algo *al)
{
    if (grid_in >= 0 && grid_p == al->p && grid_q == al->q && grid_colmajor == al->colmajor)
        return grid_in;
    grid_free();
    grid_in = lp_grid_init(&grid, MPI_COMM_WORLD, al->p, al->q, al->colmajor);
    if (grid_in)
        CT_MPI_CHECK(
            MPI_Comm_split_type(grid.all, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &grid_host));
    grid_p = al->p;
    grid_q = al->q;
    grid_colmajor = al->colmajor;
    return grid_in;
}

/* Whether every host has the memory its ranks need for the combination; if not, why. */
static int fits(const lp_problem *pb, char *reason, size_t rlen)
{
    lp_mem m = lp_problem_mem(pb);
    double host_need = m.total;
    MPI_Request rq;
    CT_MPI_CHECK(
        MPI_Iallreduce(MPI_IN_PLACE, &host_need, 1, MPI_DOUBLE, MPI_SUM, grid_host, &rq));
    lp_wait_all(1, &rq);
    double avail = ct_mem_available();
    /* the worst host's need over what it has, and the largest rank's share of each part */
    double worst[5] = {avail > 0 ? host_need / avail : 0.0, m.total, m.matrix, m.panels, m.work};
    CT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, worst, 5, MPI_DOUBLE, MPI_MAX, grid.all, &rq));
    lp_wait_all(1, &rq);
    if (worst[0] <= 1.0)
        return 1;
    snprintf(reason, rlen,
             "does not fit in memory: up to %.1f MB per rank (matrix %.1f, panels %.1f, work "
             "%.1f MB), %.3g times what a host has available",
             worst[1] / 1e6, worst[2] / 1e6, worst[3] / 1e6, worst[4] / 1e6, worst[0]);
    return 0;
}

/* Runs one combination on the ranks of the grid; returns 0, or -1 when it does not fit
 * (then reason is set). Ranks outside the grid return at once. */
static int run_one(const lp_algo *al, outcome *out, char *reason, size_t rlen)
{
    if (!grid_for(al))
        return 0;
    lp_problem pb;
    lp_problem_init(&pb, al, &grid);
    if (!fits(&pb, reason, rlen))
        return -1;
    lp_problem_alloc(&pb);
    lp_matgen(&grid, al->n, al->nb, al->seed, pb.a, pb.lda);
    lp_stats_reset();
    barrier(grid.all);
    double t0 = MPI_Wtime();
    lp_pgesv(&pb);
    double t = MPI_Wtime() - t0;
    MPI_Request rq;
    CT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, grid.all, &rq));
    lp_wait_all(1, &rq);
    out->time_s = t;
    double nn = (double)al->n;
    out->gflops = t > 0 ? (2.0 / 3.0 * nn * nn * nn + 1.5 * nn * nn) / t / 1e9 : 0.0;
    out->checked = al->threshold >= 0.0;
    if (out->checked) {
        lp_verify(&pb, &out->resid, out->norms);
        out->passed = out->resid < al->threshold; /* NaN fails */
    }
    out->xsum = 0.0;
    for (int i = 0; i < al->n; i++)
        out->xsum += pb.x[i];
    ct_phases_reduce(&lp_phases, grid.all, 0, &out->phases);
    ct_phases_reduce(&lp_parts, grid.all, 0, &out->parts);
    ct_phases_reduce(&lp_counts, grid.all, 0, &out->counts);
    lp_problem_free(&pb);
    return 0;
}

static const char *fact_word(int f) { return f == LP_LEFT ? "left" : f == LP_CROUT ? "crout" : "right"; }
static const char *bcast_word(int b)
{
    static const char *const w[] = {"1ring", "1ringM", "2ring", "2ringM", "long", "longM"};
    return b >= 0 && b <= 5 ? w[b] : "?";
}

static void json_algo(ct_json *j, const lp_algo *a)
{
    char code[16];
    lp_variant_code(a, code);
    ct_json_string(j, "variant", code);
    ct_json_integer(j, "n", a->n);
    ct_json_integer(j, "nb", a->nb);
    ct_json_integer(j, "p", a->p);
    ct_json_integer(j, "q", a->q);
    ct_json_string(j, "pmap", a->colmajor ? "column-major" : "row-major");
    ct_json_string(j, "pfact", fact_word(a->pfact));
    ct_json_integer(j, "nbmin", a->nbmin);
    ct_json_integer(j, "ndiv", a->ndiv);
    ct_json_string(j, "rfact", fact_word(a->rfact));
    ct_json_string(j, "bcast", bcast_word(a->bcast));
    ct_json_integer(j, "depth", a->depth);
    ct_json_string(j, "swap", a->swap == 0 ? "bin-exch" : a->swap == 1 ? "long" : "mix");
    ct_json_integer(j, "swap_threshold", a->swap_threshold);
}

static void json_sample(const lp_algo *a, const outcome *o)
{
    ct_json j;
    ct_json_start(&j, stdout, "sample");
    json_algo(&j, a);
    ct_json_number(&j, "time_s", o->time_s);
    ct_json_number(&j, "gflops", o->gflops);
    if (o->checked) {
        ct_json_number(&j, "residual", o->resid);
        ct_json_bool(&j, "passed", o->passed);
    } else {
        ct_json_number(&j, "residual", NAN);
        ct_json_string(&j, "passed", "not-verified");
    }
    ct_json_number(&j, "threshold", a->threshold);
    ct_json_open_object(&j, "norms");
    ct_json_number(&j, "ax_minus_b", o->norms[0]);
    ct_json_number(&j, "a", o->norms[1]);
    ct_json_number(&j, "x", o->norms[2]);
    ct_json_number(&j, "b", o->norms[3]);
    ct_json_close_object(&j);
    ct_json_number(&j, "x_sum", o->xsum);
    ct_json_bool(&j, "fault_injected", a->inject_fault);
    /* per-rank phases (seconds) and their spread, the parts inside them (lp.h), the
     * update DGEMM's rate, traffic, and the load imbalance */
    ct_phases_json_per_rank(&j, "phases", &o->phases);
    ct_phases_json_stats(&j, "phase_stats", &o->phases);
    ct_phases_json_per_rank(&j, "phase_parts", &o->parts);
    int n = o->phases.nranks;
    const double *count = o->counts.per_rank, *part = o->parts.per_rank;
    /* the update DGEMM's flops and rate on each rank, to set beside a square DGEMM's
     * (ct-gemm --local) */
    ct_json_open_array(&j, "update_dgemm_flops");
    for (int r = 0; r < n; r++)
        ct_json_number(&j, NULL, count[(size_t)r * LP_C_NCOUNT + LP_C_DGEMM_FLOPS]);
    ct_json_close_array(&j);
    ct_json_open_array(&j, "update_dgemm_gflops");
    for (int r = 0; r < n; r++) {
        double s = part[(size_t)r * LP_P_NPART + LP_P_DGEMM];
        double flops = count[(size_t)r * LP_C_NCOUNT + LP_C_DGEMM_FLOPS];
        ct_json_number(&j, NULL, s > 0 ? flops / s / 1e9 : 0.0);
    }
    ct_json_close_array(&j);
    ct_json_open_array(&j, "bytes_sent");
    double total = 0.0, busy_max = 0.0, busy_sum = 0.0;
    for (int r = 0; r < n; r++) {
        double sent = count[(size_t)r * LP_C_NCOUNT + LP_C_BYTES_SENT];
        ct_json_number(&j, NULL, sent);
        total += sent;
        const double *t = o->phases.per_rank + (size_t)r * LP_T_NPHASE;
        double busy = t[LP_T_PFACT] + t[LP_T_UPDATE];
        busy_sum += busy;
        if (busy > busy_max)
            busy_max = busy;
    }
    ct_json_close_array(&j);
    ct_json_number(&j, "bytes_total", total);
    /* load imbalance: max over ranks of compute time (pfact + update) / mean - 1 */
    ct_json_number(&j, "load_imbalance", busy_sum > 0 ? busy_max / (busy_sum / n) - 1.0 : 0.0);
    ct_json_end(&j);
}

/* What the result line reports, on rank 0. */
typedef struct {
    const options *o;
    int total, npass, nfail, nskip;
    double best;
    const char *hpl_out;
    char (*skipped)[SKIP_LEN];
} summary;

static void result_figures(ct_json *j, const void *arg)
{
    const summary *s = arg;
    ct_json_integer(j, "tests", s->total);
    ct_json_integer(j, "passed", s->npass);
    ct_json_integer(j, "failed", s->nfail);
    ct_json_integer(j, "skipped", s->nskip);
    ct_json_number(j, "best_gflops", s->best);
}

static void result_detail(ct_json *j, const void *arg)
{
    const summary *s = arg;
    const options *o = s->o;
    lp_blas_json(j);
    ct_json_string(j, "dat", o->dat);
    if (o->dat[0])
        ct_json_integer(j, "dat_format", o->prm.format);
    ct_json_string(j, "hpl_out", s->hpl_out);
    ct_json_integer(j, "seed", o->seed);
    ct_json_open_array(j, "warnings");
    for (int i = 0; i < o->prm.nwarn; i++)
        ct_json_string(j, NULL, o->prm.warn[i]);
    ct_json_close_array(j);
    ct_json_open_array(j, "skipped");
    for (int i = 0; i < s->nskip && i < MAX_SKIP; i++)
        ct_json_string(j, NULL, s->skipped[i]);
    ct_json_close_array(j);
}

int main(int argc, char **argv)
{
    static options o; /* large (every list and warning), and broadcast as it is */
    cmdline c;
    char err[1024];
    prog = ct_basename(argv[0]);
    /* every process reads the command line before MPI starts, so that --check-only and
     * --help never start it; in a run, rank 0's reading is the one that counts (shared) */
    int bad = parse_options(argc, argv, &o, &c, err, sizeof err) != 0;
    int rank, size;
    ct_mpi_start_args start = {.parse_failed = bad, .help = c.help, .usage = usage,
                               .check_only = &c.check, .check = alloc_rank_missing,
                               .check_skips = grid_too_large, .opts = &o, .shared = sizeof o,
                               .err = err, .errlen = sizeof err};
    int status = ct_mpi_start(&start, &argc, &argv, &rank, &size);
    if (status != CT_MPI_RUN)
        return status;
    lp_params *p = &o.prm;

    FILE *txt = NULL;
    char txt_name[512] = "";
    if (rank == 0) {
        if (o.hpl_out[0] && strcmp(o.hpl_out, "-"))
            snprintf(txt_name, sizeof txt_name, "%s", o.hpl_out);
        else if (!o.hpl_out[0] && o.dat[0] && p->device != 6 && p->device != 7)
            snprintf(txt_name, sizeof txt_name, "%s", p->out_name);
        txt = txt_name[0] ? fopen(txt_name, "w") : stderr;
        if (!txt) {
            ct_report_error("%s: cannot open HPL output file %s", prog, txt_name);
            txt = stderr;
        }
        for (int i = 0; i < p->nwarn; i++)
            fprintf(stderr, "warning: %s\n", p->warn[i]);
        lp_out_header(txt, p);
    }

    static char skipped[MAX_SKIP][SKIP_LEN];
    summary sum = {.o = &o, .hpl_out = txt_name[0] ? txt_name : "stderr", .skipped = skipped};
    for (int ig = 0; ig < p->p.count; ig++)
        for (int in = 0; in < p->n.count; in++)
            for (int inb = 0; inb < p->nb.count; inb++)
                for (int id = 0; id < p->depth.count; id++)
                    for (int ib = 0; ib < p->bcast.count; ib++)
                        for (int ir = 0; ir < p->rfact.count; ir++)
                            for (int iv = 0; iv < p->ndiv.count; iv++)
                                for (int im = 0; im < p->nbmin.count; im++)
                                    for (int ipf = 0; ipf < p->pfact.count; ipf++) {
        lp_algo a = {.n = p->n.v[in], .nb = p->nb.v[inb], .p = p->p.v[ig], .q = p->q.v[ig],
                     .colmajor = p->colmajor, .pfact = p->pfact.v[ipf], .nbmin = p->nbmin.v[im],
                     .ndiv = p->ndiv.v[iv], .rfact = p->rfact.v[ir], .bcast = p->bcast.v[ib],
                     .depth = p->depth.v[id], .swap = p->swap, .swap_threshold = p->swap_threshold,
                     .threshold = p->threshold, .seed = (uint64_t)o.seed,
                     .inject_fault = o.inject_fault, .fail_alloc_rank = o.fail_alloc_rank,
                     .chunk = o.chunk};
        sum.total++;
        char reason[REASON_LEN] = "";
        const char *why = illegal(a.p, a.q, size);
        outcome oc = {0};
        if (!why && run_one(&a, &oc, reason, sizeof reason))
            why = reason;
        if (why) {
            sum.nskip++;
            if (rank == 0) {
                lp_out_skip(txt, &a, why);
                char code[16];
                lp_variant_code(&a, code);
                if (sum.nskip <= MAX_SKIP)
                    snprintf(skipped[sum.nskip - 1], SKIP_LEN, "%s N=%d NB=%d P=%d Q=%d: %s",
                             code, a.n, a.nb, a.p, a.q, why);
            }
            barrier(MPI_COMM_WORLD);
            continue;
        }
        if (rank == 0) {
            lp_out_result(txt, &a, oc.time_s, oc.gflops);
            if (oc.checked)
                lp_out_residual(txt, oc.resid, a.threshold, oc.passed, oc.norms, DBL_EPSILON / 2);
            json_sample(&a, &oc);
            if (oc.checked && oc.passed)
                sum.npass++;
            else if (oc.checked)
                sum.nfail++;
            if (oc.gflops > sum.best && (!oc.checked || oc.passed))
                sum.best = oc.gflops;
        }
        ct_phase_summary_free(&oc.phases);
        ct_phase_summary_free(&oc.parts);
        ct_phase_summary_free(&oc.counts);
        barrier(MPI_COMM_WORLD);
    }

    grid_free();
    int measured = sum.nskip < sum.total;
    if (rank == 0) {
        lp_out_summary(txt, sum.total, sum.npass, sum.nfail, sum.nskip);
        int ran = sum.npass + sum.nfail;
        const char *verdict = sum.nfail > 0                    ? "failed"
                              : ran > 0 && p->threshold >= 0.0 ? "passed"
                                                               : "not-verified";
        ct_mpi_result(verdict, result_figures, result_detail, &sum);
        if (txt != stderr)
            fclose(txt);
        /* HPL counts a run of skips as a run; a measurement that measured nothing is not */
        if (!measured)
            ct_report_error("%s: no combination ran (%d of %d skipped)%s%s", prog, sum.nskip,
                            sum.total, sum.total > 0 ? "; first: " : "",
                            sum.total > 0 ? skipped[0] : "");
    }
    CT_MPI_CHECK(MPI_Finalize());
    return measured ? 0 : 1;
}
