/* ct_sweep.h - the message-size sweep shared by the ping-pong kernels (TCP, MPI, PVM).
 *
 * One timing method for every transport, so that "MPI over TCP" compares like with like:
 *   - sizes: a log scale from min to max with `points_per_octave` base points per doubling,
 *     plus NetPIPE-style perturbations (base-P, base, base+P) so throughput dips that sit
 *     between powers of two are not missed;
 *   - repeats: adapted per point from the previous point's time, so each timed trial lasts
 *     about point_time/trials; when one repetition alone is longer than that, the point
 *     falls back to `min_trials` trials of one repetition; a trial that overruns its
 *     target 4-fold re-sizes the trials after it;
 *   - statistics: min / median / max over the trials of the per-message time.
 * The transport supplies one function that runs R repetitions of one size and returns the
 * elapsed wall time; the sweep never sees sockets or communicators.
 */
#ifndef CT_SWEEP_H
#define CT_SWEEP_H

#include "ct.h"
#include "ct_opt.h"

#include <stddef.h>
#include <stdint.h>

#define CT_SWEEP_MAX_TRIALS 64

typedef struct {
    uint64_t min_size;     /* smallest message (bytes); 0 allowed where the transport can */
    uint64_t max_size;     /* largest message (bytes), always measured */
    uint64_t perturbation; /* +-bytes around each base point; 0 disables */
    int points_per_octave; /* base points per doubling of the size */
    int trials;            /* timed trials per point when repetitions are short */
    int min_trials;        /* never fewer, even when one repetition is long */
    double point_time;     /* target wall time of one point's timed trials (s) */
    int max_size_given;    /* --max-size was on the command line */
    int inject_fault;      /* tests: corrupt one received message (ct_pattern_corrupt_once) */
    int help;              /* --help */
} ct_sweep_opts;

/* The defaults documented in every kernel's --help. */
void ct_sweep_defaults(ct_sweep_opts *o);

/* Checks what the option table cannot: the sizes against the transport's limit and each
 * other. On error writes "<prog>: <flag>: <why>" into err and returns -1. */
int ct_sweep_validate(const ct_sweep_opts *o, uint64_t limit, const char *prog, char *err,
                      size_t errlen);

/* Ascending, duplicate-free size schedule; *sizes is malloc'ed. Returns the count. */
size_t ct_sweep_sizes(const ct_sweep_opts *o, uint64_t **sizes);

/* Runs `repeats` repetitions of a `size`-byte exchange and stores the elapsed time (s).
 * `seed` changes per point so a stale buffer from an earlier point fails verification.
 * Returns 0, or -1 after a transport fault (the transport has reported it). */
typedef int (*ct_sweep_trial_fn)(void *ctx, uint64_t size, long repeats, uint32_t seed,
                                 double *elapsed);

typedef struct {
    ct_sweep_trial_fn trial;
    void *ctx;
    /* Messages one repetition counts for: 2 for a ping-pong (so t is the half round trip),
     * 1 for one-way streaming and for bidirectional exchange. */
    int messages_per_repeat;
} ct_sweep_transport;

typedef struct {
    uint64_t size;
    long repeats; /* repetitions per trial (the fewest, if a slow-down re-sized some) */
    int trials;
    double t_min, t_med, t_max; /* per-message time over the trials (s) */
} ct_sweep_point;

/* Measures one point. *est_per_rep is the caller's running estimate of one repetition's
 * time at `est_size` bytes (<= 0: unknown, calibrate first); both are updated. */
int ct_sweep_measure(const ct_sweep_opts *o, const ct_sweep_transport *t, uint64_t size,
                     uint32_t seed, double *est_per_rep, uint64_t *est_size,
                     ct_sweep_point *out);

/* Measures every size of the schedule in order, calling emit() after each point so the
 * caller can write it at once. Returns 0, or -1 at the first transport fault (points
 * already emitted stay emitted). */
int ct_sweep_run(const ct_sweep_opts *o, const ct_sweep_transport *t,
                 void (*emit)(void *arg, const ct_sweep_point *p), void *arg);

/* Writes the point's fields into an open JSON object (a sample line). */
void ct_sweep_json_point(ct_json *j, const ct_sweep_point *p);

/* An emit() for ct_sweep_run: each point as its own sample line on stdout, at once. */
void ct_sweep_emit_sample(void *unused, const ct_sweep_point *p);

/* Payload pattern: depends on the byte offset and the seed, and is not periodic in 256,
 * so shifted, stale or truncated data are caught. */
void ct_pattern_fill(unsigned char *buf, uint64_t size, uint32_t seed);
int ct_pattern_check(const unsigned char *buf, uint64_t size, uint32_t seed); /* 1 = ok */

/* --inject-fault of the ping-pong kernels (tests only): while *armed, flip one bit of a
 * received message of size > 0, as a faulty NIC would, and disarm. Called after the timed
 * loop, so the measurement stays as it is. */
void ct_pattern_corrupt_once(unsigned char *buf, uint64_t size, int *armed);

/* The options every ping-pong kernel has (--min-size, --max-size, --perturbation,
 * --points-per-octave, --trials, --point-time, --inject-fault, --help) as a table writing
 * into o, for the kernel's table to include with CT_OPT_TABLE; o must hold the defaults
 * first. */
#define CT_SWEEP_NOPTS 9 /* entries, the end marker included */
void ct_sweep_options(ct_sweep_opts *o, ct_opt table[CT_SWEEP_NOPTS]);
extern const char ct_sweep_usage[];

#endif
