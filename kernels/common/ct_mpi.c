/* ct_mpi.c - the MPI half of the kernel harness (see ct_mpi.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "ct_mpi.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *program = "ct-kernel"; /* until ct_mpi_init */
/* this rank's start (ct_mpi_init), for its rank line at MPI_Finalize */
static struct {
    int started, rank;
    double wall, user, system;
} since;
static int result_written; /* rank 0: the run got as far as its result line */
/* wall time this rank spent in ct_mpi_waitall, for its rank line: a wait naps, so CPU/wall
 * alone would read a rank that waits longer than its peers as one that lost its core */
static double waited;
/* this machine's ranks may share cores (until ct_mpi_init says: assume so,
 * the wait that never holds a core another rank needs) */
static int cores_shared = 1;
#define ABORT_WAIT_MS 500

/* Aborts every rank, wait_ms after the error line went out: launchers forward output
 * asynchronously and drop what they have not forwarded once a rank aborts. */
static _Noreturn void abort_job(long wait_ms)
{
    fflush(NULL);
    nanosleep(&(struct timespec){wait_ms / 1000, wait_ms % 1000 * 1000000L}, NULL);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _Exit(1); /* MPI_Abort does not return; this keeps the promise if it did */
}

static int world_rank(void)
{
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank); /* unchecked: used while reporting a failure */
    return rank;
}

static int wait_settings_read(const char *prog, char *err, size_t errlen);
static int refused_by_any(int bad, const char *err);

/* This rank's machine as a colour for MPI_Comm_split: a hash of the running kernel's
 * boot id. The hosts of a virtual cluster (network namespaces) are separate MPI nodes but
 * share one kernel and its CPUs; separate machines have their own. Unreadable: 0, so such
 * ranks count as one machine (their cores shared, the safe side). */
static int machine_colour(void)
{
    char id[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(id, sizeof id, f))
            id[0] = '\0';
        fclose(f);
    }
    unsigned long h = 2166136261u; /* FNV-1a */
    for (const char *c = id; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u & 0xffffffffu;
    return id[0] ? (int)(h & 0x7fffffff) : 0;
}

/* Collective: whether the ranks on this machine may share cores, for ct_mpi_waitall: no
 * only when each is bound to CPUs of its own (their affinity masks do not overlap), as
 * Open MPI binds 2 ranks; unbound ranks (MPICH's default) may be put on one core by the
 * scheduler, where a rank polling without pause holds the core its sender needs
 * (measured with MPICH: 8^4 beside a busy loop 4x slower than with the yield). */
static int machine_cores_shared(void)
{
    MPI_Comm machine;
    CT_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, machine_colour(), 0, &machine));
    cpu_set_t mine, all;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) /* unknown: as if one core */
        CPU_SET(0, &mine);
    int count = CPU_COUNT(&mine), counted;
    CT_MPI_CHECK(MPI_Allreduce(&mine, &all, (int)sizeof mine, MPI_BYTE, MPI_BOR, machine));
    CT_MPI_CHECK(MPI_Allreduce(&count, &counted, 1, MPI_INT, MPI_SUM, machine));
    CT_MPI_CHECK(MPI_Comm_free(&machine));
    return counted != CPU_COUNT(&all); /* some CPU is in two ranks' masks */
}

void ct_mpi_init(int *argc, char ***argv)
{
    program = ct_basename((*argv)[0]);
    int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) { /* nothing of MPI can be trusted: no error string, no abort */
        ct_report_error("%s: MPI_Init failed (error code %d)", program, rc);
        exit(1);
    }
    CT_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &since.rank));
    /* the wait's variables are checked at the start, not at the first wait: a bad one is
     * bad input (one line, exit status CT_EXIT_USAGE; the environment may differ between
     * hosts) */
    char err[256];
    if (refused_by_any(wait_settings_read(program, err, sizeof err), err)) {
        (MPI_Finalize)();
        exit(CT_EXIT_USAGE);
    }
    cores_shared = machine_cores_shared();
    since.wall = ct_now();
    ct_cpu_times(&since.user, &since.system);
    since.started = 1;
}

/* one rank's times, gathered as bytes to rank 0 (every rank runs this same build) */
typedef struct {
    double wall, user, system, wait;
    char host[64];
} rank_times;

int ct_mpi_finalize(void)
{
    if (since.started) {
        /* Rank 0 writes every rank's line: a line another rank wrote while rank 0 wrote
         * its (long) result line could land inside it in the launcher's merged stdout. */
        rank_times mine = {.wall = ct_now() - since.wall, .wait = waited};
        ct_cpu_times(&mine.user, &mine.system);
        mine.user -= since.user;
        mine.system -= since.system;
        gethostname(mine.host, sizeof mine.host - 1);
        int size;
        CT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
        rank_times *all = since.rank == 0 ? ct_mpi_alloc(sizeof mine * (size_t)size, "rank times")
                                          : NULL;
        CT_MPI_CHECK(MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine,
                                MPI_BYTE, 0, MPI_COMM_WORLD));
        /* after a result only: a run refused for its input says one error line */
        for (int r = 0; all && result_written && r < size; r++) {
            ct_json j;
            ct_json_start(&j, stdout, "rank");
            ct_json_integer(&j, "rank", r);
            ct_json_string(&j, "host", all[r].host);
            ct_json_number(&j, "wall_s", all[r].wall);
            ct_json_number(&j, "cpu_s", all[r].user + all[r].system);
            ct_json_number(&j, "user_s", all[r].user);
            ct_json_number(&j, "system_s", all[r].system);
            ct_json_number(&j, "wait_s", all[r].wait);
            ct_json_end(&j);
        }
        free(all);
    }
    return (MPI_Finalize)();
}

/* Every rank's refusal (bad: this rank has one, its line in err), agreed: the lowest rank
 * with one says it. Returns whether any rank refused. Collective over MPI_COMM_WORLD. */
static int refused_by_any(int bad, const char *err)
{
    int me = world_rank(), mine = bad ? me : INT_MAX, first;
    CT_MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (me == first)
        ct_report_error("%s", err);
    return first != INT_MAX;
}

/* This process's rank as its launcher says before MPI starts (Open MPI, Hydra, PMIx); 0 when
 * run alone. Only for --help, which must not start MPI but is printed once per job. */
static long launcher_rank(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return strtol(v, NULL, 10);
    }
    return 0;
}

int ct_mpi_start(const ct_mpi_start_args *a, int *argc, char ***argv, int *rank, int *size)
{
    const char *prog = ct_basename((*argv)[0]);
    if (a->help) {
        if (launcher_rank() == 0)
            a->usage();
        return 0;
    }
    if (a->check_only && a->check_only->on) {
        int np = a->check_only->np;
        return ct_check_only_exit(
            a->parse_failed || (a->check && a->check(a->opts, np, prog, a->err, a->errlen)) ||
                    (a->check_skips && a->check_skips(a->opts, np, prog, a->err, a->errlen)) ||
                    wait_settings_read(prog, a->err, a->errlen)
                ? a->err
                : NULL);
    }
    ct_mpi_init(argc, argv);
    CT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, rank));
    CT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, size));
    int bad = a->parse_failed;
    if (a->shared) {
        CT_MPI_CHECK(MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD));
        if (!bad)
            CT_MPI_CHECK(MPI_Bcast(a->opts, (int)a->shared, MPI_BYTE, 0, MPI_COMM_WORLD));
    }
    bad = bad || (a->check && a->check(a->opts, *size, prog, a->err, a->errlen));
    if (refused_by_any(bad, a->err)) {
        CT_MPI_CHECK(MPI_Finalize());
        return CT_EXIT_USAGE;
    }
    return CT_MPI_RUN;
}

void ct_mpi_check(int rc, const char *call, const char *file, int line)
{
    if (rc == MPI_SUCCESS)
        return;
    char why[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, why, &len) != MPI_SUCCESS)
        snprintf(why, sizeof why, "error code %d", rc);
    ct_mpi_fail("%s failed at %s:%d: %s", call, ct_basename(file), line, why);
}

void ct_mpi_fail(const char *fmt, ...)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s: rank %d: ", program, world_rank());
    va_list ap;
    va_start(ap, fmt);
    ct_report_errorv(prefix, fmt, ap);
    va_end(ap);
    abort_job(ABORT_WAIT_MS);
}

void *ct_mpi_alloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        ct_mpi_fail("cannot allocate %s (%zu bytes)", what, bytes);
    return p;
}

void *ct_mpi_try_alloc(ct_alloc_failure *f, size_t bytes, const char *what)
{
    /* aligned_alloc wants a multiple of the alignment */
    size_t size = bytes ? (bytes + 63) / 64 * 64 : 64;
    void *p = bytes <= SIZE_MAX - 64 ? aligned_alloc(64, size) : NULL;
    if (!p && !f->what)
        *f = (ct_alloc_failure){what, (double)bytes};
    return p;
}

void ct_mpi_agree(MPI_Comm comm, const ct_alloc_failure *f)
{
    int me;
    CT_MPI_CHECK(MPI_Comm_rank(comm, &me));
    /* MAXLOC: any failure wins, and among failures the lowest rank */
    struct {
        int failed, rank;
    } mine = {f->what != NULL, me}, first;
    MPI_Request rq;
    CT_MPI_CHECK(MPI_Iallreduce(&mine, &first, 1, MPI_2INT, MPI_MAXLOC, comm, &rq));
    ct_mpi_waitall(1, &rq, NULL);
    if (!first.failed)
        return;
    char what[256] = "";
    if (me == first.rank)
        snprintf(what, sizeof what, "rank %d: cannot allocate %s (%.0f bytes)", world_rank(),
                 f->what, f->bytes);
    CT_MPI_CHECK(MPI_Ibcast(what, (int)sizeof what, MPI_CHAR, first.rank, comm, &rq));
    ct_mpi_waitall(1, &rq, NULL);
    if (me == first.rank)
        ct_report_error("%s: %s", program, what);
    else
        fprintf(stderr, "%s: rank %d: stopping, %s\n", program, world_rank(), what);
    /* every rank has said why before the abort can kill it */
    CT_MPI_CHECK(MPI_Ibarrier(comm, &rq));
    ct_mpi_waitall(1, &rq, NULL);
    /* the failing rank aborts the job; the others give it time to, and abort themselves
     * only if still alive (OpenMPI garbles its messages when several ranks abort) */
    abort_job(me == first.rank ? ABORT_WAIT_MS : 4 * ABORT_WAIT_MS);
}

/* How ct_mpi_waitall waits (ct_mpi.h): polls for up to spin_us, then polls with naps
 * between polls that double from NAP_FIRST_NS up to nap_us. How it polls depends on whether
 * this machine's ranks are bound to cores of their own (cores_shared, found in ct_mpi_init):
 *   a core each: MPI_Test without pause for up to WAIT_SPIN_OWN_US. The sender is running,
 *     or gets its core back within a scheduler slice or two (a busy neighbour took it);
 *     the poll takes nothing any rank needs, where a yield (the wait before issue 23) or a
 *     nap handed this core to the neighbour for a whole slice at every short wait: 4-5x
 *     slower beside one busy loop on 8^4 QCD where MILC lost 3-4x (docs/qcd.md, "Beside a
 *     busy neighbour");
 *   ranks that may share a core (unbound, or more ranks than cores): sched_yield between
 *     polls, for WAIT_SPIN_SHARED_US only, since the sender may need this very core.
 * CT_MPI_WAIT_SPIN_US (either case; -1 polls and yields for ever, the old way) and
 * CT_MPI_WAIT_NAP_US set the bounds for A/B measurements, read and checked once
 * (wait_settings_read). */
#define WAIT_SPIN_OWN_US 5000
#define WAIT_SPIN_SHARED_US 50
#define WAIT_NAP_US 200
#define WAIT_MAX_US 10000000L /* 10 s: more is no wait tuning, and would overflow below */
#define NAP_FIRST_NS 1000L
#define NS_PER_S 1000000000L
#define WAIT_SPIN_DEFAULT (-2) /* no CT_MPI_WAIT_SPIN_US: by cores_shared */

static struct {
    int read;
    long spin_us, nap_us;
} wait_settings;

/* One variable, an integer in [min, WAIT_MAX_US], or unset or empty (fallback); returns 0, or -1
 * with "<prog>: NAME: expected ..., got '...'" in err (the line of a bad flag, ct_opt.h). */
static int wait_knob(const char *prog, const char *name, long min, long fallback, long *v,
                     char *err, size_t errlen)
{
    const char *text = getenv(name);
    *v = fallback;
    if (!text || !*text)
        return 0;
    char *end;
    errno = 0;
    long got = strtol(text, &end, 10);
    if (errno || end == text || *end || got < min || got > WAIT_MAX_US) {
        snprintf(err, errlen, "%s: %s: expected an integer from %ld to %ld (microseconds), got '%s'",
                 prog, name, min, WAIT_MAX_US, text);
        return -1;
    }
    *v = got;
    return 0;
}

/* Reads both variables once; 0, or -1 with the first bad one's line in err. */
static int wait_settings_read(const char *prog, char *err, size_t errlen)
{
    if (wait_settings.read)
        return 0;
    if (wait_knob(prog, "CT_MPI_WAIT_SPIN_US", -1, WAIT_SPIN_DEFAULT, &wait_settings.spin_us, err,
                  errlen) ||
        wait_knob(prog, "CT_MPI_WAIT_NAP_US", 0, WAIT_NAP_US, &wait_settings.nap_us, err, errlen))
        return -1;
    wait_settings.read = 1;
    return 0;
}

void ct_mpi_waitall(int n, MPI_Request *reqs, void (*progress)(void))
{
    char err[256];
    if (wait_settings_read(program, err, sizeof err)) /* a program without ct_mpi_init */
        ct_mpi_fail("%s", err);
    long spin_us = wait_settings.spin_us, nap_max_ns = 1000L * wait_settings.nap_us;
    if (spin_us == WAIT_SPIN_DEFAULT)
        spin_us = cores_shared ? WAIT_SPIN_SHARED_US : WAIT_SPIN_OWN_US;
    int yield = cores_shared || spin_us < 0;
    double entered = MPI_Wtime();
    double spin_until = entered + 1e-6 * (double)spin_us;
    long nap_ns = NAP_FIRST_NS;
    for (;;) {
        int done = 1;
        for (int i = 0; i < n; i++) {
            if (reqs[i] == MPI_REQUEST_NULL)
                continue;
            int flag;
            CT_MPI_CHECK(MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE));
            done &= flag;
        }
        if (done) {
            waited += MPI_Wtime() - entered;
            return;
        }
        if (progress)
            progress();
        if (spin_us < 0 || MPI_Wtime() < spin_until) {
            if (yield)
                sched_yield();
            continue;
        }
        /* a napping rank leaves its core to whatever else wants it, and its CPU time shows
         * the wait; sched_yield returns at once when nothing else is runnable there (the
         * old wait spent all of a long wait on the CPU). A nap of a second or more has
         * whole seconds: nanosleep refuses tv_nsec >= 1e9 (and would not nap at all). */
        nanosleep(&(struct timespec){nap_ns / NS_PER_S, nap_ns % NS_PER_S}, NULL);
        if (nap_ns < nap_max_ns)
            nap_ns = nap_ns * 2 < nap_max_ns ? nap_ns * 2 : nap_max_ns;
    }
}

void ct_mpi_library(char *buf, size_t len)
{
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    CT_MPI_CHECK(MPI_Get_library_version(text, &n));
    text[strcspn(text, "\r\n")] = '\0';
    snprintf(buf, len, "%s", text);
}

void ct_mpi_result(const char *verification, ct_json_fields figures, ct_json_fields detail,
                   const void *arg)
{
    if (world_rank() != 0)
        return;
    int size;
    CT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    char library[MPI_MAX_LIBRARY_VERSION_STRING];
    ct_mpi_library(library, sizeof library);
    ct_json j;
    ct_json_start(&j, stdout, "result");
    ct_json_string(&j, "verification", verification);
    if (figures) {
        ct_json_open_object(&j, "figures");
        figures(&j, arg);
        ct_json_close_object(&j);
    }
    ct_json_open_object(&j, "detail");
    ct_json_integer(&j, "ranks", size);
    ct_json_string(&j, "mpi_library", library);
    if (detail)
        detail(&j, arg);
    ct_json_end(&j);
    result_written = 1;
}
