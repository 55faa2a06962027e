/* npb.c - the shared part of the NPB kernels (see npb.h). */
#include "npb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const npb_classes[] = {"S", "W", "A", "B", "C", NULL};

/* "1-256" or "1, 2, 4, 8" style: runs of three or more consecutive counts as a range */
static int list_counts(char *out, size_t len, int (*allowed)(int, int), int cls, int max_list)
{
    int used = 0, listed = 0;
    for (int n = 1; n <= max_list && used >= 0 && (size_t)used < len; n++) {
        if (!allowed(n, cls))
            continue;
        int end = n;
        while (end < max_list && allowed(end + 1, cls))
            end++;
        const char *sep = listed++ ? ", " : " ";
        if (end - n >= 2)
            used += snprintf(out + used, len - (size_t)used, "%s%d-%d", sep, n, end);
        else
            used += snprintf(out + used, len - (size_t)used, "%s%d", sep, n);
        if (end - n >= 2)
            n = end;
    }
    return listed;
}

const char *npb_check_np(char *line, size_t len, const char *prog, const char *bench, int cls,
                         int np, int (*allowed)(int np, int cls), int max_list, const char *why)
{
    if (allowed(np, cls))
        return NULL;
    char counts[400] = "";
    int listed = list_counts(counts, sizeof counts, allowed, cls, max_list);
    int more = 0;
    for (int n = max_list + 1; n <= 4 * max_list && !more; n++)
        more = allowed(n, cls);
    snprintf(line, len, "%s: --np %d: %s.%s runs on%s%s ranks%s", prog, np, bench,
             npb_classes[cls], listed ? counts : " no rank count", more ? ", ..." : "", why);
    return line;
}

/* What ct_mpi_start checks of a run: the rank count against the benchmark's rule. */
typedef struct {
    const npb_rule *rule;
    const npb_options *o;
} job;

static int check_np(void *opts, int np, const char *prog, char *err, size_t errlen)
{
    const job *j = opts;
    const npb_rule *r = j->rule;
    return npb_check_np(err, errlen, prog, r->bench, j->o->cls, np, r->allowed,
                        r->max_list(j->o->cls), r->why)
               ? -1
               : 0;
}

/* --dt: the time step, a plain positive number (not a duration: it has no unit in NPB's
 * input file, so no suffix such as "1m" and no 0 standing for "the class's"). */
static int positive_step(const ct_opt *opt, const char *text, char *expected, size_t len)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !isfinite(v) || v <= 0.0) {
        snprintf(expected, len, "a positive number (the time step)");
        return -1;
    }
    *(double *)opt->dest = v;
    return 0;
}

int npb_start(int *argc, char ***argv, const npb_rule *rule, npb_options *o, int *np, int *me)
{
    const char *prog = ct_basename((*argv)[0]);
    int help = 0;
    *o = (npb_options){-1, 0, 0.0};
    ct_check_only c = {0, 0};
    ct_opt check[CT_CHECK_ONLY_NOPTS];
    ct_check_only_options(&c, check);
    const ct_opt table[] = {
        {"--class", CT_OPT_CHOICE, .dest = &o->cls, .choices = npb_classes},
        {"--inject-fault", CT_OPT_FLAG, .dest = &o->fault},
        {"--help", CT_OPT_FLAG, .dest = &help},
        {.type = CT_OPT_TABLE, .table = check},
        rule->takes_dt ? (ct_opt){"--dt", CT_OPT_CUSTOM, .dest = &o->dt, .parse = positive_step}
                       : (ct_opt){.type = CT_OPT_END},
        {.type = CT_OPT_END},
    };
    char err[512] = "";
    int bad = ct_opt_parse(table, *argc, *argv, err, sizeof err);
    if (help) { /* the usage names the benchmark's own options: said here, not by ct_mpi_start */
        printf("usage: %s --class S|W|A|B|C%s [--inject-fault] [--check-only --np N]\n", prog,
               rule->takes_dt ? " [--dt STEP]" : "");
        return 0;
    }
    if (!bad && o->cls < 0) {
        snprintf(err, sizeof err, "%s: --class: required (S, W, A, B or C)", prog);
        bad = -1;
    }
    if (!bad)
        bad = ct_check_only_validate(&c, prog, err, sizeof err);
    job j = {rule, o};
    ct_mpi_start_args start = {.parse_failed = bad != 0, .check_only = &c, .check = check_np,
                               .opts = &j, .err = err, .errlen = sizeof err};
    return ct_mpi_start(&start, argc, argv, me, np);
}

void npb_comm_init(ct_phases *c)
{
    static const char *const names[NPB_COMM_COUNT] = {"comm_s", "messages", "bytes"};
    ct_phases_init(c, NPB_COMM_COUNT, names);
}

void npb_add_check(npb_result *r, const char *name, double value, double reference, int exact)
{
    if (r->nchecks < NPB_MAX_CHECKS)
        r->checks[r->nchecks++] = (npb_check){name, value, reference, exact};
}

/* NPB's check of the time step: the run's dt within NPB_TOLERANCE of the class's */
static int dt_ok(const npb_result *r)
{
    return r->dt_reference <= 0.0 || fabs(r->dt - r->dt_reference) <= NPB_TOLERANCE;
}

static double rel_error(const npb_check *c)
{
    return fabs(c->value - c->reference) / fabs(c->reference);
}

static int check_passes(const npb_check *c)
{
    double e = rel_error(c);
    /* NaN fails: the comparison is false */
    return c->exact ? c->value == c->reference : e <= NPB_TOLERANCE;
}

typedef struct {
    const npb_result *r;
    int np, verified;
    double time_max, mops, messages, bytes;
    const double *comp, *comm; /* per rank */
} report;

static void per_rank(ct_json *j, const char *key, const double *v, int n)
{
    ct_json_open_array(j, key);
    for (int i = 0; i < n; i++)
        ct_json_number(j, NULL, v[i]);
    ct_json_close_array(j);
}

static double max_of(const double *v, int n)
{
    double m = 0.0;
    for (int i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static void figures(ct_json *j, const void *arg)
{
    const report *p = arg;
    const npb_result *r = p->r;
    char name[32];
    snprintf(name, sizeof name, "%s.%s.%d", r->benchmark, npb_classes[r->cls], p->np);
    ct_json_string(j, "benchmark", r->benchmark);
    ct_json_string(j, "class", npb_classes[r->cls]);
    ct_json_integer(j, "np", p->np);
    ct_json_string(j, "name", name);
    ct_json_open_array(j, "size");
    for (int i = 0; i < r->nsize; i++)
        ct_json_integer(j, NULL, r->size[i]);
    ct_json_close_array(j);
    ct_json_integer(j, "iterations", r->iterations);
    ct_json_number(j, "time_s", p->time_max);
    ct_json_number(j, "mops_total", p->mops);
    ct_json_number(j, "mops_per_process", p->mops / p->np);
    ct_json_string(j, "op_type", r->op_type);
    ct_json_bool(j, "verified", p->verified);
    if (r->dt_reference > 0.0) {
        ct_json_number(j, "dt", r->dt);
        ct_json_number(j, "dt_reference", r->dt_reference);
        ct_json_bool(j, "dt_ok", dt_ok(r));
    }
    ct_json_number(j, "tolerance", NPB_TOLERANCE);
    ct_json_open_array(j, "compared");
    for (int i = 0; i < r->nchecks; i++) {
        const npb_check *c = &r->checks[i];
        ct_json_open_object(j, NULL);
        ct_json_string(j, "name", c->name);
        ct_json_number(j, "value", c->value);
        ct_json_number(j, "reference", c->reference);
        ct_json_number(j, "rel_error", rel_error(c));
        ct_json_bool(j, "passed", check_passes(c));
        ct_json_close_object(j);
    }
    ct_json_close_array(j);
    ct_json_number(j, "comp_time_s", max_of(p->comp, p->np));
    ct_json_number(j, "comm_time_s", max_of(p->comm, p->np));
    per_rank(j, "comp_time_s_per_rank", p->comp, p->np);
    per_rank(j, "comm_time_s_per_rank", p->comm, p->np);
    ct_json_number(j, "messages_per_iteration", p->messages);
    ct_json_number(j, "bytes_per_iteration", p->bytes);
    if (r->extra)
        r->extra(j, r->extra_arg);
}

static void detail(ct_json *j, const void *arg)
{
    const report *p = arg;
    if (p->r->detail)
        p->r->detail(j, p->r->detail_arg);
}

int npb_report(npb_result *r)
{
    int np, me;
    CT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &np));
    CT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    const double *comm = r->comm.total;
    double mine[4] = {r->time_s - comm[NPB_COMM_S], comm[NPB_COMM_S], comm[NPB_MESSAGES],
                      comm[NPB_BYTES]};
    double *all = me == 0 ? ct_mpi_alloc(sizeof(double) * 4 * (size_t)np, "per-rank times")
                          : NULL;
    CT_MPI_CHECK(MPI_Gather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    double tmax;
    CT_MPI_CHECK(MPI_Allreduce(&r->time_s, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    int verified = r->nchecks > 0 && dt_ok(r);
    for (int i = 0; i < r->nchecks; i++)
        verified &= check_passes(&r->checks[i]);
    CT_MPI_CHECK(MPI_Bcast(&verified, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (me == 0) {
        double *comp = ct_mpi_alloc(sizeof(double) * (size_t)np, "per-rank times");
        double *comm = ct_mpi_alloc(sizeof(double) * (size_t)np, "per-rank times");
        double messages = 0.0, bytes = 0.0;
        for (int i = 0; i < np; i++) {
            comp[i] = all[4 * i];
            comm[i] = all[4 * i + 1];
            messages += all[4 * i + 2];
            bytes += all[4 * i + 3];
        }
        double iters = r->per_iteration > 0 ? r->per_iteration : 1.0;
        double mops = r->ops > 0 && tmax > 0 ? r->ops / tmax / 1e6 : r->mops_total;
        report p = {r, np, verified, tmax, mops, messages / iters, bytes / iters, comp, comm};
        ct_mpi_result(verified ? "passed" : "failed", figures, detail, &p);
        free(comp);
        free(comm);
        free(all);
    }
    return verified;
}
