/* probe - proves the launch chain: every rank reports its rank, host and MPI library.
 *
 * Verification: the gathered ranks must be 0..size-1 exactly once and an allreduce of
 * the ranks must equal size*(size-1)/2; anything else means the job is not one
 * MPI_COMM_WORLD and is reported as failed. */
#define _POSIX_C_SOURCE 200809L
#include "ct.h"

#include <mpi.h>
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

static void first_line(char *text)
{
    text[strcspn(text, "\r\n")] = '\0';
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int hang = argc > 1 && strcmp(argv[1], "--hang") == 0;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    struct rank_info mine;
    memset(&mine, 0, sizeof mine);
    mine.rank = rank;
    gethostname(mine.host, FIELD - 1);
    int len = 0;
    MPI_Get_processor_name(mine.processor, &len);
    char library[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(library, &len);
    first_line(library);
    memcpy(mine.library, library, strnlen(library, FIELD - 1)); /* mine is zeroed */

    struct rank_info *all = NULL;
    if (rank == 0)
        all = calloc((size_t)size, sizeof *all);
    MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0,
               MPI_COMM_WORLD);
    long long rank_sum = 0, my_rank = rank;
    MPI_Allreduce(&my_rank, &rank_sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

    if (hang && rank == 0)
        for (;;)
            pause();

    if (rank == 0) {
        int version, subversion;
        MPI_Get_version(&version, &subversion);
        int ok = rank_sum == (long long)size * (size - 1) / 2;
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
        ct_json j;
        ct_json_start(&j, stdout, "result");
        ct_json_string(&j, "verification", ok ? "passed" : "failed");
        ct_json_open_object(&j, "figures");
        ct_json_integer(&j, "ranks", size);
        ct_json_close_object(&j);
        ct_json_open_object(&j, "detail");
        ct_json_integer(&j, "mpi_version", version);
        ct_json_integer(&j, "mpi_subversion", subversion);
        ct_json_integer(&j, "rank_sum", rank_sum);
        ct_json_close_object(&j);
        ct_json_end(&j);
        free(all);
    }
    MPI_Finalize();
    return 0;
}
