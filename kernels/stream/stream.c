/* ct-stream - sustainable memory bandwidth, measured the way STREAM (J. McCalpin) defines
 * it: four loops over arrays of doubles far larger than the caches,
 *     Copy   c = a            16 bytes moved per element
 *     Scale  b = s c          16
 *     Add    c = a + b        24
 *     Triad  a = b + s c      24
 * repeated --ntimes times in that order; each loop's figure is its best repetition (the
 * first, which also warms the TLB, is left out, as STREAM does), with the average and
 * the worst beside it. Bytes count what the loop reads and writes, as STREAM counts them
 * (a write-allocate's extra read is not counted). Rates are GB/s (1e9 bytes per second).
 *
 * --stores streaming (the default where the CPU has SSE2) writes with non-temporal stores,
 * which go to memory without first reading each line into the cache, as a compiler's
 * streaming-store option makes STREAM do; --stores cached writes as a plain loop does
 * (STREAM's figures as most builds measure them). detail.stores says which ran.
 *
 * Every rank runs its own arrays (as hpcc's StarSTREAM does); before each loop every rank
 * waits in one MPI_Barrier, so all ranks run the same loop at the same time and share
 * their host's memory as a parallel program would. Per loop the kernel reports:
 *   the aggregate: every rank's bytes over the slowest rank's time of a repetition (the
 *     ranks started together at the barrier), best repetition;
 *   each rank's own best rate (min, mean, max over ranks: hpcc's StarSTREAM figure is the
 *     mean);
 *   each host's aggregate: its ranks' bytes over its slowest rank's time.
 *
 * Array size: at least 4 times the last-level caches of a host (STREAM's rule), shared by
 * the ranks on that host: N = 4 x LLC / (ranks on the busiest host) / 8 elements per array
 * and rank. The caches are read from sysfs (every distinct last-level cache of the host,
 * summed); --cache BYTES replaces what sysfs says, --n N sets N itself. The result carries
 * arrays_over_llc, how many times one array of all the ranks of the busiest host exceeds
 * its caches (below 4 the loops measure cache, not memory: the Python side says so).
 *
 * Verification as STREAM's: the arrays start at a = 1, b = 2, c = 0; the expected final
 * values follow from running the same four operations on three scalars; every element of
 * every array is compared with them (relative error at most 1e-13). One element off on
 * one rank makes the run "failed", with no rates written, and the exit status 1.
 * --inject-fault (tests) multiplies one element of a on the last rank by 1 + 1e-6 after
 * the timed loops. --check-only --np N: the flags alone, without MPI (ct_mpi.h). */
#define _POSIX_C_SOURCE 200809L
#include "ct.h"
#include "ct_mpi.h"
#include "ct_opt.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCALAR 3.0
#define TOLERANCE 1e-13
#define CACHE_TIMES 4 /* STREAM's rule: each array >= 4 x the last-level caches */
#define HOST_LEN 64

enum { COPY, SCALE, ADD, TRIAD, NLOOPS };
static const char *const loop_names[NLOOPS] = {"copy", "scale", "add", "triad"};
static const double bytes_per_element[NLOOPS] = {16.0, 16.0, 24.0, 24.0};

typedef struct {
    long n;         /* elements per array and rank; 0: from the caches */
    uint64_t cache; /* last-level cache bytes of a host; 0: read from sysfs */
    int ntimes, stores, inject_fault, help;
    ct_check_only check;
} options;

enum { STORES_STREAMING, STORES_CACHED };
static const char *const store_names[] = {"streaming", "cached", NULL};

static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen)
{
    *o = (options){.ntimes = 10};
    int cache_given = 0;
    ct_opt check[CT_CHECK_ONLY_NOPTS];
    ct_check_only_options(&o->check, check);
    const ct_opt table[] = {
        {"--n", CT_OPT_LONG, .dest = &o->n, .min = 1, .max = (double)(LONG_MAX / 64)},
        {"--cache", CT_OPT_BYTES, .dest = &o->cache, .seen = &cache_given},
        /* 2: the first repetition is not counted; 100: the expected values stay finite */
        {"--ntimes", CT_OPT_INT, .dest = &o->ntimes, .min = 2, .max = 100},
        {"--stores", CT_OPT_CHOICE, .dest = &o->stores, .choices = store_names},
        {"--inject-fault", CT_OPT_FLAG, .dest = &o->inject_fault},
        {"--help", CT_OPT_FLAG, .dest = &o->help},
        {NULL, CT_OPT_TABLE, .table = check},
        {.type = CT_OPT_END},
    };
    if (ct_opt_parse(table, argc, argv, err, errlen))
        return -1;
    if (cache_given && o->cache == 0) {
        snprintf(err, errlen, "ct-stream: --cache: expected a byte count above 0, got '0'");
        return -1;
    }
    return ct_check_only_validate(&o->check, ct_basename(argv[0]), err, errlen);
}

static void usage(void)
{
    printf("usage: ct-stream [--n N | --cache BYTES] [--ntimes K] [--stores streaming|cached]\n"
           "                 [--inject-fault] [--check-only --np N]\n");
}

/* The host's last-level caches in bytes: the caches of the highest level that holds data,
 * each instance (a distinct set of CPUs sharing it) counted once; 0 when sysfs says
 * nothing. */
static uint64_t llc_bytes(void)
{
    enum { MAX_SEEN = 256 };
    static char seen[MAX_SEEN][128];
    int nseen = 0, top = 0;
    uint64_t total = 0;
    for (int cpu = 0;; cpu++) {
        char dir[128];
        snprintf(dir, sizeof dir, "/sys/devices/system/cpu/cpu%d/cache", cpu);
        if (access(dir, R_OK) != 0)
            break;
        for (int index = 0;; index++) {
            char path[192], text[128], type[32] = "", shared[128] = "";
            int level = 0;
            uint64_t size = 0;
            snprintf(path, sizeof path, "%s/index%d/level", dir, index);
            FILE *f = fopen(path, "r");
            if (!f)
                break;
            int got = fscanf(f, "%d", &level);
            fclose(f);
            snprintf(path, sizeof path, "%s/index%d/type", dir, index);
            if ((f = fopen(path, "r"))) {
                got += fscanf(f, "%31s", type);
                fclose(f);
            }
            snprintf(path, sizeof path, "%s/index%d/size", dir, index);
            if ((f = fopen(path, "r"))) {
                got += fscanf(f, "%127s", text) == 1 && ct_parse_bytes(text, &size) == 0;
                fclose(f);
            }
            snprintf(path, sizeof path, "%s/index%d/shared_cpu_list", dir, index);
            if ((f = fopen(path, "r"))) {
                got += fscanf(f, "%127s", shared);
                fclose(f);
            }
            if (got != 4 || strcmp(type, "Instruction") == 0 || level < top)
                continue;
            if (level > top) { /* a higher level: forget the lower ones */
                top = level;
                total = 0;
                nseen = 0;
            }
            int known = 0;
            for (int i = 0; i < nseen && !known; i++)
                known = strcmp(seen[i], shared) == 0;
            if (!known && nseen < MAX_SEEN) {
                snprintf(seen[nseen++], sizeof seen[0], "%s", shared);
                total += size;
            }
        }
    }
    return total;
}

/* What every rank tells every other before the arrays are sized. */
typedef struct {
    char host[HOST_LEN];
    double llc, mem_available;
} peer;

/* The job's layout over hosts, the same on every rank. */
typedef struct {
    int size, hosts, busiest; /* ranks on the host with the most ranks */
    int *leader;              /* [rank]: the lowest rank on its host */
    double llc;               /* the smallest host's caches, bytes (0: unknown somewhere) */
} layout;

static void layout_of(const peer *all, int size, layout *l)
{
    *l = (layout){.size = size, .llc = INFINITY};
    l->leader = ct_mpi_alloc(sizeof *l->leader * (size_t)size, "the host table");
    for (int r = 0; r < size; r++) {
        int lead = r;
        for (int q = 0; q < r && lead == r; q++)
            if (strcmp(all[q].host, all[r].host) == 0)
                lead = l->leader[q];
        l->leader[r] = lead;
        l->hosts += lead == r;
        if (all[r].llc < l->llc)
            l->llc = all[r].llc;
    }
    for (int r = 0; r < size; r++) {
        int on_host = 0;
        for (int q = 0; q < size; q++)
            on_host += l->leader[q] == l->leader[r];
        if (on_host > l->busiest)
            l->busiest = on_host;
    }
}

/* The four loops, each one function (the compiler vectorises it and cannot merge loops
 * across the timer calls). streaming: the stores bypass the caches (SSE2's non-temporal
 * stores, then a fence inside the timed loop so they are done when the clock stops), which
 * spares the read of every written line a cached store makes first; the arithmetic and
 * the bytes counted are the same. */
#ifdef __SSE2__
#include <emmintrin.h>
#define CAN_STREAM 1
#else
#define CAN_STREAM 0
#endif

static void copy(double *restrict c, const double *restrict a, size_t n, int streaming)
{
    size_t i = 0;
#if CAN_STREAM
    if (streaming) {
        for (; i + 2 <= n; i += 2)
            _mm_stream_pd(c + i, _mm_load_pd(a + i));
        _mm_sfence();
    }
#endif
    for (; i < n; i++)
        c[i] = a[i];
}

static void scale(double *restrict b, const double *restrict c, double s, size_t n, int streaming)
{
    size_t i = 0;
#if CAN_STREAM
    if (streaming) {
        __m128d vs = _mm_set1_pd(s);
        for (; i + 2 <= n; i += 2)
            _mm_stream_pd(b + i, _mm_mul_pd(vs, _mm_load_pd(c + i)));
        _mm_sfence();
    }
#endif
    for (; i < n; i++)
        b[i] = s * c[i];
}

static void add(double *restrict c, const double *restrict a, const double *restrict b, size_t n,
                int streaming)
{
    size_t i = 0;
#if CAN_STREAM
    if (streaming) {
        for (; i + 2 <= n; i += 2)
            _mm_stream_pd(c + i, _mm_add_pd(_mm_load_pd(a + i), _mm_load_pd(b + i)));
        _mm_sfence();
    }
#endif
    for (; i < n; i++)
        c[i] = a[i] + b[i];
}

static void triad(double *restrict a, const double *restrict b, const double *restrict c,
                  double s, size_t n, int streaming)
{
    size_t i = 0;
#if CAN_STREAM
    if (streaming) {
        __m128d vs = _mm_set1_pd(s);
        for (; i + 2 <= n; i += 2)
            _mm_stream_pd(a + i, _mm_add_pd(_mm_load_pd(b + i), _mm_mul_pd(vs, _mm_load_pd(c + i))));
        _mm_sfence();
    }
#endif
    for (; i < n; i++)
        a[i] = b[i] + s * c[i];
}

/* The largest relative error of x against the expected value. */
static double worst_error(const double *x, size_t n, double expected)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(x[i] - expected) / fabs(expected);
        if (!(e <= worst)) /* a NaN counts as the worst */
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

/* Per loop: best, average and worst of repetitions 1..ntimes-1 of times[loop][k]. */
typedef struct {
    double best, avg, max;
} spread;

static spread spread_of(const double *t, int ntimes)
{
    spread s = {INFINITY, 0.0, 0.0};
    for (int k = 1; k < ntimes; k++) {
        s.best = t[k] < s.best ? t[k] : s.best;
        s.max = t[k] > s.max ? t[k] : s.max;
        s.avg += t[k] / (ntimes - 1);
    }
    return s;
}

/* One rank's figures, gathered on rank 0. */
typedef struct {
    double rank_best[NLOOPS], host_best[NLOOPS];
} rank_figures;

typedef struct {
    const layout *lay;
    const peer *peers;
    long n;
    int ntimes, llc_from_option, streaming;
    double agg_gb_s[NLOOPS], rank_mean_gb_s[NLOOPS], worst, over_llc;
} result;

static void result_figures(ct_json *j, const void *arg)
{
    const result *r = arg;
    if (r->worst <= TOLERANCE) /* a failed run has no rates */
        for (int l = 0; l < NLOOPS; l++) {
            char key[32];
            snprintf(key, sizeof key, "%s_gb_s", loop_names[l]);
            ct_json_number(j, key, r->agg_gb_s[l]);
            snprintf(key, sizeof key, "%s_rank_gb_s", loop_names[l]);
            ct_json_number(j, key, r->rank_mean_gb_s[l]);
        }
    ct_json_integer(j, "ranks", r->lay->size);
    ct_json_integer(j, "hosts", r->lay->hosts);
    ct_json_integer(j, "n", r->n);
    ct_json_number(j, "array_bytes", 8.0 * (double)r->n);
    ct_json_number(j, "llc_bytes", isfinite(r->lay->llc) ? r->lay->llc : 0.0);
    ct_json_number(j, "arrays_over_llc", r->over_llc);
    ct_json_number(j, "max_rel_error", r->worst);
}

static void result_detail(ct_json *j, const void *arg)
{
    const result *r = arg;
    ct_json_integer(j, "ntimes", r->ntimes);
    ct_json_number(j, "scalar", SCALAR);
    ct_json_number(j, "tolerance", TOLERANCE);
    ct_json_string(j, "llc_from", r->llc_from_option ? "--cache" : "sysfs");
    ct_json_string(j, "stores", r->streaming ? "streaming" : "cached");
    ct_json_integer(j, "ranks_on_busiest_host", r->lay->busiest);
}

/* Rank 0: one sample per loop. */
static void write_samples(const result *r, const double *agg_times, const rank_figures *all)
{
    const layout *lay = r->lay;
    for (int l = 0; l < NLOOPS; l++) {
        double bytes = bytes_per_element[l] * (double)r->n; /* per rank and repetition */
        spread s = spread_of(agg_times + (size_t)l * r->ntimes, r->ntimes);
        double lo = INFINITY, hi = 0.0, sum = 0.0;
        ct_json j;
        ct_json_start(&j, stdout, "sample");
        ct_json_string(&j, "loop", loop_names[l]);
        ct_json_integer(&j, "ranks", lay->size);
        ct_json_integer(&j, "hosts", lay->hosts);
        ct_json_integer(&j, "n", r->n);
        ct_json_number(&j, "bytes_per_rank", bytes);
        ct_json_number(&j, "best_s", s.best);
        ct_json_number(&j, "avg_s", s.avg);
        ct_json_number(&j, "max_s", s.max);
        ct_json_number(&j, "gb_s", r->agg_gb_s[l]);
        ct_json_open_array(&j, "rank_gb_s");
        for (int q = 0; q < lay->size; q++) {
            double rate = bytes / all[q].rank_best[l] / 1e9;
            ct_json_number(&j, NULL, rate);
            lo = rate < lo ? rate : lo;
            hi = rate > hi ? rate : hi;
            sum += rate;
        }
        ct_json_close_array(&j);
        ct_json_open_object(&j, "rank_stats");
        ct_json_number(&j, "min", lo);
        ct_json_number(&j, "mean", sum / lay->size);
        ct_json_number(&j, "max", hi);
        ct_json_close_object(&j);
        ct_json_open_array(&j, "per_host");
        for (int q = 0; q < lay->size; q++) {
            if (lay->leader[q] != q)
                continue;
            int on_host = 0;
            for (int p = 0; p < lay->size; p++)
                on_host += lay->leader[p] == q;
            ct_json_open_object(&j, NULL);
            ct_json_string(&j, "host", r->peers[q].host);
            ct_json_integer(&j, "ranks", on_host);
            ct_json_number(&j, "gb_s", on_host * bytes / all[q].host_best[l] / 1e9);
            ct_json_close_object(&j);
        }
        ct_json_close_array(&j);
        ct_json_end(&j);
    }
}

int main(int argc, char **argv)
{
    options o;
    char err[1024];
    /* read before MPI starts, so that --check-only and --help never start it */
    int bad = parse_options(argc, argv, &o, err, sizeof err) != 0;
    int rank, size;
    /* no check of the rank count: every count works, each rank runs its own arrays */
    ct_mpi_start_args start = {.parse_failed = bad, .help = o.help, .usage = usage,
                               .check_only = &o.check, .opts = &o,
                               .err = err, .errlen = sizeof err};
    int status = ct_mpi_start(&start, &argc, &argv, &rank, &size);
    if (status != CT_MPI_RUN)
        return status;

    peer mine = {.llc = o.cache ? (double)o.cache : (double)llc_bytes(),
                 .mem_available = ct_mem_available()};
    gethostname(mine.host, sizeof mine.host - 1);
    peer *peers = ct_mpi_alloc(sizeof *peers * (size_t)size, "the table of hosts");
    CT_MPI_CHECK(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, peers, (int)sizeof mine,
                               MPI_BYTE, MPI_COMM_WORLD));
    layout lay;
    layout_of(peers, size, &lay);

    /* sizing, decided alike on every rank from the same table */
    long n = o.n;
    if (n == 0 && lay.llc <= 0.0) {
        if (rank == 0)
            ct_report_error("ct-stream: --cache: the last-level cache size is not in sysfs "
                            "on every host; give --cache BYTES or --n N");
        CT_MPI_CHECK(MPI_Finalize());
        return CT_EXIT_USAGE;
    }
    if (n == 0)
        n = (long)ceil(CACHE_TIMES * lay.llc / lay.busiest / sizeof(double));
    double host_bytes = 3.0 * sizeof(double) * (double)n * lay.busiest;
    for (int q = 0; q < size; q++)
        if (peers[q].mem_available > 0 && host_bytes > peers[q].mem_available) {
            if (rank == 0)
                ct_report_error("ct-stream: 3 arrays of %ld doubles on each of %d ranks need "
                                "%.0f MB, more than the %.0f MB available on %s",
                                n, lay.busiest, host_bytes / 1e6, peers[q].mem_available / 1e6,
                                peers[q].host);
            CT_MPI_CHECK(MPI_Finalize());
            return 1;
        }

    ct_alloc_failure f = {0};
    double *a = ct_mpi_try_alloc(&f, sizeof(double) * (size_t)n, "array a");
    double *b = ct_mpi_try_alloc(&f, sizeof(double) * (size_t)n, "array b");
    double *c = ct_mpi_try_alloc(&f, sizeof(double) * (size_t)n, "array c");
    ct_mpi_agree(MPI_COMM_WORLD, &f);
    /* each rank touches its own pages first, so they live next to it */
    for (long i = 0; i < n; i++) {
        a[i] = 1.0;
        b[i] = 2.0;
        c[i] = 0.0;
    }

    int streaming = CAN_STREAM && o.stores == STORES_STREAMING;
    double *t = ct_mpi_alloc(sizeof *t * NLOOPS * (size_t)o.ntimes, "the times");
    for (int k = 0; k < o.ntimes; k++)
        for (int l = 0; l < NLOOPS; l++) {
            CT_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            double t0 = MPI_Wtime();
            switch (l) {
            case COPY: copy(c, a, (size_t)n, streaming); break;
            case SCALE: scale(b, c, SCALAR, (size_t)n, streaming); break;
            case ADD: add(c, a, b, (size_t)n, streaming); break;
            default: triad(a, b, c, SCALAR, (size_t)n, streaming); break;
            }
            t[(size_t)l * o.ntimes + k] = MPI_Wtime() - t0;
        }

    /* the expected values: the same operations on one element */
    double ea = 1.0, eb = 2.0, ec = 0.0;
    for (int k = 0; k < o.ntimes; k++) {
        ec = ea;
        eb = SCALAR * ec;
        ec = ea + eb;
        ea = eb + SCALAR * ec;
    }
    if (o.inject_fault && rank == size - 1)
        a[n / 2] *= 1.0 + 1e-6;
    double worst = fmax(worst_error(a, (size_t)n, ea),
                        fmax(worst_error(b, (size_t)n, eb), worst_error(c, (size_t)n, ec)));
    CT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));

    /* the aggregate (slowest rank per repetition), each host's, each rank's */
    size_t nt = (size_t)NLOOPS * o.ntimes;
    double *agg = ct_mpi_alloc(sizeof *agg * nt, "the slowest times");
    double *on_host = ct_mpi_alloc(sizeof *on_host * nt, "the hosts' slowest times");
    CT_MPI_CHECK(MPI_Reduce(t, agg, (int)nt, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    MPI_Comm host;
    CT_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, lay.leader[rank], rank, &host));
    CT_MPI_CHECK(MPI_Allreduce(t, on_host, (int)nt, MPI_DOUBLE, MPI_MAX, host));
    CT_MPI_CHECK(MPI_Comm_free(&host));
    rank_figures me;
    for (int l = 0; l < NLOOPS; l++) {
        me.rank_best[l] = spread_of(t + (size_t)l * o.ntimes, o.ntimes).best;
        me.host_best[l] = spread_of(on_host + (size_t)l * o.ntimes, o.ntimes).best;
    }
    rank_figures *all = rank == 0 ? ct_mpi_alloc(sizeof *all * (size_t)size, "the ranks' figures")
                                  : NULL;
    CT_MPI_CHECK(MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0,
                            MPI_COMM_WORLD));

    result r = {.lay = &lay, .peers = peers, .n = n, .ntimes = o.ntimes,
                .llc_from_option = o.cache != 0, .streaming = streaming, .worst = worst,
                .over_llc = lay.llc > 0 ? 8.0 * (double)n * lay.busiest / lay.llc : 0.0};
    int passed = worst <= TOLERANCE;
    if (rank == 0) {
        for (int l = 0; l < NLOOPS; l++) {
            double bytes = bytes_per_element[l] * (double)n;
            r.agg_gb_s[l] = size * bytes / spread_of(agg + (size_t)l * o.ntimes, o.ntimes).best / 1e9;
            for (int q = 0; q < size; q++)
                r.rank_mean_gb_s[l] += bytes / all[q].rank_best[l] / 1e9 / size;
        }
        if (passed)
            write_samples(&r, agg, all);
        else
            fprintf(stderr, "ct-stream: verification failed: an element is off by %.3g "
                            "(relative; at most %.0e allowed)\n", worst, TOLERANCE);
    }
    ct_mpi_result(passed ? "passed" : "failed", result_figures, result_detail, &r);
    free(a);
    free(b);
    free(c);
    free(t);
    free(agg);
    free(on_host);
    free(all);
    free(peers);
    free(lay.leader);
    CT_MPI_CHECK(MPI_Finalize());
    return passed ? 0 : 1;
}
