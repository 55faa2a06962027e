/* finalize_shim - LD_PRELOAD work-around for the MPICH 4.0 + UCX 1.13 TCP finalize hang
 * (openucx/ucx#8738): synchronise, flush, tell the process manager this rank finalized,
 * and leave without tearing down UCX endpoints.
 * Kernels therefore must have closed their files before MPI_Finalize.
 *
 * The process manager must hear "finalize" before the rank's PMI socket closes: hydra's
 * proxy takes a PMI socket closed without it for a dead rank and kills the job's other
 * local ranks, and under load that race turned a verified run into a failed one
 * ("BAD TERMINATION ... EXIT CODE: 1" after the result was printed).
 *
 * MPI_Finalize returns, so that the rank's exit status is still what main returns (or
 * what it passes to exit): a failed verification must fail the job. The teardown that
 * hangs is skipped by an on_exit handler that leaves with that status before any other
 * exit handler or library destructor (UCX's among them) runs. */
#define _DEFAULT_SOURCE /* on_exit */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* PMI-1 wire protocol (what MPICH speaks to hydra here, seen with strace): one
 * "cmd=finalize" line, answered by one "cmd=finalize_ack" line. */
static void pmi_finalize(void)
{
    const char *fd_text = getenv("PMI_FD");
    if (fd_text == NULL)
        return; /* a singleton, or a process manager without a PMI socket */
    int fd = atoi(fd_text);
    static const char request[] = "cmd=finalize\n";
    const size_t length = sizeof request - 1;
    if (write(fd, request, length) != (ssize_t)length)
        return;
    char c;
    while (read(fd, &c, 1) == 1 && c != '\n')
        ; /* the answer's text does not matter: only that the manager has read ours */
}

/* Registered last, so run first by exit(): the status is main's return value or exit's
 * argument. */
static void leave_with(int status, void *unused)
{
    (void)unused;
    fflush(NULL);
    _exit(status);
}

int MPI_Finalize(void)
{
    PMPI_Barrier(MPI_COMM_WORLD);
    fflush(NULL);
    pmi_finalize();
    if (on_exit(leave_with, NULL) != 0)
        _exit(EXIT_FAILURE); /* cannot keep the status: never report a success we cannot vouch for */
    return MPI_SUCCESS;
}
