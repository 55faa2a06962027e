/* ct-npb-bt - NPB BT: block-tridiagonal ADI solver of the 3-D Navier-Stokes equations,
 * multipartition over a square number of ranks (bt.h). Verified as NPB verifies it:
 * the five residual RMS norms (divided by dt) and the five solution-error RMS norms
 * after niter steps, each within 1e-8 relative of NPB 3.4's reference values.
 *
 *   ct-npb-bt --class S|W|A|B|C [--inject-fault]
 *   ct-npb-bt --class X --check-only --np N     (no MPI: can the class run on N ranks?)
 *
 * Like NPB, one untimed step first (touches every page and code path), then the field is
 * initialised again and niter steps are timed. Mop/s from NPB's BT operation count:
 * niter (3478.8 n^3 - 17655.7 navg^2 + 28023.7 navg) 1e-6 / time.
 * Per rank the timed section is split into communication (time inside MPI calls) and
 * computation (the rest); messages and bytes are counted over one step.
 * --inject-fault (tests): rank 0 changes one value of u by 1 % after the first timed
 * step, so the norms miss their references and verification fails. */
#define _POSIX_C_SOURCE 200809L
#include "bt.h"
#include "ct_opt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BT_TOLERANCE 1e-8

static const char *const class_names[] = {"S", "W", "A", "B", "C", NULL};

typedef struct {
    int cls, inject_fault, help;
    ct_check_only check;
} options;

static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen)
{
    *o = (options){.cls = 0};
    int seen = 0;
    ct_opt check[CT_CHECK_ONLY_NOPTS];
    ct_check_only_options(&o->check, check);
    const ct_opt table[] = {
        {"--class", CT_OPT_CHOICE, .dest = &o->cls, .choices = class_names, .seen = &seen},
        {"--inject-fault", CT_OPT_FLAG, .dest = &o->inject_fault},
        {"--help", CT_OPT_FLAG, .dest = &o->help},
        {NULL, CT_OPT_TABLE, .table = check},
        {.type = CT_OPT_END},
    };
    if (ct_opt_parse(table, argc, argv, err, errlen))
        return -1;
    if (!seen && !o->help) {
        snprintf(err, errlen, "%s: --class: expected one of S, W, A, B, C, got nothing",
                 ct_basename(argv[0]));
        return -1;
    }
    return ct_check_only_validate(&o->check, ct_basename(argv[0]), err, errlen);
}

static void adi(bt_state *s)
{
    bt_compute_rhs(s);
    for (int d = 0; d < 3; d++)
        bt_solve(s, d);
    bt_add(s);
}

typedef struct {
    const bt_class *cls;
    int np, q, verified;
    double time_s, mops, xcr[BT_NVAR], xce[BT_NVAR];
    double messages, bytes;
    ct_phase_summary ph;
} outcome;

static void compared(ct_json *j, const char *prefix, const double *v, const double *ref)
{
    for (int m = 0; m < BT_NVAR; m++) {
        char name[16];
        snprintf(name, sizeof name, "%s%d", prefix, m + 1);
        ct_json_open_object(j, NULL);
        ct_json_string(j, "name", name);
        ct_json_number(j, "value", v[m]);
        ct_json_number(j, "reference", ref[m]);
        ct_json_number(j, "rel_error", fabs(v[m] - ref[m]) / fabs(ref[m]));
        ct_json_close_object(j);
    }
}

static void per_rank(ct_json *j, const char *key, const ct_phase_summary *s, int phase)
{
    ct_json_open_array(j, key);
    for (int r = 0; r < s->nranks; r++)
        ct_json_number(j, NULL, s->per_rank[(size_t)r * s->count + phase]);
    ct_json_close_array(j);
}

static void figures(ct_json *j, const void *arg)
{
    const outcome *o = arg;
    char name[32];
    snprintf(name, sizeof name, "BT.%c.%d", o->cls->name, o->np);
    ct_json_string(j, "benchmark", "BT");
    ct_json_string(j, "class", (char[]){o->cls->name, 0});
    ct_json_integer(j, "np", o->np);
    ct_json_string(j, "name", name);
    ct_json_open_array(j, "size");
    for (int d = 0; d < 3; d++)
        ct_json_integer(j, NULL, o->cls->n);
    ct_json_close_array(j);
    ct_json_integer(j, "iterations", o->cls->niter);
    ct_json_number(j, "dt", o->cls->dt);
    ct_json_number(j, "time_s", o->time_s);
    ct_json_number(j, "mops_total", o->mops);
    ct_json_number(j, "mops_per_process", o->mops / o->np);
    ct_json_string(j, "op_type", "floating point");
    ct_json_bool(j, "verified", o->verified);
    ct_json_open_array(j, "compared");
    compared(j, "xcr", o->xcr, o->cls->xcr);
    compared(j, "xce", o->xce, o->cls->xce);
    ct_json_close_array(j);
    ct_json_number(j, "tolerance", BT_TOLERANCE);
    ct_json_number(j, "comp_time_s", o->ph.stat[BT_PH_COMP].max);
    ct_json_number(j, "comm_time_s", o->ph.stat[BT_PH_COMM].max);
    per_rank(j, "comp_time_s_per_rank", &o->ph, BT_PH_COMP);
    per_rank(j, "comm_time_s_per_rank", &o->ph, BT_PH_COMM);
    ct_json_number(j, "messages_per_iteration", o->messages);
    ct_json_number(j, "bytes_per_iteration", o->bytes);
    ct_json_integer(j, "cells_per_rank", o->q);
}

static void usage(void)
{
    printf("usage: ct-npb-bt --class S|W|A|B|C [--inject-fault] [--check-only --np N]\n");
}

int main(int argc, char **argv)
{
    const char *prog = ct_basename(argv[0]);
    options o;
    char err[1024];
    int bad = parse_options(argc, argv, &o, err, sizeof err) != 0;
    if (o.help && !bad) {
        usage();
        return 0;
    }
    const bt_class *cls = bad ? NULL : bt_class_of(class_names[o.cls][0]);
    char why[512];
    if (o.check.on && !bad) {
        if (bt_np_allowed(cls, o.check.np, why, sizeof why))
            return ct_check_only_exit(NULL);
        snprintf(err, sizeof err, "%s: %s", prog, why);
        return ct_check_only_exit(err);
    }
    if (bad && o.check.on)
        return ct_check_only_exit(err);

    ct_mpi_init(&argc, &argv);
    int rank, size;
    CT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (!bad && !bt_np_allowed(cls, size, why, sizeof why)) {
        snprintf(err, sizeof err, "%s: %s", prog, why);
        bad = 1;
    }
    if (bad) {
        if (rank == 0)
            ct_report_error("%s", err);
        CT_MPI_CHECK(MPI_Finalize());
        return CT_EXIT_USAGE;
    }
    MPI_Comm comm;
    CT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    static const char *const phase_names[BT_NPHASE] = {"comp", "comm"};

    bt_state s;
    bt_setup(&s, cls, comm);
    ct_phases_init(&s.ph, BT_NPHASE, phase_names);
    bt_forcing(&s);
    bt_initialize(&s);
    /* one untimed step, as NPB does, then start again from the initial field */
    adi(&s);
    bt_initialize(&s);

    ct_phases_init(&s.ph, BT_NPHASE, phase_names);
    CT_MPI_CHECK(MPI_Barrier(comm));
    double t0 = MPI_Wtime();
    for (int it = 1; it <= cls->niter; it++) {
        s.counting = it == 1;
        adi(&s);
        if (it == 1 && o.inject_fault && rank == 0) {
            bt_cell *c = &s.cells[0];
            double *u = c->u + BT_NVAR * bt_uidx(c, c->size[0] / 2, c->size[1] / 2, c->size[2] / 2);
            u[0] *= 1.01;
        }
    }
    double elapsed = MPI_Wtime() - t0;
    s.counting = 0;
    ct_phase_add(&s.ph, BT_PH_COMP, elapsed - s.ph.total[BT_PH_COMM]);

    outcome out = {.cls = cls, .np = size, .q = s.q};
    CT_MPI_CHECK(MPI_Allreduce(&elapsed, &out.time_s, 1, MPI_DOUBLE, MPI_MAX, comm));
    double counts[2] = {(double)s.messages, (double)s.bytes}, total[2];
    CT_MPI_CHECK(MPI_Allreduce(counts, total, 2, MPI_DOUBLE, MPI_SUM, comm));
    out.messages = total[0];
    out.bytes = total[1];
    ct_phases_reduce(&s.ph, comm, 0, &out.ph);

    bt_error_norm(&s, out.xce);
    bt_compute_rhs(&s);
    bt_rhs_norm(&s, out.xcr);
    out.verified = 1;
    for (int m = 0; m < BT_NVAR; m++) {
        out.xcr[m] /= cls->dt;
        if (!(fabs(out.xcr[m] - cls->xcr[m]) <= BT_TOLERANCE * fabs(cls->xcr[m])))
            out.verified = 0;
        if (!(fabs(out.xce[m] - cls->xce[m]) <= BT_TOLERANCE * fabs(cls->xce[m])))
            out.verified = 0;
    }
    double n3 = (double)s.n[0] * s.n[1] * s.n[2], navg = (s.n[0] + s.n[1] + s.n[2]) / 3.0;
    out.mops = out.time_s > 0 ? 1e-6 * cls->niter *
                                    (3478.8 * n3 - 17655.7 * navg * navg + 28023.7 * navg) /
                                    out.time_s
                              : 0.0;
    ct_mpi_result(out.verified ? "passed" : "failed", figures, NULL, &out);
    ct_phase_summary_free(&out.ph);
    bt_free(&s);
    CT_MPI_CHECK(MPI_Comm_free(&comm));
    CT_MPI_CHECK(MPI_Finalize());
    return out.verified ? 0 : 1;
}
