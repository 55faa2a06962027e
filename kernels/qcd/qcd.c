#define _DEFAULT_SOURCE
/* qcd.c - ct-qcd: SU(3) pure gauge Monte Carlo after QCDMPI (seeds/003 section 4).
 *
 * One sweep = one Cabibbo-Marinari heat-bath pass over every link, then --or-steps
 * over-relaxation passes (MILC su3_ora's trajectory: qhb_steps 1, steps_per_trajectory
 * N), then reunitarisation and the plaquette. Each pass goes direction by direction,
 * even sites then odd, both parities of a direction in one walk over the field (the wave,
 * update_pair); the halo of the links a step changed travels while interior sites (sites
 * whose update reads no ghost of a split direction) are updated.
 *
 * Verification, all in this run: the cold start's plaquette is exactly 1; every link is
 * in SU(3) after each sweep, before reunitarisation (|U U^+ - 1| and |det U - 1| <= 1e-12);
 * the plaquette is unchanged by a random gauge transformation at the end (1e-12); every
 * halo message's checksum matches; a resumed checkpoint reproduces its stored plaquette
 * bit for bit. --inject-fault corrupts one halo message, which must fail the run.
 */
#include "qcd.h"

#include "ct_opt.h"

#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define TOLERANCE 1e-12

static const char *const PHASE_NAMES[QCD_PH_COUNT] = {
    "update", "plaquette", "reunit", "pack", "wait", "comm", "reduce"};
static const char *const STARTS[] = {"cold", "hot", NULL};
static const char *const ISAS[] = {"auto", "baseline", NULL};

typedef struct {
    int lattice[QCD_DIM], grid[QCD_DIM], grid_seen, seed_seen;
    double beta;
    long sweeps, seed;
    int or_steps, start, nhit, no_overlap, inject_fault, help, isa;
    const char *checkpoint, *resume;
    ct_check_only check;
} options;

static int parse_dims(const ct_opt *opt, const char *text, char *expected, size_t len)
{
    int v[QCD_DIM];
    if (ct_parse_int_list(text, 'x', NULL, 1, 1 << 20, v, QCD_DIM) == QCD_DIM) {
        memcpy(opt->dest, v, sizeof v);
        return 0;
    }
    snprintf(expected, len, "four positive extents such as 8x8x8x8");
    return -1;
}

static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    for (int d = 0; d < QCD_DIM; d++)
        o->lattice[d] = 4, o->grid[d] = 1;
    o->beta = 6.0;
    o->sweeps = 10;
    o->or_steps = 4;
    o->seed = 1;
    o->nhit = 50;
    ct_opt check[CT_CHECK_ONLY_NOPTS];
    ct_check_only_options(&o->check, check);
    const ct_opt table[] = {
        {"--lattice", CT_OPT_CUSTOM, .dest = o->lattice, .parse = parse_dims},
        {"--grid", CT_OPT_CUSTOM, .dest = o->grid, .parse = parse_dims, .seen = &o->grid_seen},
        {"--beta", CT_OPT_NUMBER, .dest = &o->beta},
        {"--sweeps", CT_OPT_LONG, .dest = &o->sweeps, .min = 0, .max = INT_MAX},
        {"--or-steps", CT_OPT_INT, .dest = &o->or_steps, .min = 0, .max = 1000},
        {"--start", CT_OPT_CHOICE, .dest = &o->start, .choices = STARTS},
        {"--seed", CT_OPT_LONG, .dest = &o->seed, .min = 0, .max = LONG_MAX, .seen = &o->seed_seen},
        {"--nhit", CT_OPT_INT, .dest = &o->nhit, .min = 1, .max = 100000},
        {"--checkpoint", CT_OPT_STRING, .dest = &o->checkpoint},
        {"--resume", CT_OPT_STRING, .dest = &o->resume},
        {"--no-overlap", CT_OPT_FLAG, .dest = &o->no_overlap},
        {"--isa", CT_OPT_CHOICE, .dest = &o->isa, .choices = ISAS},
        {"--inject-fault", CT_OPT_FLAG, .dest = &o->inject_fault},
        {"--help", CT_OPT_FLAG, .dest = &o->help},
        {NULL, CT_OPT_TABLE, .table = check},
        {.type = CT_OPT_END},
    };
    if (ct_opt_parse(table, argc, argv, err, errlen))
        return -1;
    return ct_check_only_validate(&o->check, ct_basename(argv[0]), err, errlen);
}

/* Everything a run can be refused for before it starts: one line naming the flag. */
static int check_run(const options *o, int np, const char *prog, char *err, size_t errlen)
{
    char why[600];
    if (!(o->beta > 0.0)) {
        snprintf(err, errlen, "%s: --beta: must be > 0, got %g", prog, o->beta);
        return -1;
    }
    int grid[QCD_DIM] = {1, 1, 1, 1};
    memcpy(grid, o->grid, sizeof grid);
    if (qcd_layout_check(o->lattice, grid, np, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", prog, why);
        return -1;
    }
    if (o->inject_fault && np == 1) {
        snprintf(err, errlen, "%s: --inject-fault: corrupts a halo message; needs --grid with a split direction", prog);
        return -1;
    }
    if (o->resume) {
        qcd_ckpt_header hd;
        if (qcd_ckpt_read_header(o->resume, &hd, why, sizeof why)) {
            snprintf(err, errlen, "%s: %s", prog, why);
            return -1;
        }
        if (memcmp(hd.global, o->lattice, sizeof hd.global)) {
            snprintf(err, errlen, "%s: --lattice: %dx%dx%dx%d, but %s holds %dx%dx%dx%d", prog,
                     o->lattice[0], o->lattice[1], o->lattice[2], o->lattice[3], o->resume,
                     hd.global[0], hd.global[1], hd.global[2], hd.global[3]);
            return -1;
        }
        if (hd.beta != o->beta || hd.or_steps != o->or_steps ||
            (o->seed_seen && (uint64_t)o->seed != hd.seed)) {
            snprintf(err, errlen,
                     "%s: --resume: %s was made with --beta %.17g --or-steps %d --seed %llu; "
                     "a resumed run must keep them",
                     prog, o->resume, hd.beta, hd.or_steps, (unsigned long long)hd.seed);
            return -1;
        }
    }
    return 0;
}

/* check_run for a job of np processes; without --grid all of them lie along t (ct_mpi_start) */
static int check_job(void *opts, int np, const char *prog, char *err, size_t errlen)
{
    options *o = opts;
    if (!o->grid_seen && np > 1)
        o->grid[3] = np;
    return check_run(o, np, prog, err, errlen);
}

/* ------------------------------------------------------------------ the run */
typedef struct {
    options *o;
    qcd_lattice lat;
    double *u[QCD_DIM];
    qcd_halo halo;
    qcd_action act;
    qcd_update_stats st;
    ct_phases ph;
    long long sweeps_done;
    long long messages, bytes; /* sent by this rank during the sweeps */
    double unit_err, det_err; /* the worst seen, global */
    const char *isa; /* the build of the update that ran */
    char failure[512];
} run;

static void fail(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(run *r, const char *fmt, ...)
{
    if (r->failure[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->failure, sizeof r->failure, fmt, ap);
    va_end(ap);
}

/* a random SU(3) matrix for site g, direction mu, from stream s (hot start, gauge) */
static void random_su3(uint64_t seed, int stream, int64_t g, int mu, double *m)
{
    for (int k = 0; k < QCD_SU3 / 2; k++) {
        qcd_ctr c = {{(uint32_t)g, (uint32_t)(mu | k << 2), (uint32_t)((uint64_t)g >> 32),
                      (uint32_t)stream}};
        double v[2];
        qcd_uniform2(seed, &c, v);
        m[2 * k] = 2.0 * v[0] - 1.0;
        m[2 * k + 1] = 2.0 * v[1] - 1.0;
    }
    su3_reunit(m);
}

/* The gauge field in transparent huge pages where the kernel grants them: a sweep walks
 * the whole field in strides of a site block, and with 4 kB pages the staples of the t
 * and z neighbours miss the TLB. */
static double *alloc_field(size_t bytes, ct_alloc_failure *af)
{
    size_t huge = (size_t)2 << 20;
    void *p = NULL;
    if (posix_memalign(&p, huge, (bytes + huge - 1) / huge * huge) != 0) {
        af->what = "gauge field";
        af->bytes = (double)bytes;
        return NULL;
    }
    madvise(p, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE);
    return p;
}

static void update(run *r, int mu, int64_t n, const int64_t *site, const int64_t *gsite,
                   int hb, long long hb_index, qcd_stream *pf)
{
    ct_phase_start(&r->ph, QCD_PH_UPDATE);
    qcd_update_sites(&r->lat, r->u, mu, n, site, gsite, &r->act, hb, hb_index, &r->st, pf);
    ct_phase_stop(&r->ph, QCD_PH_UPDATE);
}

static void update_step(run *r, int mu, int p, int hb, long long hb_index)
{
    qcd_lattice *lat = &r->lat;
    update(r, mu, lat->nin[p], lat->in[mu][p], lat->gin[mu][p], hb, hb_index, NULL);
    qcd_halo_finish(&r->halo); /* the links of the step before */
    update(r, mu, lat->nbd[p], lat->bd[p], lat->gbd[p], hb, hb_index, NULL);
    qcd_halo_start(&r->halo, mu, p);
}

/* The stream that prefetches the whole extended slice s + 1 of the wave of mu over the n
 * link updates of slice s's even half: the walk reads that slice from memory for the first
 * time now (the neighbours x + w and x + w - nu), in block order, which the hardware
 * prefetchers do not follow; a linear stream keeps many misses in flight. (16^4, one
 * rank: the update 15-25 % faster; two slices ahead was no faster: the L3 this VM gets
 * does not keep them until used.) */
static qcd_stream next_slice(const run *r, int mu, int s, int64_t n)
{
    const qcd_lattice *lat = &r->lat;
    const int w = lat->wave[mu];
    const int64_t run = lat->stride[w] * QCD_SITE * (int64_t)sizeof(double);
    qcd_stream pf = {(const char *)(r->u[0] + (s + 1) * lat->stride[w] * QCD_SITE), run, run,
                     run * (lat->ext[w] - 1), lat->next / (lat->stride[w] * lat->ext[w]), 0};
    pf.lines = n > 0 ? (int)((pf.runs * run / 64 + n - 1) / n) : 0;
    return pf;
}

/* the interior sites of parity p in groups first .. last - 1 of the wave of mu */
static void update_groups(run *r, int mu, int p, int64_t first, int64_t last, int hb,
                          long long hb_index, qcd_stream *pf)
{
    const qcd_lattice *lat = &r->lat;
    const int64_t *at = lat->in_at[mu][p];
    update(r, mu, at[last] - at[first], lat->in[mu][p] + at[first], lat->gin[mu][p] + at[first],
           hb, hb_index, pf);
}

/* the interior sites of parity p in slice s of the wave of mu, the even ones prefetching
 * the next slice */
static void update_slice(run *r, int mu, int p, int s, int hb, long long hb_index)
{
    const int64_t E = qcd_groups_per_slice(&r->lat, mu), *at = r->lat.in_at[mu][p];
    qcd_stream pf = next_slice(r, mu, s, at[(s + 1) * E] - at[s * E]);
    update_groups(r, mu, p, s * E, (s + 1) * E, hb, hb_index, p == 0 ? &pf : NULL);
}

/* Slice s of a wave along mu by planes q = 1 .. Lq along lat->plane[mu]: odd plane q - 1
 * follows even plane q and the ghost copies from it (its even neighbours lie in planes
 * q - 2 .. q; the sources of the early copies are local sites), odd planes Lq and 1 come
 * last (their neighbours across the periodic plane boundary are the ghost copies of planes
 * 1 and Lq). The odd half then finds most of the links it reads in L2 or L3, where after
 * a whole even slice (3.4 MB on 16^4) it did not. */
static void update_planes(run *r, int mu, int s, int hb, long long hb_index)
{
    const qcd_lattice *lat = &r->lat;
    const int64_t E = qcd_groups_per_slice(lat, mu), g = s * E, *at = lat->in_at[mu][0];
    const int Lq = lat->local[lat->plane[mu]];
    qcd_stream pf = next_slice(r, mu, s, at[g + E] - at[g]);
    for (int q = 1; q <= Lq; q++) {
        update_groups(r, mu, 0, g + q, g + q + 1, hb, hb_index, &pf);
        qcd_halo_copy_groups(&r->halo, mu, 0, g + q, g + q + 1);
        if (q >= 3)
            update_groups(r, mu, 1, g + q - 1, g + q, hb, hb_index, NULL);
    }
    if (Lq > 1)
        update_groups(r, mu, 1, g + Lq, g + Lq + 1, hb, hb_index, NULL);
    update_groups(r, mu, 1, g + 1, g + 2, hb, hb_index, NULL);
}

/* Steps (mu, even) and (mu, odd) in one walk over the field instead of two (on 16^4 the
 * field does not fit the L3 cache). An odd link U_mu(x) reads the even U_mu(x +- nu),
 * nu != mu, and no other link this pair changes; an even link reads the odd ones at the
 * same places. So the interior goes by slices s = 1 .. L of the wave direction w: if w is
 * mu, all those neighbours lie in the slice, and odd slice s follows even slice s, or
 * from slice 3 on goes plane by plane behind it (update_planes); else odd slice s - 1
 * follows even slice s (its even neighbours in slices s - 2 .. s, their early ghost copies
 * and the boundary sites are final, and no even slice still to come reads it), and odd
 * slices L and 1 come last (their neighbours across the periodic w boundary are the ghost
 * copies of slices 1 and L). Every link gets the same value as step by step. The exchange
 * of the step before travels during even slices 1 and 2. */
static void update_pair(run *r, int mu, int hb, long long hb_index)
{
    qcd_lattice *lat = &r->lat;
    int w = lat->wave[mu];
    if (w < 0) {
        update_step(r, mu, 0, hb, hb_index);
        update_step(r, mu, 1, hb, hb_index);
        return;
    }
    const int64_t E = qcd_groups_per_slice(lat, mu);
    int L = lat->local[w], lag = w != mu;
    for (int s = 1; s <= 2; s++)
        update_slice(r, mu, 0, s, hb, hb_index);
    qcd_halo_finish(&r->halo); /* the links of the step before */
    update(r, mu, lat->nbd[0], lat->bd[0], lat->gbd[0], hb, hb_index, NULL);
    qcd_halo_post(&r->halo, mu, 0);
    for (int s = 1; s <= L; s++) {
        if (s > 2 && lat->plane[mu] >= 0) {
            update_planes(r, mu, s, hb, hb_index);
            continue;
        }
        if (s > 2)
            update_slice(r, mu, 0, s, hb, hb_index);
        qcd_halo_copy_groups(&r->halo, mu, 0, s * E, (s + 1) * E);
        if (!lag || s > 2)
            update_slice(r, mu, 1, s - lag, hb, hb_index);
    }
    if (lag) {
        update_slice(r, mu, 1, L, hb, hb_index);
        update_slice(r, mu, 1, 1, hb, hb_index);
    }
    qcd_halo_finish(&r->halo);
    update(r, mu, lat->nbd[1], lat->bd[1], lat->gbd[1], hb, hb_index, NULL);
    qcd_halo_start(&r->halo, mu, 1);
}

static void pass(run *r, int hb, long long hb_index)
{
    for (int mu = 0; mu < QCD_DIM; mu++)
        update_pair(r, mu, hb, hb_index);
}

typedef struct {
    double plaq, spatial, temporal, unit_err, det_err;
    int fault;
} measurement;

static void split128(__int128 x, int64_t w[2])
{
    w[0] = (int64_t)(uint64_t)x;
    w[1] = (int64_t)(x >> 64);
}

static __int128 join128(const int64_t w[2])
{
    return (__int128)(((unsigned __int128)(uint64_t)w[1] << 64) | (uint64_t)w[0]);
}

/* Collective: the exact global plaquette, worst link errors (of the local links, measured
 * before this call by the caller) and whether any rank saw a corrupted halo. */
static measurement measure(run *r, double unit_err, double det_err)
{
    qcd_lattice *lat = &r->lat;
    __int128 part[2];
    ct_phase_start(&r->ph, QCD_PH_PLAQ);
    qcd_plaquette_local(lat, r->u, part);
    ct_phase_stop(&r->ph, QCD_PH_PLAQ);
    ct_phase_start(&r->ph, QCD_PH_REDUCE);
    int64_t mine[8] = {0}, *all = ct_mpi_alloc(8 * (size_t)lat->size * sizeof *all, "reduce");
    split128(part[0], mine);
    split128(part[1], mine + 2);
    mine[4] = r->halo.fault_seen;
    memcpy(&mine[5], &unit_err, sizeof unit_err);
    memcpy(&mine[6], &det_err, sizeof det_err);
    /* non-blocking: the kernels' wait, not the library's (which spins or yields) */
    MPI_Request rq;
    CT_MPI_CHECK(MPI_Iallgather(mine, 8, MPI_INT64_T, all, 8, MPI_INT64_T, lat->comm, &rq));
    ct_mpi_waitall(1, &rq, NULL);
    __int128 s = 0, t = 0;
    measurement m = {0};
    for (int k = 0; k < lat->size; k++) { /* integers: the order does not matter */
        s += join128(all + 8 * k);
        t += join128(all + 8 * k + 2);
        m.fault |= all[8 * k + 4] != 0;
        double ue, de;
        memcpy(&ue, &all[8 * k + 5], sizeof ue);
        memcpy(&de, &all[8 * k + 6], sizeof de);
        m.unit_err = fmax(m.unit_err, ue);
        m.det_err = fmax(m.det_err, de);
    }
    free(all);
    ct_phase_stop(&r->ph, QCD_PH_REDUCE);
    double norm = QCD_PLAQ_SCALE * 9.0 * lat->global_volume; /* 3 planes x Re Tr 1 = 3 */
    m.spatial = (double)s / norm;
    m.temporal = (double)t / norm;
    m.plaq = (double)(s + t) / (2.0 * norm);
    return m;
}

/* worst |U U^+ - 1| and |det U - 1| over the local links */
static void link_errors(run *r, double *unit_err, double *det_err)
{
    double ue = 0.0, de = 0.0;
    for (int64_t k = 0; k < r->lat.volume; k++) /* a site's four links lie together */
        for (int mu = 0; mu < QCD_DIM; mu++) {
            const double *l = r->u[mu] + r->lat.all_local[k] * QCD_SITE;
            ue = fmax(ue, su3_unitarity_error(l));
            de = fmax(de, su3_det_error(l));
        }
    *unit_err = ue;
    *det_err = de;
}

static void reunit_all(run *r, double *unit_err, double *det_err)
{
    ct_phase_start(&r->ph, QCD_PH_REUNIT);
    qcd_reunit_check(&r->lat, r->u, unit_err, det_err);
    ct_phase_stop(&r->ph, QCD_PH_REUNIT);
}

static void sample(const run *r, long long sweep, const measurement *m, double seconds,
                   const char *what)
{
    if (r->lat.rank != 0)
        return;
    ct_json j;
    ct_json_start(&j, stdout, "sample");
    ct_json_integer(&j, "sweep", sweep);
    if (what)
        ct_json_string(&j, "start", what);
    ct_json_number(&j, "plaquette", m->plaq);
    ct_json_number(&j, "plaquette_spatial", m->spatial);
    ct_json_number(&j, "plaquette_temporal", m->temporal);
    char hex[40];
    snprintf(hex, sizeof hex, "%a", m->plaq);
    ct_json_string(&j, "plaquette_hex", hex);
    if (!what) {
        ct_json_number(&j, "unitarity_error", m->unit_err);
        ct_json_number(&j, "det_error", m->det_err);
        ct_json_number(&j, "time_s", seconds);
    }
    ct_json_bool(&j, "halo_ok", !m->fault);
    ct_json_end(&j);
}

/* U_mu(x) -> g(x) U_mu(x) g(x+mu)^+ on the local links, g random per global site;
 * returns the largest change of a link element (so a transformation that did nothing
 * cannot pass for gauge invariance) */
static double gauge_transform(run *r)
{
    double moved = 0.0;
    qcd_lattice *lat = &r->lat;
    for (int64_t k = 0; k < lat->volume; k++) {
        int64_t e = lat->all_local[k];
        double g[QCD_SU3], h[QCD_SU3];
        random_su3(r->act.seed, QCD_STREAM_GAUGE, lat->all_global[k], 0, g);
        int c[QCD_DIM];
        int64_t rest = e;
        for (int d = 0; d < QCD_DIM; d++) {
            c[d] = (int)(rest % lat->ext[d]) - 1 + lat->origin[d];
            rest /= lat->ext[d];
        }
        for (int mu = 0; mu < QCD_DIM; mu++) {
            c[mu]++;
            random_su3(r->act.seed, QCD_STREAM_GAUGE, qcd_global_index(lat, c), 0, h);
            c[mu]--;
            double *l = r->u[mu] + e * QCD_SITE, before[QCD_SU3];
            memcpy(before, l, sizeof before);
            su3_transform(g, l, h);
            for (int i = 0; i < QCD_SU3; i++)
                moved = fmax(moved, fabs(l[i] - before[i]));
        }
    }
    qcd_halo_refresh_all(&r->halo);
    double all;
    CT_MPI_CHECK(MPI_Allreduce(&moved, &all, 1, MPI_DOUBLE, MPI_MAX, r->lat.comm));
    return all;
}

typedef struct {
    const run *r;
    ct_phase_summary *ps;
    double seconds, gauge_err, gauge_moved, final_plaq;
    long long sweeps;
    const char *verification;
} result_args;

static double stat_mean(const ct_phase_summary *ps, int i) { return ps->stat[i].mean; }

static void result_figures(ct_json *j, const void *arg)
{
    const result_args *a = arg;
    const run *r = a->r;
    const ct_phase_summary *ps = a->ps;
    double v = r->lat.global_volume, passes = 1.0 + r->o->or_steps;
    double links = 4.0 * v * passes * (double)a->sweeps, hb_links = 4.0 * v * (double)a->sweeps;
    double counted = 4.0 * v * (double)a->sweeps * (QCD_FLOPS_HB + r->o->or_steps * QCD_FLOPS_OR);
    double t = a->seconds, compute = 0.0;
    for (int k = 0; k < ps->nranks; k++) { /* the slowest rank's computing time */
        const double *pr = ps->per_rank + (size_t)k * ps->count;
        compute = fmax(compute, pr[QCD_PH_UPDATE] + pr[QCD_PH_PLAQ] + pr[QCD_PH_REUNIT]);
    }
    double comm = stat_mean(ps, QCD_PH_COMM);
    double msgs = (double)r->messages, bytes = (double)r->bytes; /* rank 0's */
    double per_sweep = a->sweeps > 0 ? 1.0 / (double)a->sweeps : NAN;
    ct_json_number(j, "plaquette", a->final_plaq);
    ct_json_integer(j, "sweeps", a->sweeps);
    ct_json_number(j, "time_s", t);
    ct_json_number(j, "link_updates", links);
    ct_json_number(j, "hb_link_updates", hb_links);
    ct_json_number(j, "link_updates_per_s", t > 0 ? links / t : NAN);
    ct_json_number(j, "hb_link_updates_per_s", t > 0 ? hb_links / t : NAN);
    /* QCDFlops is QCDMPI's: the nominal 5700 per link the (pseudo) heat bath updates. Its
     * schedule has no over-relaxation, so OR passes add to the counted flops only. */
    ct_json_number(j, "qcdflops_gflops", t > 0 ? QCD_NOMINAL_FLOPS * hb_links / t / 1e9 : NAN);
    ct_json_number(j, "qcdflops_compute_gflops",
                   compute > 0 ? QCD_NOMINAL_FLOPS * hb_links / compute / 1e9 : NAN);
    ct_json_number(j, "counted_gflops", t > 0 ? counted / t / 1e9 : NAN);
    ct_json_number(j, "compute_gflops", compute > 0 ? counted / compute / 1e9 : NAN);
    ct_json_number(j, "compute_time_s", compute);
    ct_json_number(j, "comm_time_s", comm);
    ct_json_number(j, "comm_wait_s", stat_mean(ps, QCD_PH_WAIT));
    ct_json_number(j, "halo_copy_s", stat_mean(ps, QCD_PH_PACK));
    ct_json_number(j, "comm_mbps", msgs > 0 && comm > 0 ? bytes / comm / 1e6 : NAN);
    ct_json_number(j, "messages_per_sweep", msgs * per_sweep);
    ct_json_number(j, "bytes_per_sweep", bytes * per_sweep);
    ct_json_number(j, "unitarity_error", r->unit_err);
    ct_json_number(j, "det_error", r->det_err);
    ct_json_number(j, "gauge_invariance_error", a->gauge_err);
    ct_json_number(j, "gauge_link_change", a->gauge_moved);
    ct_json_number(j, "kp_acceptance", r->st.kp_trials ? (double)r->st.kp_accepted / (double)r->st.kp_trials : NAN);
}

static void result_detail(ct_json *j, const void *arg)
{
    const result_args *a = arg;
    const run *r = a->r;
    const options *o = r->o;
    ct_json_open_array(j, "lattice");
    for (int d = 0; d < QCD_DIM; d++)
        ct_json_integer(j, NULL, o->lattice[d]);
    ct_json_close_array(j);
    ct_json_open_array(j, "grid");
    for (int d = 0; d < QCD_DIM; d++)
        ct_json_integer(j, NULL, r->lat.grid[d]);
    ct_json_close_array(j);
    ct_json_open_array(j, "local");
    for (int d = 0; d < QCD_DIM; d++)
        ct_json_integer(j, NULL, r->lat.local[d]);
    ct_json_close_array(j);
    ct_json_number(j, "beta", o->beta);
    ct_json_integer(j, "or_steps", o->or_steps);
    ct_json_string(j, "start", o->resume ? "resume" : STARTS[o->start]);
    ct_json_integer(j, "seed", (long long)r->act.seed);
    ct_json_integer(j, "first_sweep", r->sweeps_done - a->sweeps + 1);
    ct_json_integer(j, "last_sweep", r->sweeps_done);
    ct_json_bool(j, "overlap", !o->no_overlap);
    ct_json_string(j, "isa", r->isa);
    ct_json_number(j, "flops_per_hb_link", QCD_FLOPS_HB);
    ct_json_number(j, "flops_per_or_link", QCD_FLOPS_OR);
    ct_json_number(j, "nominal_flops_per_link", QCD_NOMINAL_FLOPS);
    ct_json_integer(j, "kp_given_up", r->st.kp_given_up);
    if (o->checkpoint)
        ct_json_string(j, "checkpoint", o->checkpoint);
    if (o->resume)
        ct_json_string(j, "resumed_from", o->resume);
    if (r->failure[0])
        ct_json_string(j, "failure", r->failure);
    ct_phases_json_stats(j, "phase_stats", a->ps);
}

static void usage(void)
{
    printf("usage: ct-qcd --lattice XxYxZxT [--grid AxBxCxD] [--beta B] [--sweeps K]\n"
           "              [--or-steps N] [--start cold|hot] [--seed S] [--nhit N]\n"
           "              [--checkpoint FILE] [--resume FILE] [--no-overlap] [--isa auto|baseline]\n"
           "              [--check-only --np N] [--inject-fault]\n");
}

int main(int argc, char **argv)
{
    const char *prog = ct_basename(argv[0]);
    options o;
    char err[1024];
    int bad = parse_options(argc, argv, &o, err, sizeof err) != 0;
    int rank, size;
    ct_mpi_start_args start = {.parse_failed = bad, .help = o.help, .usage = usage,
                               .check_only = &o.check, .check = check_job, .opts = &o,
                               .err = err, .errlen = sizeof err};
    int status = ct_mpi_start(&start, &argc, &argv, &rank, &size);
    if (status != CT_MPI_RUN)
        return status;
    run r = {.o = &o};
    r.isa = qcd_isa(o.isa == 1);
    r.act = (qcd_action){o.beta, (uint64_t)o.seed, o.nhit};
    qcd_lattice_init(&r.lat, MPI_COMM_WORLD, o.lattice, o.grid);
    ct_alloc_failure af = {0};
    double *field = alloc_field((size_t)r.lat.next * QCD_SITE * sizeof(double), &af);
    ct_mpi_agree(MPI_COMM_WORLD, &af);
    for (int mu = 0; mu < QCD_DIM; mu++)
        r.u[mu] = field + mu * QCD_SU3;
    ct_phases_init(&r.ph, QCD_PH_COUNT, PHASE_NAMES);
    qcd_halo_init(&r.halo, &r.lat, r.u, &r.ph);
    r.halo.overlap = !o.no_overlap;

    /* the start */
    qcd_ckpt_header hd = {0};
    const char *what = STARTS[o.start];
    if (o.resume) {
        if (qcd_ckpt_read(&r.lat, r.u, o.resume, &hd, err, sizeof err)) {
            if (rank == 0)
                ct_report_error("%s: %s", prog, err);
            CT_MPI_CHECK(MPI_Finalize());
            return 1;
        }
        r.act.seed = hd.seed;
        r.sweeps_done = hd.sweeps_done;
        what = "resume";
    } else {
        for (int mu = 0; mu < QCD_DIM; mu++)
            for (int64_t k = 0; k < r.lat.volume; k++) {
                double *l = r.u[mu] + r.lat.all_local[k] * QCD_SITE;
                if (o.start == 0)
                    su3_unit(l);
                else
                    random_su3(r.act.seed, QCD_STREAM_HOT, r.lat.all_global[k], mu, l);
            }
    }
    int inject = o.inject_fault;
    qcd_halo_refresh_all(&r.halo); /* the fault waits for the first sweep */
    measurement m = measure(&r, 0.0, 0.0);
    sample(&r, r.sweeps_done, &m, 0.0, what);
    if (o.resume && memcmp(&m.plaq, &hd.plaquette, sizeof m.plaq))
        fail(&r, "resume: plaquette %.17g read back, the checkpoint stored %.17g", m.plaq,
             hd.plaquette);
    if (!o.resume && o.start == 0 && m.plaq != 1.0)
        fail(&r, "cold start: plaquette %.17g, not exactly 1", m.plaq);

    /* the sweeps */
    ct_phases_init(&r.ph, QCD_PH_COUNT, PHASE_NAMES); /* the start is not measured */
    r.halo.messages = r.halo.bytes = 0;
    r.halo.inject_fault = inject && rank == 0; /* one message of one rank */
    long long done = 0;
    CT_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = ct_now();
    for (long s = 0; s < o.sweeps && !r.failure[0]; s++) {
        double ts = ct_now();
        long long sweep = ++r.sweeps_done;
        r.halo.sweep = (long)sweep;
        pass(&r, 1, sweep);
        for (int k = 0; k < o.or_steps; k++)
            pass(&r, 0, 0);
        qcd_halo_finish(&r.halo);
        double ue, de;
        reunit_all(&r, &ue, &de);
        m = measure(&r, ue, de);
        done++;
        r.unit_err = fmax(r.unit_err, m.unit_err);
        r.det_err = fmax(r.det_err, m.det_err);
        sample(&r, sweep, &m, ct_now() - ts, NULL);
        if (m.fault) {
            if (r.halo.fault_seen)
                ct_report_error("%s: rank %d: %s", prog, rank, r.halo.fault_text);
            fail(&r, "a halo message was corrupted in sweep %lld (checksum mismatch)", sweep);
        }
        if (m.unit_err > TOLERANCE || m.det_err > TOLERANCE)
            fail(&r, "sweep %lld: links left SU(3): |UU^+ - 1| = %.3g, |det U - 1| = %.3g",
                 sweep, m.unit_err, m.det_err);
    }
    double seconds = ct_now() - t0;
    r.messages = r.halo.messages;
    r.bytes = r.halo.bytes;
    ct_phase_summary ps;
    ct_phases_reduce(&r.ph, MPI_COMM_WORLD, 0, &ps);
    double final_plaq = m.plaq;

    if (o.checkpoint && !r.failure[0]) {
        hd = (qcd_ckpt_header){.beta = o.beta, .or_steps = o.or_steps, .seed = r.act.seed,
                               .sweeps_done = r.sweeps_done, .plaquette = final_plaq};
        memcpy(hd.global, o.lattice, sizeof hd.global);
        if (qcd_ckpt_write(&r.lat, r.u, &hd, o.checkpoint, err, sizeof err))
            fail(&r, "%s", err);
    }

    /* gauge invariance: the plaquette of a randomly transformed field */
    double moved = gauge_transform(&r);
    double ue, de;
    link_errors(&r, &ue, &de);
    measurement g = measure(&r, ue, de);
    double gauge_err = fabs(g.plaq - final_plaq);
    if (gauge_err > TOLERANCE)
        fail(&r, "gauge invariance: the plaquette moved by %.3g under a gauge transformation",
             gauge_err);
    if (!(moved > 0.1))
        fail(&r, "gauge invariance: the random transformation changed no link (%.3g)", moved);
    if (g.unit_err > TOLERANCE || g.det_err > TOLERANCE)
        fail(&r, "gauge transformation left SU(3): %.3g, %.3g", g.unit_err, g.det_err);

    if (r.failure[0] && rank == 0)
        ct_report_error("%s: verification failed: %s", prog, r.failure);
    result_args a = {&r, &ps, seconds, gauge_err, moved, final_plaq, done,
                     r.failure[0] ? "failed" : "passed"};
    ct_mpi_result(a.verification, result_figures, result_detail, &a);
    ct_phase_summary_free(&ps);
    qcd_halo_free(&r.halo);
    free(field);
    qcd_lattice_free(&r.lat);
    CT_MPI_CHECK(MPI_Finalize());
    return r.failure[0] ? 1 : 0;
}
