/* qcd_update_body.h - the link update and the plaquette, compiled twice: in qcd_update.c
 * for the x86-64 baseline (SSE2) and in qcd_update_avx.c with -mavx2 (no FMA), where
 * qcd_su3.h's products use 256-bit registers. Both run the same operations in the same
 * order on IEEE doubles (-ffp-contract=off, no auto-vectorisation: CMakeLists.txt), so a
 * run's numbers do not depend on which one a rank runs -- tests/test_qcd.py compares the
 * two series. QCD_VARIANT(name) names this build's two entry points; qcd_update.c's
 * qcd_update_sites and qcd_plaquette_local pick one (qcd_isa). */
#ifndef QCD_UPDATE_BODY_H
#define QCD_UPDATE_BODY_H

#include "qcd.h"

#include <math.h>
#include <string.h>

void qcd_update_sites_base(const qcd_lattice *lat, double *const *u, int mu, int64_t n,
                           const int64_t *site, const int64_t *gsite, const qcd_action *act,
                           int hb, long long hb_index, qcd_update_stats *st, qcd_stream *pf);
void qcd_update_sites_avx(const qcd_lattice *lat, double *const *u, int mu, int64_t n,
                          const int64_t *site, const int64_t *gsite, const qcd_action *act,
                          int hb, long long hb_index, qcd_update_stats *st, qcd_stream *pf);
void qcd_plaquette_local_base(const qcd_lattice *lat, double *const *u, __int128 sum[2]);
void qcd_plaquette_local_avx(const qcd_lattice *lat, double *const *u, __int128 sum[2]);
void qcd_reunit_check_base(const qcd_lattice *lat, double *const *u, double *unit_err,
                           double *det_err);
void qcd_reunit_check_avx(const qcd_lattice *lat, double *const *u, double *unit_err,
                          double *det_err);

#ifdef QCD_VARIANT
#define QCD_BODY static inline __attribute__((always_inline))

static const int SUB_I[3] = {0, 1, 0}, SUB_J[3] = {1, 2, 2};
#define TWO_PI 6.283185307179586476925

/* Kennedy-Pendleton: x0 with density ~ sqrt(1 - x0^2) exp(alpha x0), then a uniform
 * direction for (x1, x2, x3). One Philox call gives a trial's four uniforms (32 bits each,
 * in (0, 1): never 0, so the logarithms are finite), one more the accepted direction.
 * Returns 0 if nhit_max trials were all rejected. */
static int kennedy_pendleton(double alpha, const qcd_action *act, qcd_ctr *ctr, double x[4],
                             qcd_update_stats *st)
{
    uint32_t base = ctr->c[1];
    for (int trial = 0; trial < act->nhit_max; trial++) {
        double r[4];
        ctr->c[1] = base + (uint32_t)trial * 16u;
        qcd_uniform4(act->seed, ctr, r);
        st->kp_trials++;
        double c = cos(TWO_PI * r[1]);
        double l2 = -(log(r[0]) + c * c * log(r[2])) / (2.0 * alpha);
        if (r[3] * r[3] <= 1.0 - l2) {
            double x0 = 1.0 - 2.0 * l2, d[4];
            ctr->c[1] = base + (uint32_t)act->nhit_max * 16u;
            qcd_uniform4(act->seed, ctr, d);
            double rr = sqrt(fmax(0.0, 1.0 - x0 * x0));
            double ct = 2.0 * d[0] - 1.0, st_ = sqrt(fmax(0.0, 1.0 - ct * ct));
            double phi = TWO_PI * d[1];
            x[0] = x0;
            x[1] = rr * st_ * cos(phi);
            x[2] = rr * st_ * sin(phi);
            x[3] = rr * ct;
            st->kp_accepted++;
            return 1;
        }
    }
    st->kp_given_up++;
    return 0;
}

/* Purpose: update one link U_mu at extended site e (global index g).
 * Arguments: u the four extended link fields (local+ghost, read; U_mu(e) written),
 * hb selects heat bath (random numbers keyed by g, mu, subgroup and hb_index) or
 * over-relaxation. Reads the 18 links of the six staples; see the header for flops. */
static inline __attribute__((always_inline)) void update_link(const qcd_lattice *lat, double *const *u, int mu, int64_t e,
                               int64_t g, const qcd_action *act, int hb, long long hb_index,
                               qcd_update_stats *st)
{
    double a[QCD_SU3] = {0}, t[QCD_SU3], w[QCD_SU3];
    const double *umu = u[mu];
    const int64_t smu = lat->stride[mu];
    for (int nu = 0; nu < QCD_DIM; nu++) {
        if (nu == mu)
            continue;
        const double *unu = u[nu];
        const int64_t snu = lat->stride[nu];
        /* upper: U_nu(x+mu) U_mu(x+nu)^+ U_nu(x)^+ */
        su3_mul_nd(unu + (e + smu) * QCD_SITE, umu + (e + snu) * QCD_SITE, t);
        su3_mul_nd_add(t, unu + e * QCD_SITE, a);
        /* lower: U_nu(x+mu-nu)^+ U_mu(x-nu)^+ U_nu(x-nu) = (U_mu(x-nu) U_nu(x+mu-nu))^+ U_nu(x-nu) */
        su3_mul_nn(umu + (e - snu) * QCD_SITE, unu + (e + smu - snu) * QCD_SITE, t);
        su3_mul_dn_add(t, unu + (e - snu) * QCD_SITE, a);
    }
    double *link = u[mu] + e * QCD_SITE;
    su3_mul_nn(link, a, w);
    for (int s = 0; s < 3; s++) {
        const int i = SUB_I[s], j = SUB_J[s];
        double c[4], r[4];
        su2_project(w, i, j, c);
        double k = sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2] + c[3] * c[3]);
        if (!(k > 1e-300))
            continue; /* no preferred direction: any SU(2) element is as good; keep U */
        double ik = 1.0 / k;
        c[0] *= ik;
        c[1] *= ik;
        c[2] *= ik;
        c[3] *= ik;
        if (hb) {
            double x[4];
            qcd_ctr ctr = {{(uint32_t)g, (uint32_t)(mu | s << 2),
                            (uint32_t)hb_index,
                            (uint32_t)(QCD_STREAM_HEATBATH | (uint64_t)hb_index >> 32 << 8)}};
            if (!kennedy_pendleton(2.0 * act->beta * k / 3.0, act, &ctr, x, st))
                continue;
            su2_mul(x, c, r);
        } else {
            su2_mul(c, c, r);
        }
        su2_left_mul(r, i, j, link);
        if (s < 2)
            su2_left_mul(r, i, j, w);
    }
}

/* Purpose: the next `lines` cache lines of the stream pf (qcd.h) towards the caches.
 * Prefetch hints only: no number changes. */
static inline void prefetch_stream(qcd_stream *pf)
{
    int64_t k = pf->lines;
    while (k > 0 && pf->runs > 0) {
        /* the lines left in this run, in a loop of nothing else (8^4: 36 lines per link) */
        int64_t m = (pf->left + 63) / 64;
        m = m < k ? m : k;
        for (int64_t i = 0; i < m; i++)
            __builtin_prefetch(pf->p + 64 * i);
        pf->p += 64 * m;
        pf->left -= 64 * m;
        k -= m;
        if (pf->left <= 0) {
            pf->p += pf->gap;
            pf->left = pf->run;
            pf->runs--;
        }
    }
}

QCD_BODY void update_sites(const qcd_lattice *lat, double *const *u, int mu, int64_t n,
                           const int64_t *site, const int64_t *gsite, const qcd_action *act,
                           int hb, long long hb_index, qcd_update_stats *st, qcd_stream *pf)
{
    for (int64_t k = 0; k < n; k++) {
        if (pf)
            prefetch_stream(pf);
        if (hb)
            update_link(lat, u, mu, site[k], gsite[k], act, 1, hb_index, st);
        else
            update_link(lat, u, mu, site[k], gsite[k], act, 0, 0, st);
    }
}

/* Purpose: Re Tr of the six plaquettes at every local site, spatial (planes xy, xz, yz)
 * and temporal (xt, yt, zt) apart. Each site's two sums (|value| <= 9) are rounded to
 * multiples of 2^-50 and added as integers: the total is exact, so the same on any
 * decomposition. Cost: 6 x (2 products + 35) = 2586 flops per site. */
QCD_BODY void plaquette_local(const qcd_lattice *lat, double *const *u, __int128 sum[2])
{
    sum[0] = sum[1] = 0;
    double a[QCD_SU3], b[QCD_SU3];
    for (int64_t k = 0; k < lat->volume; k++) {
        int64_t e = lat->all_local[k];
        double ps = 0.0, pt = 0.0;
        for (int m = 0; m < QCD_DIM; m++)
            for (int n = m + 1; n < QCD_DIM; n++) {
                su3_mul_nn(u[m] + e * QCD_SITE, u[n] + (e + lat->stride[m]) * QCD_SITE, a);
                su3_mul_nn(u[n] + e * QCD_SITE, u[m] + (e + lat->stride[n]) * QCD_SITE, b);
                double p = su3_retr_mul_nd(a, b);
                if (n == 3)
                    pt += p;
                else
                    ps += p;
            }
        sum[0] += llrint(ps * QCD_PLAQ_SCALE);
        sum[1] += llrint(pt * QCD_PLAQ_SCALE);
    }
}

void QCD_VARIANT(qcd_update_sites)(const qcd_lattice *lat, double *const *u, int mu, int64_t n,
                                   const int64_t *site, const int64_t *gsite,
                                   const qcd_action *act, int hb, long long hb_index,
                                   qcd_update_stats *st, qcd_stream *pf)
{
    update_sites(lat, u, mu, n, site, gsite, act, hb, hb_index, st, pf);
}

void QCD_VARIANT(qcd_plaquette_local)(const qcd_lattice *lat, double *const *u, __int128 sum[2])
{
    plaquette_local(lat, u, sum);
}

void QCD_VARIANT(qcd_reunit_check)(const qcd_lattice *lat, double *const *u, double *unit_err,
                                   double *det_err)
{
    double ue = 0.0, de = 0.0;
    for (int64_t k = 0; k < lat->volume; k++) { /* ascending: memory order */
        const int64_t e = lat->all_local[k];
        for (int mu = 0; mu < QCD_DIM; mu++) {
            double *l = u[mu] + e * QCD_SITE;
            ue = fmax(ue, su3_unitarity_error(l));
            de = fmax(de, su3_det_error(l));
            su3_reunit(l);
        }
    }
    /* 8^4 on one rank: 3.8 k of the 5.9 k ghost sites per direction, on two 2.2-2.4 k of 4 k */
    for (int mu = 0; mu < QCD_DIM; mu++)
        for (int64_t k = 0; k < lat->nghost[mu]; k++)
            su3_reunit(u[mu] + lat->ghost[mu][k] * QCD_SITE);
    *unit_err = ue;
    *det_err = de;
}

#endif /* QCD_VARIANT */
#endif
