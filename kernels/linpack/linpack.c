/* ct-linpack - HPL-equivalent distributed Linpack.
 *
 * Runs every combination of an HPL.dat (or of the lists given as flags), like xhpl, and
 * writes one JSON "sample" per combination on stdout as soon as it is measured, then one
 * "result". HPL-format text goes to --hpl-out (default: what the HPL.dat asks for, with
 * stdout replaced by stderr because stdout carries JSON; stderr without a file).
 *
 * Verification: a combination passes when its scaled residual is below the threshold;
 * the run's verification is "passed" only if every combination that ran passed. A
 * negative threshold skips the check (as HPL) and makes the run "not-verified". */
#define _POSIX_C_SOURCE 200809L
#include "ct.h"
#include "lp.h"

#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SKIP 64

typedef struct {
    lp_params prm;
    char dat[512], hpl_out[512];
    int format;
    uint64_t seed;
    int inject_fault;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ct-linpack [--dat HPL.dat [--dat-format auto|1|2]] [options]\n"
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
            "  --inject-fault     corrupt the factorisation (tests: the check must FAIL)\n");
}

static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen)
{
    enum { O_NB = 256, O_PMAP, O_THR, O_PFACT, O_NBMIN, O_NDIV, O_RFACT, O_BCAST, O_DEPTH,
           O_SWAP, O_SWAPT, O_SEED, O_OUT, O_FAULT, O_DAT, O_FMT, O_HELP };
    static const struct option longs[] = {
        {"nb", required_argument, 0, O_NB},       {"pmap", required_argument, 0, O_PMAP},
        {"threshold", required_argument, 0, O_THR}, {"pfact", required_argument, 0, O_PFACT},
        {"nbmin", required_argument, 0, O_NBMIN}, {"ndiv", required_argument, 0, O_NDIV},
        {"rfact", required_argument, 0, O_RFACT}, {"bcast", required_argument, 0, O_BCAST},
        {"depth", required_argument, 0, O_DEPTH}, {"swap", required_argument, 0, O_SWAP},
        {"swap-threshold", required_argument, 0, O_SWAPT},
        {"seed", required_argument, 0, O_SEED},   {"hpl-out", required_argument, 0, O_OUT},
        {"inject-fault", no_argument, 0, O_FAULT}, {"dat", required_argument, 0, O_DAT},
        {"dat-format", required_argument, 0, O_FMT}, {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0}};
    /* first pass: the file, so that flags override it whatever their order */
    o->seed = 42;
    lp_params_defaults(&o->prm);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dat-format") && i + 1 < argc) {
            const char *v = argv[i + 1];
            o->format = !strcmp(v, "1") ? 1 : !strcmp(v, "2") ? 2 : 0;
            if (strcmp(v, "1") && strcmp(v, "2") && strcmp(v, "auto")) {
                snprintf(err, errlen, "--dat-format: expected auto, 1 or 2, got '%s'", v);
                return -1;
            }
        }
    }
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--dat") && i + 1 < argc) {
            snprintf(o->dat, sizeof o->dat, "%s", argv[i + 1]);
            if (lp_dat_read(o->dat, o->format, &o->prm, err, errlen))
                return -1;
        }
    lp_params *p = &o->prm;
    int c, np_ = -1, nq_ = -1;
    int pv[LP_MAX_PARAM], qv[LP_MAX_PARAM];
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "N:P:Q:h", longs, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'N': rc = lp_parse_list(optarg, 0, p->n, &p->nn, err, errlen); break;
        case O_NB: rc = lp_parse_list(optarg, 0, p->nb, &p->nnb, err, errlen); break;
        case 'P': rc = lp_parse_list(optarg, 0, pv, &np_, err, errlen); break;
        case 'Q': rc = lp_parse_list(optarg, 0, qv, &nq_, err, errlen); break;
        case O_PMAP:
            if (!strcmp(optarg, "row") || !strcmp(optarg, "0"))
                p->colmajor = 0;
            else if (!strcmp(optarg, "col") || !strcmp(optarg, "1"))
                p->colmajor = 1;
            else {
                snprintf(err, errlen, "--pmap: expected row or col, got '%s'", optarg);
                rc = -1;
            }
            break;
        case O_THR: {
            char *end;
            p->threshold = strtod(optarg, &end);
            if (end == optarg || *end) {
                snprintf(err, errlen, "--threshold: not a number: '%s'", optarg);
                rc = -1;
            }
            break;
        }
        case O_PFACT: rc = lp_parse_list(optarg, 1, p->pfact, &p->npfact, err, errlen); break;
        case O_NBMIN: rc = lp_parse_list(optarg, 0, p->nbmin, &p->nnbmin, err, errlen); break;
        case O_NDIV: rc = lp_parse_list(optarg, 0, p->ndiv, &p->nndiv, err, errlen); break;
        case O_RFACT: rc = lp_parse_list(optarg, 1, p->rfact, &p->nrfact, err, errlen); break;
        case O_BCAST: rc = lp_parse_list(optarg, 0, p->bcast, &p->nbcast, err, errlen); break;
        case O_DEPTH: rc = lp_parse_list(optarg, 0, p->depth, &p->ndepth, err, errlen); break;
        case O_SWAP: {
            long v;
            if (ct_parse_long(optarg, &v) || v > 2) {
                snprintf(err, errlen, "--swap: expected 0, 1 or 2, got '%s'", optarg);
                rc = -1;
            } else
                p->swap = (int)v;
            break;
        }
        case O_SWAPT: {
            long v;
            if (ct_parse_long(optarg, &v)) {
                snprintf(err, errlen, "--swap-threshold: expected a column count, got '%s'", optarg);
                rc = -1;
            } else
                p->swap_threshold = (int)v;
            break;
        }
        case O_SEED: {
            long v;
            if (ct_parse_long(optarg, &v)) {
                snprintf(err, errlen, "--seed: expected a non-negative integer, got '%s'", optarg);
                rc = -1;
            } else
                o->seed = (uint64_t)v;
            break;
        }
        case O_OUT: snprintf(o->hpl_out, sizeof o->hpl_out, "%s", optarg); break;
        case O_FAULT: o->inject_fault = 1; break;
        case O_DAT:
        case O_FMT: break; /* handled above */
        case 'h':
        case O_HELP: usage(stdout); exit(0);
        default:
            snprintf(err, errlen, "unknown or incomplete option '%s'", argv[optind - 1]);
            return -1;
        }
        if (rc)
            return -1;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
        return -1;
    }
    if (np_ >= 0 || nq_ >= 0) {
        if (np_ < 0 || nq_ < 0 || np_ != nq_) {
            snprintf(err, errlen, "-P and -Q must be given together with the same number of values");
            return -1;
        }
        p->npq = np_;
        memcpy(p->p, pv, sizeof pv);
        memcpy(p->q, qv, sizeof qv);
    }
    return 0;
}

/* Why a combination cannot run, or NULL. */
/* A barrier that yields while it waits (MPICH's blocking collectives spin, which starves
 * the ranks still working when ranks outnumber the cores). */
static void barrier(MPI_Comm comm)
{
    MPI_Request rq;
    MPI_Ibarrier(comm, &rq);
    lp_wait_all(1, &rq);
}

static const char *illegal(const lp_algo *a, int nprocs)
{
    static char why[160];
    if (a->n < 0)
        return "N must be at least 0";
    if (a->nb < 1)
        return "NB must be at least 1";
    if (a->p < 1 || a->q < 1)
        return "P and Q must be at least 1";
    if (a->p * a->q > nprocs) {
        snprintf(why, sizeof why, "P*Q=%d needs more than the %d processes available", a->p * a->q,
                 nprocs);
        return why;
    }
    if (a->p > LP_MAX_GRID_DIM || a->q > LP_MAX_GRID_DIM)
        return "P and Q above 32 are not supported";
    if (a->nbmin < 1)
        return "NBMIN must be at least 1";
    if (a->ndiv < 2)
        return "NDIV must be at least 2";
    if (a->depth < 0)
        return "DEPTH must be at least 0";
    if (a->pfact < 0 || a->pfact > 2 || a->rfact < 0 || a->rfact > 2)
        return "PFACT and RFACT must be 0, 1 or 2";
    if (a->bcast < 0 || a->bcast > 5)
        return "BCAST must be 0..5";
    return NULL;
}

typedef struct {
    double time_s, gflops, resid, norms[4], xsum;
    int passed, checked;
    lp_stats *ranks; /* per rank, on rank 0 */
    int nranks;
} outcome;

/* The grid's communicators, kept from one combination to the next while P, Q and PMAP
 * stay (grids are the outermost loop): creating them takes several blocking collectives,
 * which cost more than a small factorisation when ranks outnumber the cores. */
static lp_grid grid;
static int grid_p, grid_q, grid_colmajor, grid_in = -1;

static int grid_for(const lp_algo *al)
{
    if (grid_in >= 0 && grid_p == al->p && grid_q == al->q && grid_colmajor == al->colmajor)
        return grid_in;
    if (grid_in >= 0)
        lp_grid_free(&grid);
    grid_in = lp_grid_init(&grid, MPI_COMM_WORLD, al->p, al->q, al->colmajor);
    grid_p = al->p;
    grid_q = al->q;
    grid_colmajor = al->colmajor;
    return grid_in;
}

/* Runs one combination on the ranks of the grid; returns 0, or -1 when memory could
 * not be allocated (then reason is set). Ranks outside the grid return at once. */
static int run_one(const lp_algo *al, outcome *out, char *reason, size_t rlen)
{
    if (!grid_for(al))
        return 0;
    lp_grid g = grid;
    lp_problem pb = {.algo = al, .grid = &g, .n = al->n, .nb = al->nb};
    pb.mloc = lp_numroc(al->n, al->nb, g.myrow, g.nprow);
    pb.nloc = lp_numroc(al->n + 1, al->nb, g.mycol, g.npcol);
    int lda = pb.mloc > 0 ? pb.mloc : 1;
    lda = (lda + 7) / 8 * 8;
    if (lda % 512 == 0)
        lda += 8; /* avoid a power-of-two stride between columns */
    pb.lda = lda;
    size_t bytes = ((size_t)lda * (size_t)(pb.nloc > 0 ? pb.nloc : 1) * sizeof(double) + 63) / 64 * 64;
    pb.a = aligned_alloc(64, bytes);
    pb.x = malloc(((size_t)al->n + 1) * sizeof(double));
    int ok = pb.a && pb.x, all_ok;
    MPI_Request rq;
    MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, g.all, &rq);
    lp_wait_all(1, &rq);
    if (!all_ok) {
        snprintf(reason, rlen, "cannot allocate the local matrix (%.1f MB on some rank)",
                 (double)bytes / 1e6);
        free(pb.a);
        free(pb.x);
        return -1;
    }
    lp_matgen(&g, al->n, al->nb, al->seed, pb.a, lda);
    memset(&lp_stat, 0, sizeof lp_stat);
    barrier(g.all);
    double t0 = MPI_Wtime();
    lp_pgesv(&pb);
    double t = MPI_Wtime() - t0;
    MPI_Iallreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, g.all, &rq);
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
    int size;
    MPI_Comm_size(g.all, &size);
    out->nranks = size;
    out->ranks = g.rank == 0 ? malloc((size_t)size * sizeof(lp_stats)) : NULL;
    MPI_Igather(&lp_stat, (int)sizeof lp_stat, MPI_BYTE, out->ranks, (int)sizeof lp_stat, MPI_BYTE,
                0, g.all, &rq);
    lp_wait_all(1, &rq);
    free(pb.a);
    free(pb.x);
    free(pb.work);
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
    /* per-rank phases (seconds), traffic, and the derived maxima / imbalance */
    ct_json_open_object(&j, "phases");
    for (int ph = 0; ph < LP_T_NPHASE; ph++) {
        ct_json_open_array(&j, lp_phase_names[ph]);
        for (int r = 0; r < o->nranks; r++)
            ct_json_number(&j, NULL, o->ranks[r].t[ph]);
        ct_json_close_array(&j);
    }
    ct_json_close_object(&j);
    ct_json_open_array(&j, "bytes_sent");
    double total = 0.0, busy_max = 0.0, busy_sum = 0.0;
    for (int r = 0; r < o->nranks; r++) {
        ct_json_number(&j, NULL, o->ranks[r].bytes_sent);
        total += o->ranks[r].bytes_sent;
        double busy = o->ranks[r].t[LP_T_PFACT] + o->ranks[r].t[LP_T_UPDATE];
        busy_sum += busy;
        if (busy > busy_max)
            busy_max = busy;
    }
    ct_json_close_array(&j);
    ct_json_number(&j, "bytes_total", total);
    /* load imbalance: max over ranks of compute time (pfact + update) / mean - 1 */
    ct_json_number(&j, "load_imbalance",
                   busy_sum > 0 ? busy_max / (busy_sum / o->nranks) - 1.0 : 0.0);
    ct_json_end(&j);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options *o = calloc(1, sizeof *o);
    char err[512] = "";
    int bad = 0;
    if (rank == 0)
        bad = parse_options(argc, argv, o, err, sizeof err) != 0;
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (bad) {
        if (rank == 0)
            ct_report_error("%s", err);
        MPI_Finalize();
        return 2;
    }
    MPI_Bcast(o, (int)sizeof *o, MPI_BYTE, 0, MPI_COMM_WORLD);
    lp_params *p = &o->prm;

    FILE *txt = NULL;
    char txt_name[512] = "";
    if (rank == 0) {
        if (o->hpl_out[0] && strcmp(o->hpl_out, "-"))
            snprintf(txt_name, sizeof txt_name, "%s", o->hpl_out);
        else if (!o->hpl_out[0] && o->dat[0] && p->device != 6 && p->device != 7)
            snprintf(txt_name, sizeof txt_name, "%s", p->out_name);
        txt = txt_name[0] ? fopen(txt_name, "w") : stderr;
        if (!txt) {
            ct_report_error("cannot open HPL output file %s", txt_name);
            txt = stderr;
        }
        for (int i = 0; i < p->nwarn; i++)
            fprintf(stderr, "warning: %s\n", p->warn[i]);
        lp_out_header(txt, p);
    }

    int total = 0, npass = 0, nfail = 0, nskip = 0;
    double best = 0.0;
    char skipped[MAX_SKIP][200];
    for (int ig = 0; ig < p->npq; ig++)
        for (int in = 0; in < p->nn; in++)
            for (int inb = 0; inb < p->nnb; inb++)
                for (int id = 0; id < p->ndepth; id++)
                    for (int ib = 0; ib < p->nbcast; ib++)
                        for (int ir = 0; ir < p->nrfact; ir++)
                            for (int iv = 0; iv < p->nndiv; iv++)
                                for (int im = 0; im < p->nnbmin; im++)
                                    for (int ipf = 0; ipf < p->npfact; ipf++) {
        lp_algo a = {.n = p->n[in], .nb = p->nb[inb], .p = p->p[ig], .q = p->q[ig],
                     .colmajor = p->colmajor, .pfact = p->pfact[ipf], .nbmin = p->nbmin[im],
                     .ndiv = p->ndiv[iv], .rfact = p->rfact[ir], .bcast = p->bcast[ib],
                     .depth = p->depth[id], .swap = p->swap, .swap_threshold = p->swap_threshold,
                     .threshold = p->threshold, .seed = o->seed, .inject_fault = o->inject_fault};
        total++;
        char reason[200] = "";
        const char *why = illegal(&a, size);
        outcome oc = {0};
        if (!why && run_one(&a, &oc, reason, sizeof reason))
            why = reason;
        if (why) {
            nskip++;
            if (rank == 0) {
                lp_out_skip(txt, &a, why);
                char code[16];
                lp_variant_code(&a, code);
                if (nskip <= MAX_SKIP)
                    snprintf(skipped[nskip - 1], sizeof skipped[0], "%s N=%d NB=%d P=%d Q=%d: %s",
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
                npass++;
            else if (oc.checked)
                nfail++;
            if (oc.gflops > best && (!oc.checked || oc.passed))
                best = oc.gflops;
            free(oc.ranks);
        }
        barrier(MPI_COMM_WORLD);
    }

    if (grid_in >= 0)
        lp_grid_free(&grid);
    int measured = nskip < total;
    if (rank == 0) {
        lp_out_summary(txt, total, npass, nfail, nskip);
        lp_blas_info bi;
        lp_blas_identify(&bi);
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        lib[strcspn(lib, "\r\n")] = '\0';
        int ran = npass + nfail;
        const char *verdict = nfail > 0                        ? "failed"
                              : ran > 0 && p->threshold >= 0.0 ? "passed"
                                                               : "not-verified";
        ct_json j;
        ct_json_start(&j, stdout, "result");
        ct_json_string(&j, "verification", verdict);
        ct_json_open_object(&j, "figures");
        ct_json_integer(&j, "tests", total);
        ct_json_integer(&j, "passed", npass);
        ct_json_integer(&j, "failed", nfail);
        ct_json_integer(&j, "skipped", nskip);
        ct_json_number(&j, "best_gflops", best);
        ct_json_close_object(&j);
        ct_json_open_object(&j, "detail");
        ct_json_integer(&j, "ranks", size);
        ct_json_string(&j, "mpi_library", lib);
        ct_json_open_object(&j, "blas");
        ct_json_string(&j, "library", bi.library);
        ct_json_string(&j, "core", bi.core);
        ct_json_string(&j, "config", bi.config);
        const char *ct = getenv("OPENBLAS_CORETYPE"), *nt = getenv("OPENBLAS_NUM_THREADS");
        ct_json_string(&j, "openblas_coretype_env", ct ? ct : "");
        ct_json_string(&j, "openblas_num_threads_env", nt ? nt : "");
        ct_json_close_object(&j);
        ct_json_string(&j, "dat", o->dat);
        if (o->dat[0])
            ct_json_integer(&j, "dat_format", p->format);
        ct_json_string(&j, "hpl_out", txt_name[0] ? txt_name : "stderr");
        ct_json_integer(&j, "seed", (long long)o->seed);
        ct_json_open_array(&j, "warnings");
        for (int i = 0; i < p->nwarn; i++)
            ct_json_string(&j, NULL, p->warn[i]);
        ct_json_close_array(&j);
        ct_json_open_array(&j, "skipped");
        for (int i = 0; i < nskip && i < MAX_SKIP; i++)
            ct_json_string(&j, NULL, skipped[i]);
        ct_json_close_array(&j);
        ct_json_close_object(&j);
        ct_json_end(&j);
        if (txt != stderr)
            fclose(txt);
        /* HPL counts a run of skips as a run; a measurement that measured nothing is not */
        if (!measured)
            ct_report_error("no combination ran (%d of %d skipped)%s%s", nskip, total,
                            total > 0 ? "; first: " : "", total > 0 ? skipped[0] : "");
    }
    free(o);
    MPI_Finalize();
    return measured ? 0 : 1;
}
