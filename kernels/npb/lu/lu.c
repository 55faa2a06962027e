/* ct-npb-lu - NPB LU: SSOR on the NPB Navier-Stokes model problem (lu.h), on a px x py
 * grid of ranks over (i, j), pipelined plane by plane in k.
 *
 * Run as NPB does: set the boundary and initial values, the forcing from the exact
 * solution, one SSOR step untimed (warm-up), reset, then itmax timed steps; after them
 * the RMS norms of the residual (xcr), of the error against the exact solution (xce)
 * and the surface integral (xci), each checked against NPB's reference to a relative
 * 1e-8, after checking that dt (--dt, NPB's input file) is the class's. Mop/s from NPB's
 * count:
 *   1e-6 itmax (1984.77 n^3 - 10923.3 navg^2 + 27770.9 navg - 144010) / t.
 *
 * Process counts: any np = px * py (px >= py, the squarest such grid whose blocks keep
 * at least LU_MIN_BLOCK points a side); NPB 3.4 itself takes powers of two and squares.
 *
 * Usage: ct-npb-lu --class S|W|A|B|C [--dt STEP] [--inject-fault] [--check-only --np N]
 */
#include "lu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LU_MIN_BLOCK 3 /* points per rank a side: the dissipation reaches two neighbours */

static const int class_n[NPB_NCLASSES] = {12, 33, 64, 102, 162};
static const int class_itmax[NPB_NCLASSES] = {50, 300, 250, 250, 250};
static const double class_dt[NPB_NCLASSES] = {0.5, 1.5e-3, 2.0, 2.0, 2.0};
/* NPB's reference values: residual RMS norms, error RMS norms, surface integral */
static const double ref_xcr[NPB_NCLASSES][5] = {
    {1.6196343210976702e-02, 2.1976745164821318e-03, 1.5179927653399185e-03,
     1.5029584435994323e-03, 3.4264073155896461e-02},
    {0.1236511638192e+02, 0.1317228477799e+01, 0.2550120713095e+01, 0.2326187750252e+01,
     0.2826799444189e+02},
    {7.7902107606689367e+02, 6.3402765259692870e+01, 1.9499249727292479e+02,
     1.7845301160418537e+02, 1.8384760349464247e+03},
    {3.5532672969982736e+03, 2.6214750795310692e+02, 8.8333721850952190e+02,
     7.7812774739425265e+02, 7.3087969592545314e+03},
    {1.03766980323537846e+04, 8.92212458801008552e+02, 2.56238814582660871e+03,
     2.19194343857831427e+03, 1.78078057261061185e+04},
};
static const double ref_xce[NPB_NCLASSES][5] = {
    {6.4223319957960924e-04, 8.4144342047347926e-05, 5.8588269616485186e-05,
     5.8474222595157350e-05, 1.3103347914111294e-03},
    {0.4867877144216e+00, 0.5064652880982e-01, 0.9281818101960e-01, 0.8570126542733e-01,
     0.1084277417792e+01},
    {2.9964085685471943e+01, 2.8194576365003349e+00, 7.3473412698774742e+00,
     6.7139225687777051e+00, 7.0715315688392578e+01},
    {1.1401176380212709e+02, 8.1098963655421574e+00, 2.8480597317698308e+01,
     2.5905394567832939e+01, 2.6054907504857413e+02},
    {2.15986399716949279e+02, 1.55789559239863600e+01, 5.41318863077207766e+01,
     4.82262643154045421e+01, 4.55902910043250358e+02},
};
static const double ref_xci[NPB_NCLASSES] = {7.8418928865937083e+00, 0.1161399311023e+02,
                                             2.6030925604886277e+01, 4.7887162703308227e+01,
                                             6.66404553572181300e+01};

/* the squarest px x py = np (px >= py) whose blocks are at least LU_MIN_BLOCK wide;
 * 0 if none */
static int grid_of(int np, int n, int *px, int *py)
{
    for (int y = (int)sqrt((double)np) + 1; y >= 1; y--) {
        if (y * y > np || np % y)
            continue;
        int x = np / y;
        if (n / x >= LU_MIN_BLOCK && n / y >= LU_MIN_BLOCK) {
            *px = x;
            *py = y;
            return 1;
        }
    }
    return 0;
}

static int allowed(int np, int cls)
{
    int px, py;
    return np >= 1 && grid_of(np, class_n[cls], &px, &py);
}

/* block of coordinate c among p parts of n points: the first n % p get one more */
static void block(int n, int p, int c, int *first, int *count)
{
    int base = n / p, extra = n % p;
    *count = base + (c < extra);
    *first = c * base + (c < extra ? c : extra);
}

static void setup(lu_t *g, int cls, double dt, int np, int me)
{
    int n = class_n[cls];
    g->n[0] = g->n[1] = g->n[2] = n;
    g->itmax = class_itmax[cls];
    g->dt = dt > 0.0 ? dt : class_dt[cls];
    g->omega = 1.2;
    grid_of(np, n, &g->px, &g->py);
    g->cx = me % g->px;
    g->cy = me / g->px;
    block(n, g->px, g->cx, &g->i0, &g->ni);
    block(n, g->py, g->cy, &g->j0, &g->nj);
    g->nk = n;
    g->west = g->cx > 0 ? me - 1 : MPI_PROC_NULL;
    g->east = g->cx < g->px - 1 ? me + 1 : MPI_PROC_NULL;
    g->south = g->cy > 0 ? me - g->px : MPI_PROC_NULL;
    g->north = g->cy < g->py - 1 ? me + g->px : MPI_PROC_NULL;
    g->sx = g->ni + 2 * LU_G;
    g->sy = g->nj + 2 * LU_G;
    g->ist = g->i0 == 0 ? 1 : 0;
    g->iend = (g->i0 + g->ni - 1 > n - 2 ? n - 2 - g->i0 : g->ni - 1);
    g->jst = g->j0 == 0 ? 1 : 0;
    g->jend = (g->j0 + g->nj - 1 > n - 2 ? n - 2 - g->j0 : g->nj - 1);
    for (int d = 0; d < 3; d++) {
        double h = 1.0 / (g->n[d] - 1);
        g->t1[d] = 1.0 / (h * h);
        g->t2[d] = 1.0 / (2.0 * h);
        g->t3[d] = 1.0 / h;
        g->dd[d] = d < 2 ? 0.75 : 1.0;
    }
    g->dssp = 1.0 / 4.0; /* max(dx1, dy1, dz1) / 4 */
    ct_alloc_failure f = {0};
    size_t bytes = sizeof(double) * (size_t)lu_values(g);
    g->u = ct_mpi_try_alloc(&f, bytes, "u");
    g->rsd = ct_mpi_try_alloc(&f, bytes, "rsd");
    g->frct = ct_mpi_try_alloc(&f, bytes, "frct");
    g->flux = ct_mpi_try_alloc(&f, 2 * bytes, "fluxes");
    size_t strip = 5 * (size_t)(g->ni + g->nj);
    g->sendbuf = ct_mpi_try_alloc(&f, sizeof(double) * strip * (size_t)g->nk, "sweep buffers");
    g->recvbuf = ct_mpi_try_alloc(&f, sizeof(double) * strip, "sweep buffers");
    g->halo = ct_mpi_try_alloc(&f, sizeof(double) * 2 * 10 * strip * (size_t)g->nk, "halos");
    ct_mpi_agree(MPI_COMM_WORLD, &f);
    memset(g->u, 0, bytes);
    memset(g->rsd, 0, bytes);
    memset(g->frct, 0, bytes);
}

/* boundary values (exact solution on the six faces) and the initial interior: NPB's
 * transfinite interpolation of the face values */
static void initial_values(lu_t *g)
{
    int nx = g->n[0], ny = g->n[1], nz = g->n[2];
    for (int k = 0; k < nz; k++)
        for (int j = 0; j < g->nj; j++)
            for (int i = 0; i < g->ni; i++) {
                int gi = g->i0 + i, gj = g->j0 + j;
                double *u = g->u + lu_at(g, i, j, k);
                if (gi == 0 || gi == nx - 1 || gj == 0 || gj == ny - 1 || k == 0 ||
                    k == nz - 1) {
                    lu_exact(g, gi, gj, k, u);
                    continue;
                }
                double x = (double)gi / (nx - 1), y = (double)gj / (ny - 1),
                       z = (double)k / (nz - 1);
                double ax[5], bx[5], ay[5], by[5], az[5], bz[5];
                lu_exact(g, 0, gj, k, ax);
                lu_exact(g, nx - 1, gj, k, bx);
                lu_exact(g, gi, 0, k, ay);
                lu_exact(g, gi, ny - 1, k, by);
                lu_exact(g, gi, gj, 0, az);
                lu_exact(g, gi, gj, nz - 1, bz);
                for (int m = 0; m < 5; m++) {
                    double px = (1.0 - x) * ax[m] + x * bx[m];
                    double py = (1.0 - y) * ay[m] + y * by[m];
                    double pz = (1.0 - z) * az[m] + z * bz[m];
                    u[m] = px + py + pz - px * py - py * pz - pz * px + px * py * pz;
                }
            }
}

/* the forcing: the operator applied to the exact solution */
static void forcing(lu_t *g)
{
    for (int k = 0; k < g->nk; k++)
        for (int j = -LU_G; j < g->nj + LU_G; j++)
            for (int i = -LU_G; i < g->ni + LU_G; i++) {
                int gi = g->i0 + i, gj = g->j0 + j;
                if (gi >= 0 && gi < g->n[0] && gj >= 0 && gj < g->n[1])
                    lu_exact(g, gi, gj, k, g->rsd + lu_at(g, i, j, k));
            }
    lu_operator(g, g->rsd, g->frct, NULL);
}

/* per component: sum over the interior of f(point), reduced over all ranks */
static void interior_sums(lu_t *g, const double *v, int error, double out[5])
{
    double s[5] = {0, 0, 0, 0, 0};
    for (int k = 1; k <= g->nk - 2; k++)
        for (int j = g->jst; j <= g->jend; j++)
            for (int i = g->ist; i <= g->iend; i++) {
                const double *p = v + lu_at(g, i, j, k);
                double e[5];
                if (error)
                    lu_exact(g, g->i0 + i, g->j0 + j, k, e);
                for (int m = 0; m < 5; m++) {
                    double d = error ? e[m] - p[m] : p[m];
                    s[m] += d * d;
                }
            }
    ct_phase_start(&g->comm, NPB_COMM_S);
    CT_MPI_CHECK(MPI_Allreduce(s, out, 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    ct_phase_stop(&g->comm, NPB_COMM_S);
    npb_comm_sent(&g->comm, sizeof s);
    double points = (double)(g->n[0] - 2) * (g->n[1] - 2) * (g->n[2] - 2);
    for (int m = 0; m < 5; m++)
        out[m] = sqrt(out[m] / points);
}

/* NPB's surface integral of the pressure-like c2 (u5 - |m|^2 / 2 u1) over the faces of
 * the box [1, nx-2] x [1, ny-3] x [2, nz-2] (0-based; NPB's bounds), trapezoidal with
 * the 8 corners of every face cell: each face's values gathered on every rank first */
static double surface_integral(lu_t *g)
{
    int nx = g->n[0], ny = g->n[1], nz = g->n[2];
    int i1 = 1, i2 = nx - 2, j1 = 1, j2 = ny - 3, k1 = 2, k2 = nz - 2;
    /* faces: z (k1, k2) over (i, j); y (j1, j2) over (i, k); x (i1, i2) over (j, k) */
    long fz = (long)nx * ny, fy = (long)nx * nz, fx = (long)ny * nz;
    long total = 2 * (fz + fy + fx);
    double *mine = calloc((size_t)total, sizeof(double));
    double *all = malloc(sizeof(double) * (size_t)total);
    if (!mine || !all)
        ct_mpi_fail("cannot allocate the surface integral's faces");
    double *z1 = mine, *z2 = z1 + fz, *y1 = z2 + fz, *y2 = y1 + fy, *x1 = y2 + fy, *x2 = x1 + fx;
    for (int k = 0; k < nz; k++)
        for (int j = 0; j < g->nj; j++)
            for (int i = 0; i < g->ni; i++) {
                int gi = g->i0 + i, gj = g->j0 + j;
                const double *u = g->u + lu_at(g, i, j, k);
                double phi =
                    LU_C2 * (u[4] - 0.5 * (u[1] * u[1] + u[2] * u[2] + u[3] * u[3]) / u[0]);
                if (k == k1)
                    z1[gi + (long)nx * gj] = phi;
                if (k == k2)
                    z2[gi + (long)nx * gj] = phi;
                if (gj == j1)
                    y1[gi + (long)nx * k] = phi;
                if (gj == j2)
                    y2[gi + (long)nx * k] = phi;
                if (gi == i1)
                    x1[gj + (long)ny * k] = phi;
                if (gi == i2)
                    x2[gj + (long)ny * k] = phi;
            }
    ct_phase_start(&g->comm, NPB_COMM_S);
    CT_MPI_CHECK(MPI_Allreduce(mine, all, (int)total, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    ct_phase_stop(&g->comm, NPB_COMM_S);
    npb_comm_sent(&g->comm, (double)total * sizeof(double));
    /* sum over the cells [a1, a2) x [b1, b2) of both faces' four corners */
    double frc[3] = {0, 0, 0};
    const double *faces[3][2] = {{all, all + fz}, {all + 2 * fz, all + 2 * fz + fy},
                                 {all + 2 * fz + 2 * fy, all + 2 * fz + 2 * fy + fx}};
    int lo_a[3] = {i1, i1, j1}, hi_a[3] = {i2, i2, j2}, lo_b[3] = {j1, k1, k1},
        hi_b[3] = {j2, k2, k2}, lda[3] = {nx, nx, ny};
    for (int f = 0; f < 3; f++)
        for (int b = lo_b[f]; b < hi_b[f]; b++)
            for (int a = lo_a[f]; a < hi_a[f]; a++)
                for (int s = 0; s < 2; s++) {
                    const double *p = faces[f][s];
                    long at = a + (long)lda[f] * b;
                    frc[f] += p[at] + p[at + 1] + p[at + lda[f]] + p[at + lda[f] + 1];
                }
    double dxi = 1.0 / (nx - 1), deta = 1.0 / (ny - 1), dzeta = 1.0 / (nz - 1);
    free(mine);
    free(all);
    return 0.25 * (dxi * deta * frc[0] + dxi * dzeta * frc[1] + deta * dzeta * frc[2]);
}

/* pseudo-time steps: rsd <- dt rsd, the two sweeps, u <- u + rsd / (omega (2 - omega)),
 * the new residual */
static void ssor(lu_t *g, int steps)
{
    double scale = 1.0 / (g->omega * (2.0 - g->omega));
    for (int step = 0; step < steps; step++) {
        for (int k = 1; k <= g->nk - 2; k++)
            for (int j = g->jst; j <= g->jend; j++)
                for (int i = g->ist; i <= g->iend; i++) {
                    double *r = g->rsd + lu_at(g, i, j, k);
                    for (int m = 0; m < 5; m++)
                        r[m] *= g->dt;
                }
        lu_ssor_sweeps(g);
        for (int k = 1; k <= g->nk - 2; k++)
            for (int j = g->jst; j <= g->jend; j++)
                for (int i = g->ist; i <= g->iend; i++) {
                    long p = lu_at(g, i, j, k);
                    for (int m = 0; m < 5; m++)
                        g->u[p + m] += scale * g->rsd[p + m];
                }
        lu_exchange(g, g->u);
        lu_operator(g, g->u, g->rsd, g->frct);
    }
}

typedef struct {
    const lu_t *g;
} lu_info;

static void extra(ct_json *j, const void *arg)
{
    const lu_t *g = ((const lu_info *)arg)->g;
    ct_json_open_array(j, "grid");
    ct_json_integer(j, NULL, g->px);
    ct_json_integer(j, NULL, g->py);
    ct_json_close_array(j);
}

static int max_list(int cls)
{
    (void)cls;
    return 64;
}

int main(int argc, char **argv)
{
    const npb_rule rule = {"LU", allowed, max_list,
                           " (a px x py grid, px >= py, at least 3 points a side per rank)", 1};
    npb_options o;
    int np, me, status = npb_start(&argc, &argv, &rule, &o, &np, &me);
    if (status >= 0)
        return status;
    int cls = o.cls, fault = o.fault;
    lu_t g = {0};
    setup(&g, cls, o.dt, np, me);
    initial_values(&g);
    lu_exchange(&g, g.u);
    forcing(&g);
    if (fault && me == 0) /* --inject-fault: one forcing value of rank 0 off by 0.1 % */
        g.frct[lu_at(&g, g.ist, g.jst, 1)] *= 1.001;
    /* NPB's untimed first step, then the same start again */
    lu_exchange(&g, g.u);
    lu_operator(&g, g.u, g.rsd, g.frct);
    ssor(&g, 1);
    initial_values(&g);
    lu_exchange(&g, g.u);
    lu_operator(&g, g.u, g.rsd, g.frct);
    npb_comm_init(&g.comm);

    CT_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = MPI_Wtime();
    ssor(&g, g.itmax);
    double xcr[5];
    interior_sums(&g, g.rsd, 0, xcr);
    double elapsed = MPI_Wtime() - t0;
    ct_phases counted = g.comm;

    double xce[5];
    interior_sums(&g, g.u, 1, xce);
    lu_exchange(&g, g.u);
    double xci = surface_integral(&g);

    int n = class_n[cls];
    npb_result r = {.benchmark = "LU", .cls = cls, .nsize = 3, .iterations = g.itmax,
                    .time_s = elapsed, .op_type = "floating point", .comm = counted,
                    .per_iteration = g.itmax};
    r.size[0] = r.size[1] = r.size[2] = n;
    r.dt = g.dt;
    r.dt_reference = class_dt[cls];
    static const char *const xcr_names[5] = {"xcr1", "xcr2", "xcr3", "xcr4", "xcr5"};
    static const char *const xce_names[5] = {"xce1", "xce2", "xce3", "xce4", "xce5"};
    for (int m = 0; m < 5; m++)
        npb_add_check(&r, xcr_names[m], xcr[m], ref_xcr[cls][m], 0);
    for (int m = 0; m < 5; m++)
        npb_add_check(&r, xce_names[m], xce[m], ref_xce[cls][m], 0);
    npb_add_check(&r, "xci", xci, ref_xci[cls], 0);
    double navg = n;
    r.ops = (double)g.itmax *
            (1984.77 * (double)n * n * n - 10923.3 * navg * navg + 27770.9 * navg - 144010.0);
    lu_info info = {&g};
    r.extra = extra;
    r.extra_arg = &info;
    const int verified = npb_report(&r);
    CT_MPI_CHECK(MPI_Finalize());
    return verified ? 0 : 1; /* a failed verification fails the job, as ct-linpack's */
}
