/* ct_mpi.h - what every MPI kernel shares: start-up, checked MPI calls, checked
 * allocation, a waiting loop that yields the core, the result line, and the tag ranges.
 *
 * Failures are never silent: MPI_COMM_WORLD (and every communicator derived from it)
 * returns errors instead of aborting inside the library, CT_MPI_CHECK turns a failed
 * call into a message naming the call, file:line, rank and MPI's error string, plus a
 * JSON error line (ct.h), and then aborts every rank, so no result line can follow.
 * Built into the ct_mpi library (ct_mpi.cmake), only where MPI is available.
 */
#ifndef CT_MPI_H
#define CT_MPI_H

#include "ct.h"
#include "ct_opt.h"

#include <mpi.h>
#include <stddef.h>

/* Tags, one range per kernel and purpose, so that messages of different purposes can
 * never match each other's receives. Every range ends below 32767, the smallest
 * MPI_TAG_UB the standard allows. */
enum ct_mpi_tag {
    /* ct-mpi-pingpong: the driver's command, the payload, the partner's status */
    CT_TAG_PINGPONG_CMD = 1,
    CT_TAG_PINGPONG_DATA = 2,
    CT_TAG_PINGPONG_STATUS = 3,
    /* ct-linpack row swaps (lp_update.c): displaced rows, binary exchange (fold-in,
     * exchange, fold-out), long (gather of U, spread-roll broadcast of U) */
    CT_TAG_LP_SWAP_DISPLACED = 100,
    CT_TAG_LP_SWAP_FOLD_IN = 101,
    CT_TAG_LP_SWAP_EXCHANGE = 102,
    CT_TAG_LP_SWAP_FOLD_OUT = 103,
    CT_TAG_LP_SWAP_GATHER = 104,
    CT_TAG_LP_SWAP_BCAST = 105,
    /* ct-linpack panel broadcasts: panel k uses CT_TAG_LP_PANEL + k % CT_TAG_LP_PANELS
     * (at most depth + 2 panels are in flight, so tags never repeat among them) */
    CT_TAG_LP_PANEL = 1000,
    CT_TAG_LP_PANELS = 20000,
    /* ct-qcd halo messages (qcd_halo.c): CT_TAG_QCD_HALO + the index of the ghost region,
     * one of the 3^4 offsets in {-1, 0, 1}^4 */
    CT_TAG_QCD_HALO = CT_TAG_LP_PANEL + CT_TAG_LP_PANELS,
    CT_TAG_QCD_HALO_END = CT_TAG_QCD_HALO + 81,
    /* ct-npb-lu: a plane's edge to the next rank of the pipelined sweeps, one tag per
     * direction (lu_ssor.c); the right-hand side's halo, + the side it arrives at, 0..3
     * (lu_rhs.c) */
    CT_TAG_NPB_LU_SOUTH = CT_TAG_QCD_HALO_END,
    CT_TAG_NPB_LU_EAST,
    CT_TAG_NPB_LU_NORTH,
    CT_TAG_NPB_LU_WEST,
    CT_TAG_NPB_LU_HALO,
    /* ct-npb-bt: a face of the right-hand side, + 2 * direction + side (bt_rhs.c); the
     * line solves' forward and back substitutions, + direction 0..2 (bt_solve.c) */
    CT_TAG_NPB_BT_FACE = CT_TAG_NPB_LU_HALO + 4,
    CT_TAG_NPB_BT_FWD = CT_TAG_NPB_BT_FACE + 6,
    CT_TAG_NPB_BT_BACK = CT_TAG_NPB_BT_FWD + 3,
    CT_TAG_END = CT_TAG_NPB_BT_BACK + 3 /* first tag not in use */
};
_Static_assert(CT_TAG_END <= 32767, "tags must stay below the smallest MPI_TAG_UB");

/* MPI_Init, and MPI_ERRORS_RETURN on MPI_COMM_WORLD; remembers the kernel's name for
 * messages, and this rank's wall clock and CPU time for its rank line. */
void ct_mpi_init(int *argc, char ***argv);

/* Collective, before MPI_Finalize (when ct_mpi_init started the clocks): rank 0 writes,
 * after its result line (none for a run refused for its input), one line per rank,
 *   {"type":"rank","rank":R,"host":"...","wall_s":W,"cpu_s":C,"user_s":U,"system_s":S,
 *    "wait_s":T}
 * its wall and CPU time (user + system, every thread) since ct_mpi_init, and the wall time
 * T it spent in ct_mpi_waitall (which naps). CPU well below wall - T is a rank that shared
 * its core; above, extra threads.
 * The macro sends every kernel's MPI_Finalize through it, so none can leave without its
 * line; (MPI_Finalize)() is the library's own. */
int ct_mpi_finalize(void);
#define MPI_Finalize() ct_mpi_finalize()

/* The start every MPI program's main shares, once its options are parsed (before MPI, so
 * that --help and --check-only never start it):
 *   --help: usage() is printed; returns 0.
 *   --check-only --np N (check_only NULL: the program takes none): a parse error, else
 *     check(opts, N), else check_skips(opts, N), else a bad CT_MPI_WAIT_* variable
 *     (ct_mpi_waitall) is the one line on stderr; returns 0 or CT_EXIT_USAGE.
 *   Otherwise MPI starts (ct_mpi_init), *rank and *size are set; with shared, rank 0's
 *     parse (its error, else opts: shared bytes, broadcast as they are) is every rank's, so
 *     that the files the options name need be readable on rank 0's host only. check(opts,
 *     size) runs on every rank; a parse error or a failed check is said by the lowest rank
 *     that has one (ct_report_error), MPI is finalised and CT_EXIT_USAGE returned.
 *     CT_MPI_RUN when the run goes ahead.
 * A check returns 0, or -1 with its one line in err; check may complete opts for the job's
 * size (a default grid). check and check_skips may be NULL (nothing to check). Whatever
 * ct_mpi_start returns, main returns unless it is CT_MPI_RUN. */
#define CT_MPI_RUN (-1)
typedef int (*ct_mpi_check_fn)(void *opts, int np, const char *prog, char *err, size_t errlen);
typedef struct {
    int parse_failed; /* the parser's message is in err */
    int help;
    void (*usage)(void);
    const ct_check_only *check_only;
    ct_mpi_check_fn check;
    void *opts;
    char *err;
    size_t errlen;
    /* --check-only only: what a run skips rather than refuses (Linpack's grids larger than
     * the job), which the launcher wants to hear of before it starts one */
    ct_mpi_check_fn check_skips;
    size_t shared; /* 0, or sizeof *opts when rank 0's parse counts (opts holds no pointer) */
} ct_mpi_start_args;
int ct_mpi_start(const ct_mpi_start_args *a, int *argc, char ***argv, int *rank, int *size);

/* Wraps every MPI call that returns an error code. */
#define CT_MPI_CHECK(call) ct_mpi_check((call), #call, __FILE__, __LINE__)
void ct_mpi_check(int rc, const char *call, const char *file, int line);

/* "<kernel>: rank R: <message>" on stderr and as a JSON error line, then MPI_Abort of
 * every rank. For faults only this rank sees. */
_Noreturn void ct_mpi_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* malloc that does not return on failure: ct_mpi_fail names what and how many bytes. */
void *ct_mpi_alloc(size_t bytes, const char *what);

/* Buffers allocated at a point every rank of a communicator reaches are checked together:
 * ct_mpi_try_alloc notes this rank's first failure instead of stopping, ct_mpi_agree then
 * stops every rank if any failed. */
typedef struct {
    const char *what; /* NULL: no allocation failed */
    double bytes;
} ct_alloc_failure;

/* 64-byte aligned (BLAS likes it), not zeroed; NULL after noting the failure in f. */
void *ct_mpi_try_alloc(ct_alloc_failure *f, size_t bytes, const char *what);

/* Collective over comm. If any rank noted a failure, every rank of comm reports it on
 * stderr (the first failing rank with what and how many bytes, also as the JSON error
 * line; the others naming that rank) and the job aborts. */
void ct_mpi_agree(MPI_Comm comm, const ct_alloc_failure *f);

/* Waits for n requests (any may be MPI_REQUEST_NULL): polls for a bounded time, then polls
 * with growing naps in between, so that a long wait leaves the core to other work. Where
 * this host's ranks are bound to cores of their own (ct_mpi_init finds out) it polls without pause for up
 * to 5 ms: the sender is running or gets its core back within a scheduler slice, and a
 * yield or nap would hand this core to a busy neighbour at every short wait. Where ranks
 * may share a core (unbound, or more ranks than cores) it yields between polls for 50 us, since the sender may need this
 * core. progress (may be NULL) runs between polls. CT_MPI_WAIT_SPIN_US (-1: poll and yield
 * for ever) and CT_MPI_WAIT_NAP_US override the bounds: integers up to 10 s, checked at the
 * start (ct_mpi_init, and --check-only in ct_mpi_start): a bad value is bad input. */
void ct_mpi_waitall(int n, MPI_Request *reqs, void (*progress)(void));

/* First line of MPI_Get_library_version(). */
void ct_mpi_library(char *buf, size_t len);

/* Rank 0's result line, the same shape for every MPI kernel:
 *   {"type":"result","verification":V,"figures":{<figures>},
 *    "detail":{"ranks":<size of MPI_COMM_WORLD>,"mpi_library":"...",<detail>}}
 * figures may be NULL (then no figures object). Does nothing on other ranks. */
typedef void (*ct_json_fields)(ct_json *j, const void *arg);
void ct_mpi_result(const char *verification, ct_json_fields figures, ct_json_fields detail,
                   const void *arg);

#endif
