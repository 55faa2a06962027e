/* ct_phase.c - per-rank accumulators and their statistics across ranks (see ct_phase.h). */
#include "ct_phase.h"
#include "ct_mpi.h"

#include <stdlib.h>
#include <string.h>

void ct_phases_init(ct_phases *p, int count, const char *const *names)
{
    memset(p, 0, sizeof *p);
    p->count = count;
    p->names = names;
}

void ct_phase_start(ct_phases *p, int phase) { p->since[phase] = ct_now(); }

void ct_phase_stop(ct_phases *p, int phase) { p->total[phase] += ct_now() - p->since[phase]; }

void ct_phase_add(ct_phases *p, int phase, double amount) { p->total[phase] += amount; }

void ct_phases_reduce(const ct_phases *p, MPI_Comm comm, int root, ct_phase_summary *s)
{
    int rank, size;
    CT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    CT_MPI_CHECK(MPI_Comm_size(comm, &size));
    memset(s, 0, sizeof *s);
    s->count = p->count;
    s->nranks = size;
    s->names = p->names;
    if (rank == root)
        s->per_rank = ct_mpi_alloc((size_t)size * (size_t)p->count * sizeof(double),
                                   "the per-rank phase table");
    MPI_Request rq;
    CT_MPI_CHECK(MPI_Igather(p->total, p->count, MPI_DOUBLE, s->per_rank, p->count,
                             MPI_DOUBLE, root, comm, &rq));
    ct_mpi_waitall(1, &rq, NULL);
    if (rank != root)
        return;
    for (int ph = 0; ph < p->count; ph++) {
        ct_stat *st = &s->stat[ph];
        st->min = st->max = s->per_rank[ph];
        double sum = 0.0;
        for (int r = 0; r < size; r++) {
            double v = s->per_rank[(size_t)r * p->count + ph];
            st->min = v < st->min ? v : st->min;
            st->max = v > st->max ? v : st->max;
            sum += v;
        }
        st->mean = sum / size;
    }
}

void ct_phase_summary_free(ct_phase_summary *s)
{
    free(s->per_rank);
    s->per_rank = NULL;
}

void ct_phases_json_stats(ct_json *j, const char *key, const ct_phase_summary *s)
{
    ct_json_open_object(j, key);
    for (int ph = 0; ph < s->count; ph++) {
        ct_json_open_object(j, s->names[ph]);
        ct_json_number(j, "min", s->stat[ph].min);
        ct_json_number(j, "max", s->stat[ph].max);
        ct_json_number(j, "mean", s->stat[ph].mean);
        ct_json_close_object(j);
    }
    ct_json_close_object(j);
}

void ct_phases_json_per_rank(ct_json *j, const char *key, const ct_phase_summary *s)
{
    ct_json_open_object(j, key);
    for (int ph = 0; ph < s->count; ph++) {
        ct_json_open_array(j, s->names[ph]);
        for (int r = 0; r < s->nranks; r++)
            ct_json_number(j, NULL, s->per_rank[(size_t)r * s->count + ph]);
        ct_json_close_array(j);
    }
    ct_json_close_object(j);
}
