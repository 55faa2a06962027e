/* lp_blas.c - BLAS through its Fortran interface.
 *
 * Why Fortran symbols and not CBLAS: every Debian BLAS alternative (OpenBLAS, BLIS,
 * ATLAS, reference) provides dgemm_ & co. in libblas.so.3, while cblas_* is missing from
 * some of them. Linking the generic libblas.so.3 lets update-alternatives or
 * LD_LIBRARY_PATH pick the library at run time; lp_blas_json() records which one did.
 * Character arguments carry the hidden length that gfortran-built libraries expect. */
#define _GNU_SOURCE
#include "lp.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef size_t flen;
extern void dgemm_(const char *, const char *, const int *, const int *, const int *,
                   const double *, const double *, const int *, const double *, const int *,
                   const double *, double *, const int *, flen, flen);
extern void dtrsm_(const char *, const char *, const char *, const char *, const int *,
                   const int *, const double *, const double *, const int *, double *,
                   const int *, flen, flen, flen, flen);
extern void dger_(const int *, const int *, const double *, const double *, const int *,
                  const double *, const int *, double *, const int *);
extern void dgemv_(const char *, const int *, const int *, const double *, const double *,
                   const int *, const double *, const int *, const double *, double *,
                   const int *, flen);
extern void dtrsv_(const char *, const char *, const char *, const int *, const double *,
                   const int *, double *, const int *, flen, flen, flen);
extern void dscal_(const int *, const double *, double *, const int *);
extern int idamax_(const int *, const double *, const int *);
extern void dswap_(const int *, double *, const int *, double *, const int *);

void lp_dgemm(char ta, char tb, int m, int n, int k, double alpha, const double *a, int lda,
              const double *b, int ldb, double beta, double *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0 && beta == 1.0)
        return;
    dgemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
}

void lp_dtrsm(char side, char uplo, char ta, char diag, int m, int n, double alpha,
              const double *a, int lda, double *b, int ldb)
{
    if (m <= 0 || n <= 0)
        return;
    dtrsm_(&side, &uplo, &ta, &diag, &m, &n, &alpha, a, &lda, b, &ldb, 1, 1, 1, 1);
}

void lp_dger(int m, int n, double alpha, const double *x, int incx, const double *y, int incy,
             double *a, int lda)
{
    if (m <= 0 || n <= 0)
        return;
    dger_(&m, &n, &alpha, x, &incx, y, &incy, a, &lda);
}

void lp_dgemv(char ta, int m, int n, double alpha, const double *a, int lda, const double *x,
              int incx, double beta, double *y, int incy)
{
    int ylen = (ta == 'N') ? m : n;
    if (ylen <= 0)
        return;
    if ((ta == 'N' ? n : m) <= 0) {
        if (beta != 1.0)
            for (int i = 0; i < ylen; i++)
                y[(size_t)i * (size_t)incy] *= beta;
        return;
    }
    dgemv_(&ta, &m, &n, &alpha, a, &lda, x, &incx, &beta, y, &incy, 1);
}

void lp_dtrsv(char uplo, char ta, char diag, int n, const double *a, int lda, double *x, int incx)
{
    if (n <= 0)
        return;
    dtrsv_(&uplo, &ta, &diag, &n, a, &lda, x, &incx, 1, 1, 1);
}

void lp_dscal(int n, double alpha, double *x, int incx)
{
    if (n <= 0)
        return;
    dscal_(&n, &alpha, x, &incx);
}

int lp_idamax(int n, const double *x, int incx)
{
    if (n <= 0)
        return -1;
    return idamax_(&n, x, &incx) - 1;
}

void lp_dswap(int n, double *x, int incx, double *y, int incy)
{
    if (n <= 0)
        return;
    dswap_(&n, x, &incx, y, &incy);
}

typedef struct {
    char library[512]; /* shared object that provides dgemm_ */
    char core[64];     /* OpenBLAS core name, or "" */
    char config[256];  /* OpenBLAS/BLIS configuration string, or "" */
} blas_info;

static void identify(blas_info *info)
{
    memset(info, 0, sizeof *info);
    Dl_info dl;
    if (dladdr((void *)dgemm_, &dl) && dl.dli_fname) {
        /* resolve symlinks such as the Debian alternatives chain */
        char *real = realpath(dl.dli_fname, NULL);
        snprintf(info->library, sizeof info->library, "%s", real ? real : dl.dli_fname);
        free(real);
    }
    char *(*corename)(void) = (char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_corename");
    char *(*config)(void) = (char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_config");
    if (corename)
        snprintf(info->core, sizeof info->core, "%s", corename());
    if (config)
        snprintf(info->config, sizeof info->config, "%s", config());
    if (!config) {
        const char *(*blis)(void) =
            (const char *(*)(void))dlsym(RTLD_DEFAULT, "bli_info_get_version_str");
        const char *(*blis_arch)(int) = (const char *(*)(int))dlsym(RTLD_DEFAULT, "bli_arch_string");
        int (*blis_query)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "bli_arch_query_id");
        if (blis)
            snprintf(info->config, sizeof info->config, "BLIS %s", blis());
        if (blis_arch && blis_query)
            snprintf(info->core, sizeof info->core, "%s", blis_arch(blis_query()));
    }
}

void lp_blas_json(ct_json *j)
{
    blas_info bi;
    identify(&bi);
    const char *core = getenv("OPENBLAS_CORETYPE"), *threads = getenv("OPENBLAS_NUM_THREADS");
    ct_json_open_object(j, "blas");
    ct_json_string(j, "library", bi.library);
    ct_json_string(j, "core", bi.core);
    ct_json_string(j, "config", bi.config);
    ct_json_string(j, "openblas_coretype_env", core ? core : "");
    ct_json_string(j, "openblas_num_threads_env", threads ? threads : "");
    ct_json_close_object(j);
}
