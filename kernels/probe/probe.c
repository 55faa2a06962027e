/* probe - proves the launch chain: every rank reports its rank, host and MPI library.
 *
 * Verification: the gathered ranks must be 0..size-1 exactly once and an allreduce of
 * the ranks must equal size*(size-1)/2; anything else means the job is not one
 * MPI_COMM_WORLD and is reported as failed. --hang (tests) keeps rank 0 waiting forever
 * after the collectives, for the launchers' timeout handling. */
#define _POSIX_C_SOURCE 200809L
#include "ct.h"
#include "ct_mpi.h"
#include "ct_opt.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIELD 256

struct rank_info {
    int rank;
    char host[FIELD];      /* gethostname(): the virtual host inside a vcluster */
    char processor[FIELD]; /* MPI_Get_processor_name() */
    char library[FIELD];   /* first line of MPI_Get_library_version() */
};

struct summary {
    int size, version, subversion;
    long long rank_sum;
};

static void figures(ct_json *j, const void *arg)
{
    ct_json_integer(j, "ranks", ((const struct summary *)arg)->size);
}

static void detail(ct_json *j, const void *arg)
{
    const struct summary *s = arg;
    ct_json_integer(j, "mpi_version", s->version);
    ct_json_integer(j, "mpi_subversion", s->subversion);
    ct_json_integer(j, "rank_sum", s->rank_sum);
}

static void usage(void)
{
    printf("usage: mpirun -np N ct-probe [--hang]\n");
}

int main(int argc, char **argv)
{
    int hang = 0, help = 0;
    const ct_opt table[] = {
        {"--hang", CT_OPT_FLAG, .dest = &hang},
        {"--help", CT_OPT_FLAG, .dest = &help},
        {.type = CT_OPT_END},
    };
    char err[512];
    int bad = ct_opt_parse(table, argc, argv, err, sizeof err) != 0;
    int rank, size;
    ct_mpi_start_args start = {.parse_failed = bad, .help = help, .usage = usage,
                               .err = err, .errlen = sizeof err};
    int status = ct_mpi_start(&start, &argc, &argv, &rank, &size);
    if (status != CT_MPI_RUN)
        return status;

    struct rank_info mine;
    memset(&mine, 0, sizeof mine);
    mine.rank = rank;
    gethostname(mine.host, FIELD - 1);
    int len = 0;
    CT_MPI_CHECK(MPI_Get_processor_name(mine.processor, &len));
    ct_mpi_library(mine.library, FIELD);

    struct rank_info *all = NULL;
    if (rank == 0)
        all = ct_mpi_alloc((size_t)size * sizeof *all, "the table of ranks");
    CT_MPI_CHECK(MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                            0, MPI_COMM_WORLD));
    long long my_rank = rank;
    struct summary s = {.size = size};
    CT_MPI_CHECK(
        MPI_Allreduce(&my_rank, &s.rank_sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));

    if (hang && rank == 0)
        for (;;)
            pause();

    int ok = s.rank_sum == (long long)size * (size - 1) / 2;
    if (rank == 0) {
        CT_MPI_CHECK(MPI_Get_version(&s.version, &s.subversion));
        for (int r = 0; r < size; r++) {
            ok = ok && all[r].rank == r;
            ct_json j;
            ct_json_start(&j, stdout, "sample");
            ct_json_integer(&j, "rank", all[r].rank);
            ct_json_string(&j, "host", all[r].host);
            ct_json_string(&j, "processor", all[r].processor);
            ct_json_string(&j, "library", all[r].library);
            ct_json_end(&j);
        }
        free(all);
    }
    ct_mpi_result(ok ? "passed" : "failed", figures, detail, &s);
    CT_MPI_CHECK(MPI_Finalize());
    return 0;
}
