/* qcd_update.c - the link update and the plaquette.
 *
 * Action: S = beta sum_P (1 - Re Tr U_P / 3). For the link U = U_mu(x) the part of S that
 * depends on it is -(beta/3) Re Tr(U A), A the sum of the six staples, so the heat bath
 * draws U with weight exp((beta/3) Re Tr(U A)). Cabibbo-Marinari: U is left-multiplied by
 * an SU(2) element in the subgroups (0,1), (1,2), (0,2) in turn; in each, W = U A gives
 * Re Tr(r w) = 2 b.c (qcd_su3.h, su2_project) with k = |c|, c = k c^, and the new element is
 * r = x c^ where x has density sqrt(1 - x0^2) exp(alpha x0), alpha = 2 beta k / 3, drawn
 * with Kennedy and Pendleton's algorithm (Phys. Lett. 156B (1985) 393). Over-relaxation
 * takes x = c^ instead (the reflection of x0 = c^_0 that leaves the action unchanged),
 * i.e. r = c^ c^.
 *
 * Cost per link (counted, docs/qcd.md): staple sum 6 staples x 2 products + 6 additions
 * = 2484; W = U A 198; per subgroup projection 6, normalisation 13, SU(2) product 28,
 * rows of U 84; rows of W 84 for the first two subgroups: 3243 for over-relaxation, plus
 * 25 per subgroup for the heat bath's sampling (transcendental functions and the random
 * numbers not counted): 3318. Memory: 19 links read, 1 written.
 */
#define QCD_VARIANT(name) name##_base
#include "qcd_update_body.h"

static int use_avx; /* set by qcd_isa */

const char *qcd_isa(int want_baseline)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    use_avx = !want_baseline && __builtin_cpu_supports("avx2");
#else
    (void)want_baseline;
#endif
    return use_avx ? "avx2" : "baseline";
}

void qcd_update_sites(const qcd_lattice *lat, double *const *u, int mu, int64_t n,
                      const int64_t *site, const int64_t *gsite, const qcd_action *act,
                      int hb, long long hb_index, qcd_update_stats *st, qcd_stream *pf)
{
    if (use_avx)
        qcd_update_sites_avx(lat, u, mu, n, site, gsite, act, hb, hb_index, st, pf);
    else
        qcd_update_sites_base(lat, u, mu, n, site, gsite, act, hb, hb_index, st, pf);
}

void qcd_plaquette_local(const qcd_lattice *lat, double *const *u, __int128 sum[2])
{
    if (use_avx)
        qcd_plaquette_local_avx(lat, u, sum);
    else
        qcd_plaquette_local_base(lat, u, sum);
}

void qcd_reunit_check(const qcd_lattice *lat, double *const *u, double *unit_err, double *det_err)
{
    if (use_avx)
        qcd_reunit_check_avx(lat, u, unit_err, det_err);
    else
        qcd_reunit_check_base(lat, u, unit_err, det_err);
}
