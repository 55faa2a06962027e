/* npb.h - what the NPB kernels (ct-npb-ep, ct-npb-lu, ct-npb-bt) share: the class
 * option, the --check-only line, communication accounting, NPB's relative-error checks
 * and the one result line of the contract in docs/npb.md.
 *
 * The benchmarks follow the NAS Parallel Benchmarks 3.4 specification (NAS technical
 * reports RNR-94-007, NAS-95-020, NAS-02-007): same problems, same verification values,
 * same operation counts; the code is our own.
 */
#ifndef NPB_H
#define NPB_H

#include "ct_mpi.h"
#include "ct_opt.h"
#include "ct_phase.h"

#define NPB_TOLERANCE 1e-8 /* NPB's relative tolerance of every checked value */
#define NPB_MAX_CHECKS 32

/* The classes the kernels accept, in the order of CT_OPT_CHOICE indices. */
extern const char *const npb_classes[];  /* "S", "W", "A", "B", "C", NULL */
enum { NPB_S, NPB_W, NPB_A, NPB_B, NPB_C, NPB_NCLASSES };

/* The "--check-only" answer: problem is NULL when np is allowed; otherwise writes
 * "<prog>: --np N: <BENCH>.<class> runs on <list> ranks<why>" into line. allowed(np, cls)
 * says whether a count runs; the list shows the allowed counts up to max_list. */
const char *npb_check_np(char *line, size_t len, const char *prog, const char *bench, int cls,
                         int np, int (*allowed)(int np, int cls), int max_list, const char *why);

/* The options every NPB kernel takes (docs/npb.md): --class, --inject-fault, --help,
 * --check-only --np N; LU and BT also --dt, the time step (NPB's input file sets it). */
typedef struct {
    int cls, fault;
    double dt; /* --dt; 0: the class's */
} npb_options;
typedef int (*npb_allowed)(int np, int cls);
typedef struct {
    const char *bench;     /* "EP" */
    npb_allowed allowed;   /* whether a class runs on np ranks */
    int (*max_list)(int cls); /* the allowed counts listed in the error line go up to this */
    const char *why;       /* the rule, in words, after the list */
    int takes_dt;          /* LU, BT: --dt is an option */
} npb_rule;

/* A kernel's start: parses argv before MPI (--help: exit status 0), then ct_mpi_start
 * with the rule as its check of the rank count (--check-only: 0 or 2 with the one line; a
 * run: bad input or a count the rule refuses is one error line, exit status 2). Returns
 * CT_MPI_RUN (-1) when the run goes ahead, with this rank and the rank count in me and
 * np; else the exit status. */
int npb_start(int *argc, char ***argv, const npb_rule *rule, npb_options *o, int *np, int *me);

/* Communication accounting of one rank, in ct_phase accumulators (ct_phase.h): the time
 * inside MPI calls of the timed section (ct_phase_start / ct_phase_stop of NPB_COMM_S),
 * the messages sent and their payload bytes (npb_comm_sent). */
enum { NPB_COMM_S, NPB_MESSAGES, NPB_BYTES, NPB_COMM_COUNT };
void npb_comm_init(ct_phases *c); /* all zero */
static inline void npb_comm_sent(ct_phases *c, double bytes)
{
    ct_phase_add(c, NPB_MESSAGES, 1.0);
    ct_phase_add(c, NPB_BYTES, bytes);
}

/* One compared value. exact: a count (rel_error is still |v - ref| / |ref|, but the
 * check wants 0). */
typedef struct {
    const char *name;
    double value, reference;
    int exact;
} npb_check;

/* What a kernel hands to npb_report (every rank; only rank 0's checks matter). */
typedef struct {
    const char *benchmark; /* "EP", "LU", "BT" */
    int cls;               /* NPB_S .. */
    long long size[3]; /* EP: [numbers]; LU, BT: [nx, ny, nz] */
    int nsize;
    int iterations;
    double time_s;     /* this rank's timed section */
    double mops_total; /* filled by npb_report from ops / max time when ops > 0 */
    double ops;        /* NPB's nominal operation count of the run */
    const char *op_type;
    npb_check checks[NPB_MAX_CHECKS];
    int nchecks;
    /* LU/BT: the dt the run used and the class's; NPB's verification fails a run whose
     * dt differs (its class 'U'). EP: both 0, no dt check. */
    double dt, dt_reference;
    ct_phases comm; /* npb_comm_init */
    double per_iteration; /* iterations the message counts are divided by (EP: 1) */
    ct_json_fields extra; /* more figures (may be NULL), called with extra_arg */
    const void *extra_arg;
    ct_json_fields detail;
    const void *detail_arg;
} npb_result;

void npb_add_check(npb_result *r, const char *name, double value, double reference, int exact);

/* Collective over MPI_COMM_WORLD: the max time, every rank's computation and
 * communication times, the messages summed over ranks; rank 0 writes the result line.
 * Returns 1 when verified (on every rank). */
int npb_report(npb_result *r);

#endif
