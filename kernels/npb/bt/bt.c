/* ct-npb-bt - NPB BT: block-tridiagonal ADI solver of the 3-D Navier-Stokes equations,
 * multipartition over a square number of ranks (bt.h). Verified as NPB verifies it:
 * the five residual RMS norms (divided by dt) and the five solution-error RMS norms
 * after niter steps, each within 1e-8 relative of NPB 3.4's reference values.
 *
 *   ct-npb-bt --class S|W|A|B|C [--dt STEP] [--inject-fault]
 *   ct-npb-bt --class X --check-only --np N     (no MPI: can the class run on N ranks?)
 *
 * Like NPB, one untimed step first (touches every page and code path), then the field is
 * initialised again and niter steps are timed. Mop/s from NPB's BT operation count:
 * niter (3478.8 n^3 - 17655.7 navg^2 + 28023.7 navg) 1e-6 / time.
 * Per rank the timed section is split into communication (time inside MPI calls) and
 * computation (the rest); messages and bytes sent are counted over the timed steps
 * (per iteration in the record). Options, the check of the rank count and the result
 * line are the NPB kernels' common ones (kernels/npb/common/npb.h, docs/npb.md).
 * --inject-fault (tests): rank 0 changes one value of u by 1 % after the first timed
 * step, so the norms miss their references and verification fails. */
#define _POSIX_C_SOURCE 200809L
#include "bt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void adi(bt_state *s)
{
    bt_compute_rhs(s);
    for (int d = 0; d < 3; d++)
        bt_solve(s, d);
    bt_add(s);
}

static void extra(ct_json *j, const void *arg)
{
    const bt_state *s = arg;
    ct_json_integer(j, "cells_per_rank", s->q);
    ct_json_integer(j, "active_ranks", s->np);
}

int main(int argc, char **argv)
{
    const npb_rule rule = {"BT", bt_np_allowed, bt_max_list,
                           " (a square number q*q of ranks, q^3 cells of at least 3 points a "
                           "side, q cells per rank)", 1};
    npb_options o;
    int np, me, status = npb_start(&argc, &argv, &rule, &o, &np, &me);
    if (status >= 0)
        return status;
    const bt_class *cls = &bt_classes[o.cls];
    MPI_Comm comm;
    CT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));

    bt_state s;
    bt_setup(&s, cls, comm);
    if (o.dt > 0.0) /* --dt: NPB's input file; verification then fails on dt */
        s.k.dt = o.dt;
    bt_forcing(&s);
    bt_initialize(&s);
    /* one untimed step, as NPB does, then start again from the initial field */
    adi(&s);
    bt_initialize(&s);
    npb_comm_init(&s.comm);

    CT_MPI_CHECK(MPI_Barrier(comm));
    double t0 = MPI_Wtime();
    for (int it = 1; it <= cls->niter; it++) {
        adi(&s);
        if (it == 1 && o.fault && me == 0) {
            bt_cell *c = &s.cells[0];
            double *u = c->u + BT_NVAR * bt_uidx(c, c->size[0] / 2, c->size[1] / 2, c->size[2] / 2);
            u[0] *= 1.01;
        }
    }
    double elapsed = MPI_Wtime() - t0;
    ct_phases counted = s.comm;

    double xce[BT_NVAR], xcr[BT_NVAR];
    bt_error_norm(&s, xce);
    bt_compute_rhs(&s);
    bt_rhs_norm(&s, xcr);

    npb_result r = {.benchmark = "BT", .cls = o.cls, .nsize = 3, .iterations = cls->niter,
                    .time_s = elapsed, .op_type = "floating point", .comm = counted,
                    .per_iteration = cls->niter, .dt = s.k.dt, .dt_reference = cls->dt,
                    .extra = extra, .extra_arg = &s};
    for (int d = 0; d < 3; d++)
        r.size[d] = s.n[d];
    static const char *const xcr_names[BT_NVAR] = {"xcr1", "xcr2", "xcr3", "xcr4", "xcr5"};
    static const char *const xce_names[BT_NVAR] = {"xce1", "xce2", "xce3", "xce4", "xce5"};
    for (int m = 0; m < BT_NVAR; m++)
        npb_add_check(&r, xcr_names[m], xcr[m] / s.k.dt, cls->xcr[m], 0); /* NPB: the run's dt */
    for (int m = 0; m < BT_NVAR; m++)
        npb_add_check(&r, xce_names[m], xce[m], cls->xce[m], 0);
    double n3 = (double)s.n[0] * s.n[1] * s.n[2], navg = (s.n[0] + s.n[1] + s.n[2]) / 3.0;
    r.ops = (double)cls->niter * (3478.8 * n3 - 17655.7 * navg * navg + 28023.7 * navg);
    const int verified = npb_report(&r);
    bt_free(&s);
    CT_MPI_CHECK(MPI_Comm_free(&comm));
    CT_MPI_CHECK(MPI_Finalize());
    return verified ? 0 : 1; /* a failed verification fails the job, as ct-linpack's */
}
