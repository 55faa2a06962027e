/* ct-io-netcdf - netCDF collective vs independent I/O of 3-D int arrays (seeds/004), beside
 * raw MPI-IO of the same bytes.
 *
 *   mpirun -np P ct-io-netcdf --dir DIR [--sizes 16,64,100,128,256] [--mode both]
 *                             [--ops write,read] [--format cdf1|cdf2|cdf5] [--reps 20]
 *                             [--warmup 0]
 *                             [--raw] [--variants netcdf,raw,rawswap] [--keep]
 *                             [--inject-fault]
 *
 * The same source is built twice: linked with PnetCDF (ct-io-netcdf, local files; OpenMPI
 * only, as Debian builds PnetCDF) and linked with the forwarding client ncfwd (ct-io-fwd:
 * the same ncmpi_* calls, served by ct-io-server on another cluster; either MPI).
 *
 * The array: N x N x N ints, value(z, y, x) = z N^2 + y N + x (mod 2^32), dimensions
 * (z, y, x), x fastest; rank r of P holds a block of whole z-planes (the first N mod P
 * ranks one plane more).
 *
 * What one repetition times (each rank; the repetition's time is the maximum over ranks,
 * after a barrier):
 *   write  create(NC_CLOBBER | format) -> put_att_text(title) -> def_dim z, y, x ->
 *          def_var data(z, y, x) -> enddef | put_vara_int_all (collective) or
 *          begin_indep_data + put_vara_int + end_indep_data (independent) | close
 *   read   open(NC_NOWRITE) -> inq_dimid + inq_dimlen z, y, x -> inq_varid | get_vara_int_all
 *          or begin_indep_data + get_vara_int + end_indep_data | close
 * "open_to_close" is the whole, "io_only" the middle part; "cpu" the CPU time (user + system)
 * of all ranks over the whole (their sum). Every write repetition of every
 * variant writes a new file (the previous one is deleted before the timer starts), so create
 * with NC_CLOBBER and raw's open with MPI_MODE_CREATE do the same file-system work. (The paper names put_var_int
 * for the independent write; a z-block needs the subarray form, hence vara for both.)
 *
 * --raw adds two variants of the same bytes at the same offsets without the format:
 *   raw      open + write_at_all / write_at + close, read: open + read_at_all / read_at
 *            + close;
 *   rawswap  the same with the 4-byte big-endian swap netCDF needs on this machine, done in
 *            place before the write and undone after (what PnetCDF does), after the read.
 * The netCDF files' data sections are byte-identical to rawswap's files (offset: header).
 * --warmup W runs W untimed repetitions of every variant before the R timed ones of each
 * (op, mode): the first of a launch pays for a cold start the others do not.
 * --variants names the variants and their order. Their repetitions interleave: repetition r
 * runs them in that order, r+1 in the reverse one, so that every variant is timed under the
 * same load and page-cache state as the others (a benchmark also alternates the order
 * between launches).
 *
 * Verification: every repetition's read is compared with the pattern on every rank; after
 * the last write repetition the file is read back (untimed) and compared. A mismatch makes
 * the sample "verified": false and the run failed. --inject-fault (tests): the last rank
 * flips one bit of one value of what the last write repetition writes, and another bit of
 * the same value of what the first read returns, so both checks (and any check of the file)
 * must fail, with any --reps (the read's flip never undoes the write's).
 *
 * Files: DIR/ct_io_<variant>_<N>_<mode>.<nc|bin>; the netCDF files stay with --keep (for
 * ncvalidator, ncdump and a netCDF4 read-back by the caller), the raw ones never do. A read
 * with no write before it first writes its file untimed.
 *
 * The MPI-IO driver (ROMIO or OpenMPI's OMPIO) is detected from the hints of an open file
 * and reported in the result's detail; the caller chooses it (OMPI_MCA_io).
 */
#define _POSIX_C_SOURCE 200809L
#include "ct.h"
#include "ct_mpi.h"
#include "ct_opt.h"

#include <errno.h>
#include <limits.h>
#include <pnetcdf.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef CT_IO_FORWARDED
#define FORWARDED 1 /* the files are the server's: nothing to remove here */
#else
#define FORWARDED 0
#endif
#define MAX_SIZES 16
#define MAX_N 2048 /* N^3 ints must stay addressable; 2048^3 * 4 B = 32 GiB */
#define TITLE "clustertune ct-io-netcdf: int data(z, y, x) = z*N*N + y*N + x"
/* --inject-fault: different bits, so a read of the corrupted file stays wrong */
#define FAULT_WRITE_BIT 1
#define FAULT_READ_BIT 2

#define NC_CHECK(call) nc_check((call), #call, __LINE__)

static void nc_check(int rc, const char *call, int line)
{
    if (rc != NC_NOERR)
        ct_mpi_fail("%s failed at %s:%d: %s", call, ct_basename(__FILE__), line,
                    ncmpi_strerror(rc));
}

enum op { OP_WRITE, OP_READ };
enum mode { MODE_COLLECTIVE, MODE_INDEPENDENT, MODE_BOTH };
enum variant { V_NETCDF, V_RAW, V_RAWSWAP, V_COUNT };
/* one repetition's times; P_CPU: CPU time (user + system) of all ranks over open..close */
enum part { P_OPEN, P_IO, P_CLOSE, P_TOTAL, P_CPU, P_COUNT };

static const char *const op_names[] = {"write", "read"};
static const char *const mode_names[] = {"collective", "independent", "both", NULL};
static const char *const format_names[] = {"cdf1", "cdf2", "cdf5", NULL};
static const int format_modes[] = {0, NC_64BIT_OFFSET, NC_64BIT_DATA};
static const char *const variant_names[] = {"netcdf", "raw", "rawswap"};

typedef struct {
    int count, v[MAX_SIZES];
} size_list;

typedef struct {
    int count, v[V_COUNT]; /* in the order they run */
} variant_list;

typedef struct {
    size_list sizes;
    variant_list variants;
    int mode, format, reps, warmup, raw, keep, inject_fault, help;
    int ops[2]; /* write, read requested */
    const char *dir;
} options;

/* the one array block of this rank */
typedef struct {
    int n, np, rank;
    MPI_Offset z0, nz; /* first plane, planes */
    size_t count;      /* ints */
    int *buf;
} block;

static int parse_sizes(const ct_opt *opt, const char *text, char *expected, size_t len)
{
    size_list l = {0};
    l.count = ct_parse_int_list(text, ',', NULL, 1, MAX_N, l.v, MAX_SIZES);
    if (l.count < 0) {
        snprintf(expected, len, "up to %d sizes N (1..%d) separated by commas", MAX_SIZES, MAX_N);
        return -1;
    }
    *(size_list *)opt->dest = l;
    return 0;
}

static int parse_ops(const ct_opt *opt, const char *text, char *expected, size_t len)
{
    int ops[2] = {0, 0}, ok = *text != '\0';
    for (const char *p = text; ok && *p;) {
        size_t n = strcspn(p, ",");
        if (n == 5 && strncmp(p, "write", 5) == 0)
            ops[OP_WRITE] = 1;
        else if (n == 4 && strncmp(p, "read", 4) == 0)
            ops[OP_READ] = 1;
        else
            ok = 0;
        p += n;
        if (*p == ',' && *++p == '\0')
            ok = 0;
    }
    if (!ok) {
        snprintf(expected, len, "write, read or write,read");
        return -1;
    }
    memcpy(opt->dest, ops, sizeof ops);
    return 0;
}

static int parse_variants(const ct_opt *opt, const char *text, char *expected, size_t len)
{
    variant_list l = {0};
    int ok = *text != '\0';
    for (const char *p = text; ok && *p;) {
        size_t n = strcspn(p, ",");
        int found = -1;
        for (int v = 0; v < V_COUNT; v++)
            if (strlen(variant_names[v]) == n && strncmp(p, variant_names[v], n) == 0)
                found = v;
        for (int i = 0; i < l.count; i++)
            ok &= l.v[i] != found;
        ok &= found >= 0;
        if (ok)
            l.v[l.count++] = found;
        p += n;
        if (*p == ',' && *++p == '\0')
            ok = 0;
    }
    if (!ok) {
        snprintf(expected, len, "netcdf, raw, rawswap in any order, each at most once");
        return -1;
    }
    *(variant_list *)opt->dest = l;
    return 0;
}

static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen)
{
    *o = (options){.sizes = {5, {16, 64, 100, 128, 256}}, .mode = MODE_BOTH, .reps = 20,
                   .ops = {1, 1}};
    const ct_opt table[] = {
        {"--sizes", CT_OPT_CUSTOM, .dest = &o->sizes, .parse = parse_sizes},
        {"--mode", CT_OPT_CHOICE, .dest = &o->mode, .choices = mode_names},
        {"--ops", CT_OPT_CUSTOM, .dest = o->ops, .parse = parse_ops},
        {"--format", CT_OPT_CHOICE, .dest = &o->format, .choices = format_names},
        {"--reps", CT_OPT_INT, .dest = &o->reps, .min = 1, .max = 100000},
        {"--warmup", CT_OPT_INT, .dest = &o->warmup, .min = 0, .max = 1000},
        {"--dir", CT_OPT_STRING, .dest = &o->dir},
        {"--raw", CT_OPT_FLAG, .dest = &o->raw},
        {"--variants", CT_OPT_CUSTOM, .dest = &o->variants, .parse = parse_variants},
        {"--keep", CT_OPT_FLAG, .dest = &o->keep},
        {"--inject-fault", CT_OPT_FLAG, .dest = &o->inject_fault},
        {"--help", CT_OPT_FLAG, .dest = &o->help},
        {.type = CT_OPT_END},
    };
    if (ct_opt_parse(table, argc, argv, err, errlen))
        return -1;
    if (!o->help && !o->dir) {
        snprintf(err, errlen, "%s: --dir: required (where the files are written)",
                 ct_basename(argv[0]));
        return -1;
    }
    if (o->variants.count == 0) /* netcdf, then with --raw the raw variants */
        for (int v = 0; v < (o->raw ? V_COUNT : 1); v++)
            o->variants.v[o->variants.count++] = v;
    for (int i = 0; i < o->variants.count; i++)
        o->raw |= o->variants.v[i] != V_NETCDF;
#ifdef CT_IO_FORWARDED
    if (o->raw) {
        snprintf(err, errlen, "%s: --raw: raw MPI-IO runs locally only (ct-io-netcdf)",
                 ct_basename(argv[0]));
        return -1;
    }
#endif
    return 0;
}

static int value_at(int n, MPI_Offset z, size_t in_plane)
{
    return (int)(uint32_t)((uint64_t)z * (uint64_t)n * (uint64_t)n + in_plane);
}

static void fill(const block *b)
{
    size_t plane = (size_t)b->n * (size_t)b->n;
    for (MPI_Offset z = 0; z < b->nz; z++)
        for (size_t i = 0; i < plane; i++)
            b->buf[(size_t)z * plane + i] = value_at(b->n, b->z0 + z, i);
}

static int check(const block *b)
{
    size_t plane = (size_t)b->n * (size_t)b->n;
    for (MPI_Offset z = 0; z < b->nz; z++)
        for (size_t i = 0; i < plane; i++)
            if (b->buf[(size_t)z * plane + i] != value_at(b->n, b->z0 + z, i))
                return 0;
    return 1;
}

static inline void swap4(int *v, size_t count)
{
    uint32_t *u = (uint32_t *)v;
    for (size_t i = 0; i < count; i++)
        u[i] = __builtin_bswap32(u[i]);
}

static void path_of(char *path, size_t len, const options *o, enum variant v, int n, int mode)
{
    snprintf(path, len, "%s/ct_io_%s_%d_%s.%s", o->dir, variant_names[v], n, mode_names[mode],
             v == V_NETCDF ? "nc" : "bin");
}

/* ---------------------------------------------------------------- one repetition */

static void netcdf_write(const block *b, const char *path, int mode, int format, double t[P_COUNT])
{
    int ncid, dims[3], varid;
    MPI_Offset start[3] = {b->z0, 0, 0}, count[3] = {b->nz, b->n, b->n};
    double t0 = ct_now();
    NC_CHECK(ncmpi_create(MPI_COMM_WORLD, path, NC_CLOBBER | format_modes[format], MPI_INFO_NULL,
                          &ncid));
    NC_CHECK(ncmpi_put_att_text(ncid, NC_GLOBAL, "title", strlen(TITLE), TITLE));
    NC_CHECK(ncmpi_def_dim(ncid, "z", b->n, &dims[0]));
    NC_CHECK(ncmpi_def_dim(ncid, "y", b->n, &dims[1]));
    NC_CHECK(ncmpi_def_dim(ncid, "x", b->n, &dims[2]));
    NC_CHECK(ncmpi_def_var(ncid, "data", NC_INT, 3, dims, &varid));
    NC_CHECK(ncmpi_enddef(ncid));
    double t1 = ct_now();
    if (mode == MODE_COLLECTIVE) {
        NC_CHECK(ncmpi_put_vara_int_all(ncid, varid, start, count, b->buf));
    } else {
        NC_CHECK(ncmpi_begin_indep_data(ncid));
        NC_CHECK(ncmpi_put_vara_int(ncid, varid, start, count, b->buf));
        NC_CHECK(ncmpi_end_indep_data(ncid));
    }
    double t2 = ct_now();
    NC_CHECK(ncmpi_close(ncid));
    double t3 = ct_now();
    t[P_OPEN] = t1 - t0, t[P_IO] = t2 - t1, t[P_CLOSE] = t3 - t2, t[P_TOTAL] = t3 - t0;
}

static void netcdf_read(const block *b, const char *path, int mode, double t[P_COUNT])
{
    static const char *const dim_names[3] = {"z", "y", "x"};
    int ncid, varid;
    MPI_Offset start[3] = {b->z0, 0, 0}, count[3] = {b->nz, b->n, b->n};
    double t0 = ct_now();
    NC_CHECK(ncmpi_open(MPI_COMM_WORLD, path, NC_NOWRITE, MPI_INFO_NULL, &ncid));
    for (int d = 0; d < 3; d++) {
        int dimid;
        MPI_Offset len;
        NC_CHECK(ncmpi_inq_dimid(ncid, dim_names[d], &dimid));
        NC_CHECK(ncmpi_inq_dimlen(ncid, dimid, &len));
        if (len != b->n)
            ct_mpi_fail("%s: dimension %s is %lld, expected %d", path, dim_names[d],
                        (long long)len, b->n);
    }
    NC_CHECK(ncmpi_inq_varid(ncid, "data", &varid));
    double t1 = ct_now();
    if (mode == MODE_COLLECTIVE) {
        NC_CHECK(ncmpi_get_vara_int_all(ncid, varid, start, count, b->buf));
    } else {
        NC_CHECK(ncmpi_begin_indep_data(ncid));
        NC_CHECK(ncmpi_get_vara_int(ncid, varid, start, count, b->buf));
        NC_CHECK(ncmpi_end_indep_data(ncid));
    }
    double t2 = ct_now();
    NC_CHECK(ncmpi_close(ncid));
    double t3 = ct_now();
    t[P_OPEN] = t1 - t0, t[P_IO] = t2 - t1, t[P_CLOSE] = t3 - t2, t[P_TOTAL] = t3 - t0;
}

#ifndef CT_IO_FORWARDED
/* raw MPI-IO of the same bytes at the same offsets (no header) */
static void raw_io(const block *b, const char *path, enum op op, int mode, int swap,
                   double t[P_COUNT])
{
    MPI_File fh;
    MPI_Offset offset = b->z0 * (MPI_Offset)b->n * b->n * (MPI_Offset)sizeof(int);
    int count = (int)b->count;
    double t0 = ct_now();
    int amode = op == OP_WRITE ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
    CT_MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, &fh));
    double t1 = ct_now();
    if (op == OP_WRITE) {
        if (swap)
            swap4(b->buf, b->count);
        if (mode == MODE_COLLECTIVE)
            CT_MPI_CHECK(MPI_File_write_at_all(fh, offset, b->buf, count, MPI_INT, MPI_STATUS_IGNORE));
        else
            CT_MPI_CHECK(MPI_File_write_at(fh, offset, b->buf, count, MPI_INT, MPI_STATUS_IGNORE));
        if (swap)
            swap4(b->buf, b->count);
    } else {
        if (mode == MODE_COLLECTIVE)
            CT_MPI_CHECK(MPI_File_read_at_all(fh, offset, b->buf, count, MPI_INT, MPI_STATUS_IGNORE));
        else
            CT_MPI_CHECK(MPI_File_read_at(fh, offset, b->buf, count, MPI_INT, MPI_STATUS_IGNORE));
        if (swap)
            swap4(b->buf, b->count);
    }
    double t2 = ct_now();
    CT_MPI_CHECK(MPI_File_close(&fh));
    double t3 = ct_now();
    t[P_OPEN] = t1 - t0, t[P_IO] = t2 - t1, t[P_CLOSE] = t3 - t2, t[P_TOTAL] = t3 - t0;
}
#endif

static void one_rep(const block *b, const options *o, enum variant v, enum op op, int mode,
                    const char *path, double t[P_COUNT])
{
#ifndef CT_IO_FORWARDED
    if (v != V_NETCDF) {
        raw_io(b, path, op, mode, v == V_RAWSWAP, t);
        return;
    }
#else
    (void)v; /* only the netCDF variant is forwarded */
#endif
    if (op == OP_WRITE)
        netcdf_write(b, path, mode, o->format, t);
    else
        netcdf_read(b, path, mode, t);
}

/* ---------------------------------------------------------------- statistics, output */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void stats(ct_json *j, const char *key, const double *v, int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        ct_mpi_fail("out of memory for %d timings", n);
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    ct_json_open_object(j, key);
    ct_json_number(j, "min", s[0]);
    ct_json_number(j, "median", median);
    ct_json_number(j, "max", s[n - 1]);
    ct_json_close_object(j);
    free(s);
}

static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

typedef struct {
    const options *o;
    const char *driver;
    char selection[256]; /* OpenMPI's io MCA parameter as the job saw it */
    char version[128];
} run_info;

static void emit(const run_info *ri, const block *b, enum variant v, enum op op, int mode,
                 double *const times[P_COUNT], int verified, const char *path)
{
    if (b->rank != 0)
        return;
    double bytes = (double)b->n * b->n * (double)b->n * sizeof(int);
    int reps = ri->o->reps;
    ct_json j;
    ct_json_start(&j, stdout, "sample");
    ct_json_integer(&j, "size", b->n);
    ct_json_string(&j, "op", op_names[op]);
    ct_json_string(&j, "mode", mode_names[mode]);
    ct_json_string(&j, "variant", variant_names[v]);
    ct_json_string(&j, "format", v == V_NETCDF ? format_names[ri->o->format] : "raw");
    ct_json_integer(&j, "np", b->np);
    ct_json_number(&j, "bytes", bytes);
    ct_json_integer(&j, "reps", reps);
    stats(&j, "open_to_close_s", times[P_TOTAL], reps);
    stats(&j, "io_only_s", times[P_IO], reps);
    stats(&j, "open_s", times[P_OPEN], reps);
    stats(&j, "close_s", times[P_CLOSE], reps);
    stats(&j, "cpu_s", times[P_CPU], reps);
    ct_json_number(&j, "mbps", bytes / min_of(times[P_TOTAL], reps) / 1e6);
    ct_json_number(&j, "mbps_io", bytes / min_of(times[P_IO], reps) / 1e6);
    ct_json_bool(&j, "verified", verified);
    if (v == V_NETCDF && op == OP_WRITE && ri->o->keep)
        ct_json_string(&j, "file", path);
    ct_json_end(&j);
}

/* Forwarded: the ranks that finish first wait asleep, not spinning in MPI, while the others'
 * data still travel (their TLS needs the CPU; times are taken before) */
static void quiet_barrier(void)
{
    MPI_Request rq;
    CT_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &rq));
    for (int done = 0;;) {
        CT_MPI_CHECK(MPI_Test(&rq, &done, MPI_STATUS_IGNORE));
        if (done)
            return;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* CPU time of this process, all its threads. Beside the wall time: on the shared 2-core
 * machine a repetition's wall time is mostly the wait for a CPU (load 5-14), the work
 * itself is what the variants' CPU times compare. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* R timed repetitions of one (op, mode) for every variant, interleaved: repetition r runs
 * the variants in their order when r is even, reversed when odd. A variant's repetitions so
 * sit beside the others' under the same load: on the shared machine the 2-rank 256^3 write
 * moved by 60-100 ms from launch to launch and over seconds, and variants timed one block
 * after the other took that drift into their ratio. Returns 1 if every check passed. */
static int measure(const run_info *ri, const block *b, enum op op, int mode,
                   double *const times[V_COUNT][P_COUNT])
{
    const options *o = ri->o;
    const variant_list *vl = &o->variants;
    char paths[V_COUNT][4096];
    int ok[V_COUNT];
    for (int i = 0; i < vl->count; i++) {
        path_of(paths[i], sizeof paths[i], o, vl->v[i], b->n, mode);
        ok[i] = 1;
    }
    for (int r = -o->warmup; r < o->reps; r++) /* r < 0: untimed warm-up */
        for (int k = 0; k < vl->count; k++) {
            int i = (r + o->warmup) % 2 ? vl->count - 1 - k : k;
            enum variant v = vl->v[i];
            double t[P_COUNT], tmax[P_COUNT];
            int corrupt = o->inject_fault && b->rank == b->np - 1 && b->count > 0 &&
                          ((op == OP_WRITE && r == o->reps - 1) || (op == OP_READ && r == 0));
            if (op == OP_WRITE) {
                fill(b);
                if (corrupt)
                    b->buf[0] ^= FAULT_WRITE_BIT;
                /* every variant writes a new file: the previous repetition's is removed
                 * untimed (truncating it, as NC_CLOBBER would, costs ext4 a flush at close and
                 * freeing its pages 14-46 ms on a loaded machine, which timed the file system
                 * instead) */
                if (!FORWARDED && b->rank == 0)
                    MPI_File_delete(paths[i], MPI_INFO_NULL); /* absent is fine */
            } else {
                memset(b->buf, 0, b->count * sizeof(int));
            }
            CT_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            double cpu0 = cpu_now();
            one_rep(b, o, v, op, mode, paths[i], t);
            t[P_CPU] = cpu_now() - cpu0;
            if (FORWARDED)
                quiet_barrier();
            CT_MPI_CHECK(MPI_Allreduce(t, tmax, P_CPU, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
            CT_MPI_CHECK(MPI_Allreduce(&t[P_CPU], &tmax[P_CPU], 1, MPI_DOUBLE, MPI_SUM,
                                       MPI_COMM_WORLD));
            for (int p = 0; r >= 0 && p < P_COUNT; p++)
                times[v][p][r] = tmax[p];
            if (op == OP_READ) {
                if (corrupt)
                    b->buf[0] ^= FAULT_READ_BIT;
                ok[i] &= check(b);
            }
        }
    int all_ok = 1;
    for (int i = 0; i < vl->count; i++) {
        enum variant v = vl->v[i];
        if (op == OP_WRITE) { /* the file as the last repetition left it, read back untimed */
            double t[P_COUNT];
            memset(b->buf, 0, b->count * sizeof(int));
            one_rep(b, o, v, OP_READ, MODE_COLLECTIVE, paths[i], t);
            ok[i] &= check(b);
        }
        int all;
        CT_MPI_CHECK(MPI_Allreduce(&ok[i], &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
        if (!all && b->rank == 0) /* the job then exits 1: this line says why */
            fprintf(stderr, "%s: N=%d %s %s %s: data differ from the pattern on some rank\n",
                    FORWARDED ? "ct-io-fwd" : "ct-io-netcdf", b->n, mode_names[mode],
                    op_names[op], variant_names[v]);
        emit(ri, b, v, op, mode, times[v], all, paths[i]);
        if (v != V_NETCDF && (op == OP_READ || !o->ops[OP_READ]) && b->rank == 0)
            MPI_File_delete(paths[i], MPI_INFO_NULL);
        all_ok &= all;
    }
    return all_ok;
}

/* ---------------------------------------------------------------- the MPI-IO driver */

#ifndef CT_IO_FORWARDED
/* OpenMPI's selection of its io framework (the MCA parameter "io", read through MPI_T):
 * "" when nothing was chosen (MPICH has no such variable). */
static void openmpi_io_selection(char *value, size_t len)
{
    int provided, n;
    value[0] = '\0';
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return;
    if (MPI_T_cvar_get_num(&n) == MPI_SUCCESS)
        for (int i = 0; i < n; i++) {
            char name[256], desc[16];
            int name_len = sizeof name, desc_len = sizeof desc, verbosity, bind, scope, count;
            MPI_Datatype type;
            MPI_T_enum enumtype;
            MPI_T_cvar_handle h;
            if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &enumtype, desc,
                                    &desc_len, &bind, &scope) != MPI_SUCCESS ||
                strcmp(name, "io") != 0 || type != MPI_CHAR)
                continue;
            if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) == MPI_SUCCESS) {
                char *buf = calloc((size_t)count + 1, 1);
                if (buf && MPI_T_cvar_read(h, buf) == MPI_SUCCESS)
                    snprintf(value, len, "%s", buf);
                free(buf);
                MPI_T_cvar_handle_free(&h);
            }
            break;
        }
    MPI_T_finalize();
}

/* ROMIO publishes its hints (romio_cb_write, ...) on every open file in MPICH; OpenMPI's
 * romio321 and OMPIO publish none, so there the MCA selection decides: OMPIO unless
 * romio321 is selected (and OMPIO not also offered). */
static const char *mpiio_driver(const char *dir, int rank, const char *selection)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ct_io_probe.bin", dir);
    MPI_File fh;
    MPI_Info info;
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                           &fh);
    if (rc != MPI_SUCCESS)
        ct_mpi_fail("--dir %s: cannot create a file there (MPI_File_open failed)", dir);
    CT_MPI_CHECK(MPI_File_get_info(fh, &info));
    int nkeys, romio = 0;
    CT_MPI_CHECK(MPI_Info_get_nkeys(info, &nkeys));
    for (int i = 0; i < nkeys; i++) {
        char key[MPI_MAX_INFO_KEY + 1];
        CT_MPI_CHECK(MPI_Info_get_nthkey(info, i, key));
        romio |= strncmp(key, "romio_", 6) == 0;
    }
    CT_MPI_CHECK(MPI_Info_free(&info));
    CT_MPI_CHECK(MPI_File_close(&fh));
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    if (romio)
        return "romio";
    if (strstr(selection, "romio") && !strchr(selection, '^') && !strstr(selection, "ompio"))
        return "romio";
    return "ompio";
}
#endif

static void detail(ct_json *j, const void *arg)
{
    const run_info *ri = arg;
    ct_json_string(j, "mpiio_driver", ri->driver);
    ct_json_string(j, "mpiio_selection", ri->selection);
    ct_json_string(j, "netcdf_library", ri->version);
    ct_json_string(j, "format", format_names[ri->o->format]);
    ct_json_integer(j, "reps", ri->o->reps);
#ifdef CT_IO_FORWARDED
    ct_json_bool(j, "remote", 1);
#else
    ct_json_bool(j, "remote", 0);
#endif
}

static void usage(void)
{
    printf("usage: %s --dir DIR [--sizes 16,64,100,128,256] [--mode collective|independent"
           "|both] [--ops write,read] [--format cdf1|cdf2|cdf5] [--reps 20] [--warmup 0] [--raw]"
           " [--variants netcdf,raw,rawswap] [--keep] [--inject-fault]\n",
           FORWARDED ? "ct-io-fwd" : "ct-io-netcdf");
}

int main(int argc, char **argv)
{
    options o;
    char err[512];
    int bad = parse_options(argc, argv, &o, err, sizeof err) != 0;
    int rank, np;
    ct_mpi_start_args start = {.parse_failed = bad, .help = o.help, .usage = usage, .err = err,
                               .errlen = sizeof err};
    int status = ct_mpi_start(&start, &argc, &argv, &rank, &np);
    if (status != CT_MPI_RUN)
        return status;
    run_info ri = {.o = &o};
#ifndef CT_IO_FORWARDED
    openmpi_io_selection(ri.selection, sizeof ri.selection);
#endif

#ifdef CT_IO_FORWARDED
    ri.driver = "forwarded"; /* the server's driver is in its own output */
#else
    ri.driver = mpiio_driver(o.dir, rank, ri.selection);
#endif
    snprintf(ri.version, sizeof ri.version, "%s", ncmpi_inq_libvers());

    int first = o.mode == MODE_BOTH ? MODE_COLLECTIVE : o.mode;
    int last = o.mode == MODE_BOTH ? MODE_INDEPENDENT : o.mode;
    int all_ok = 1;
    double *times[V_COUNT][P_COUNT];
    for (int v = 0; v < V_COUNT; v++)
        for (int p = 0; p < P_COUNT; p++)
            times[v][p] = ct_mpi_alloc((size_t)o.reps * sizeof(double), "timings");

    for (int s = 0; s < o.sizes.count; s++) {
        int n = o.sizes.v[s];
        block b = {.n = n, .np = np, .rank = rank};
        b.nz = n / np + (rank < n % np);
        b.z0 = (MPI_Offset)rank * (n / np) + (rank < n % np ? rank : n % np);
        b.count = (size_t)b.nz * (size_t)n * (size_t)n;
        if (b.count > INT_MAX)
            ct_mpi_fail("--sizes %d: %zu ints per rank exceed one MPI count; use more ranks",
                        n, b.count);
        ct_alloc_failure f = {0};
        b.buf = ct_mpi_try_alloc(&f, b.count ? b.count * sizeof(int) : 1, "the array block");
        ct_mpi_agree(MPI_COMM_WORLD, &f);
        for (int mode = first; mode <= last; mode++) {
            if (o.ops[OP_WRITE])
                all_ok &= measure(&ri, &b, OP_WRITE, mode, times);
            else /* the files to read: written untimed */
                for (int i = 0; i < o.variants.count; i++) {
                    double t[P_COUNT];
                    char path[4096];
                    path_of(path, sizeof path, &o, o.variants.v[i], n, mode);
                    fill(&b);
                    one_rep(&b, &o, o.variants.v[i], OP_WRITE, MODE_COLLECTIVE, path, t);
                }
            if (o.ops[OP_READ])
                all_ok &= measure(&ri, &b, OP_READ, mode, times);
            if (!FORWARDED && !o.keep && rank == 0) /* raw files: removed by measure */
                for (int i = 0; i < o.variants.count; i++)
                    if (o.variants.v[i] == V_NETCDF) {
                        char path[4096];
                        path_of(path, sizeof path, &o, V_NETCDF, n, mode);
                        remove(path);
                    }
        }
        free(b.buf);
    }
    for (int v = 0; v < V_COUNT; v++)
        for (int p = 0; p < P_COUNT; p++)
            free(times[v][p]);
    ct_mpi_result(all_ok ? "passed" : "failed", NULL, detail, &ri);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
