/* ct_phase.h - named per-rank accumulators (phase times, byte counts) and their
 * statistics across ranks, for the JSON samples of MPI kernels.
 *
 * Each rank accumulates: ct_phase_start / ct_phase_stop around the code of a phase
 * (different phases may nest; a phase never nests in itself), ct_phase_add for counters
 * such as bytes sent. After a measurement, ct_phases_reduce gathers every rank's values
 * on one rank, which writes them into its sample: the statistics across ranks (min, max,
 * mean) and, where the reader wants them, the value of every rank. */
#ifndef CT_PHASE_H
#define CT_PHASE_H

#include "ct.h"

#include <mpi.h>

#define CT_PHASE_MAX 16

typedef struct {
    int count;
    const char *const *names;
    double total[CT_PHASE_MAX]; /* seconds, or whatever ct_phase_add counts */
    double since[CT_PHASE_MAX]; /* start of the running interval */
} ct_phases;

/* count (<= CT_PHASE_MAX) accumulators named names[0..count-1], all zero. */
void ct_phases_init(ct_phases *p, int count, const char *const *names);
void ct_phase_start(ct_phases *p, int phase);
void ct_phase_stop(ct_phases *p, int phase); /* adds the time since ct_phase_start */
void ct_phase_add(ct_phases *p, int phase, double amount);

typedef struct {
    double min, max, mean;
} ct_stat;

typedef struct {
    int count, nranks;
    const char *const *names;
    double *per_rank; /* [rank * count + phase], on the root only */
    ct_stat stat[CT_PHASE_MAX];
} ct_phase_summary;

/* Collective over comm: every rank's accumulators, gathered and reduced on root. */
void ct_phases_reduce(const ct_phases *p, MPI_Comm comm, int root, ct_phase_summary *s);
void ct_phase_summary_free(ct_phase_summary *s);

/* On the root, into an open JSON object:
 *   "<key>":{"<name>":{"min":..,"max":..,"mean":..},...}      (ct_phases_json_stats)
 *   "<key>":{"<name>":[rank 0, rank 1, ...],...}               (ct_phases_json_per_rank) */
void ct_phases_json_stats(ct_json *j, const char *key, const ct_phase_summary *s);
void ct_phases_json_per_rank(ct_json *j, const char *key, const ct_phase_summary *s);

#endif
