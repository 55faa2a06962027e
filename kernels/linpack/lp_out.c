/* lp_out.c - HPL-format text: the same table layout, variant code, residual line and
 * summary as xhpl, so tools that read HPL output read ours. */
#include "lp.h"

static const char *fact_name(int f) { return f == LP_LEFT ? "Left" : f == LP_CROUT ? "Crout" : "Right"; }
static char fact_letter(int f) { return f == LP_LEFT ? 'L' : f == LP_CROUT ? 'C' : 'R'; }
static const char *bcast_name(int b)
{
    static const char *const names[] = {"1ring", "1ringM", "2ring", "2ringM", "Blong", "BlongM"};
    return b >= 0 && b <= 5 ? names[b] : "?";
}
static const char *const RULE =
    "================================================================================";
static const char *const DASH =
    "--------------------------------------------------------------------------------";

void lp_variant_code(const lp_algo *a, char code[16])
{
    snprintf(code, 16, "W%c%d%d%c%d%c%d", a->colmajor ? 'C' : 'R', a->depth, a->bcast,
             fact_letter(a->rfact), a->ndiv, fact_letter(a->pfact), a->nbmin);
}

static void int_list(FILE *f, const char *label, const lp_list *l)
{
    fprintf(f, "%-7s:", label);
    for (int i = 0; i < l->count; i++)
        fprintf(f, "%s%8d ", i && i % 8 == 0 ? "\n        " : "", l->v[i]);
    fputc('\n', f);
}

static void fact_list(FILE *f, const char *label, const lp_list *l)
{
    fprintf(f, "%-7s:", label);
    for (int i = 0; i < l->count; i++)
        fprintf(f, " %7s ", fact_name(l->v[i]));
    fputc('\n', f);
}

void lp_out_header(FILE *f, const lp_params *prm)
{
    fprintf(f, "%s\nclustertune ct-linpack -- distributed LU with partial pivoting, HPL-compatible "
               "input and output\n%s\n\n",
            RULE, RULE);
    fprintf(f, "An explanation of the input/output parameters follows:\n"
               "T/V    : Wall time / encoded variant.\n"
               "N      : The order of the coefficient matrix A.\n"
               "NB     : The partitioning blocking factor.\n"
               "P      : The number of process rows.\n"
               "Q      : The number of process columns.\n"
               "Time   : Time in seconds to solve the linear system.\n"
               "Gflops : Rate of execution for solving the linear system.\n\n"
               "The following parameter values will be used:\n\n");
    int_list(f, "N", &prm->n);
    int_list(f, "NB", &prm->nb);
    fprintf(f, "PMAP   : %s process mapping\n", prm->colmajor ? "Column-major" : "Row-major");
    int_list(f, "P", &prm->p);
    int_list(f, "Q", &prm->q);
    fact_list(f, "PFACT", &prm->pfact);
    int_list(f, "NBMIN", &prm->nbmin);
    int_list(f, "NDIV", &prm->ndiv);
    fact_list(f, "RFACT", &prm->rfact);
    fprintf(f, "BCAST  :");
    for (int i = 0; i < prm->bcast.count; i++)
        fprintf(f, " %7s ", bcast_name(prm->bcast.v[i]));
    fputc('\n', f);
    int_list(f, "DEPTH", &prm->depth);
    if (prm->swap == LP_SWAP_BINEXCH)
        fprintf(f, "SWAP   : Binary-exchange\n");
    else if (prm->swap == LP_SWAP_LONG)
        fprintf(f, "SWAP   : Spread-roll (long)\n");
    else
        fprintf(f, "SWAP   : Mix (threshold = %d)\n", prm->swap_threshold);
    fprintf(f, "L1     : %s form\n", prm->l1_notrans ? "no-transposed" : "transposed");
    fprintf(f, "U      : %s form\n", prm->u_notrans ? "no-transposed" : "transposed");
    fprintf(f, "EQUIL  : %s\n", prm->equil ? "yes" : "no");
    fprintf(f, "ALIGN  : %d double precision words\n\n%s\n\n", prm->align, DASH);
    fprintf(f, "- The matrix A is randomly generated for each test.\n"
               "- The following scaled residual check will be computed:\n"
               "      ||Ax-b||_oo / ( eps * ( || x ||_oo * || A ||_oo + || b ||_oo ) * N )\n"
               "- The relative machine precision (eps) is taken to be     %15.6e\n"
               "- Computational tests pass if scaled residuals are less than %14.1f\n\n",
            1.1102230246251565e-16, prm->threshold);
    fflush(f);
}

void lp_out_result(FILE *f, const lp_algo *a, double time_s, double gflops)
{
    char code[16];
    lp_variant_code(a, code);
    fprintf(f, "%s\nT/V                N    NB     P     Q               Time                 Gflops\n%s\n",
            RULE, DASH);
    fprintf(f, "%-10s %9d %5d %5d %5d %18.2f %22.4e\n", code, a->n, a->nb, a->p, a->q, time_s,
            gflops);
    fflush(f);
}

void lp_out_residual(FILE *f, double resid, double threshold, int passed, const double norms[4],
                     double eps)
{
    fprintf(f, "%s\n||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)= %16.8e ...... %s\n", DASH,
            resid, passed ? "PASSED" : "FAILED");
    if (!passed) {
        fprintf(f, "||Ax-b||_oo  . . . . . . . . . . . . . . . . . = %18.6e\n", norms[0]);
        fprintf(f, "||A||_oo . . . . . . . . . . . . . . . . . . . = %18.6e\n", norms[1]);
        fprintf(f, "||x||_oo . . . . . . . . . . . . . . . . . . . = %18.6e\n", norms[2]);
        fprintf(f, "||b||_oo . . . . . . . . . . . . . . . . . . . = %18.6e\n", norms[3]);
        fprintf(f, "eps  . . . . . . . . . . . . . . . . . . . . . = %18.6e\n", eps);
        fprintf(f, "threshold  . . . . . . . . . . . . . . . . . . = %18.6e\n", threshold);
    }
    fflush(f);
}

void lp_out_skip(FILE *f, const lp_algo *a, const char *reason)
{
    char code[16];
    lp_variant_code(a, code);
    fprintf(f, "%s\nSKIPPED %s N=%d NB=%d P=%d Q=%d: %s\n", DASH, code, a->n, a->nb, a->p, a->q,
            reason);
    fflush(f);
}

void lp_out_summary(FILE *f, int total, int passed, int failed, int skipped)
{
    fprintf(f, "%s\n\nFinished %6d tests with the following results:\n", RULE, total);
    fprintf(f, "         %6d tests completed and passed residual checks,\n", passed);
    fprintf(f, "         %6d tests completed and failed residual checks,\n", failed);
    fprintf(f, "         %6d tests skipped because of illegal input values.\n", skipped);
    fprintf(f, "%s\n\nEnd of Tests.\n%s\n", DASH, RULE);
    fflush(f);
}
