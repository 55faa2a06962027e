/* ct-mpi-pingpong - MPI message-size sweep (message-passing level).
 *
 *   mpirun -np 2 ct-mpi-pingpong [--mode blocking|nonblocking|bidir] [sweep options]
 *   mpirun -np N ct-mpi-pingpong --pairs-round-robin [--max-size BYTES]
 *
 * The default sweeps ranks 0 and 1 with the method of ct_sweep.h (the same sizes,
 * perturbations, repeats and statistics as ct-tcp-pingpong, so the two curves compare
 * like with like); other ranks wait. Rank 0 drives: before each trial it sends the
 * partner a command (size, repeats, seed); after the trial the partner returns the result
 * of its payload check.
 *
 * Modes and the meaning of t (the per-message time of a sample):
 *   blocking     MPI_Send / MPI_Recv ping-pong; t = round trip / 2.
 *   nonblocking  the mpptest "async" ping-pong: every receive is posted with MPI_Irecv
 *                before the matching message can arrive, sends are MPI_Isend, completion
 *                by MPI_Wait; t = round trip / 2.
 *   bidir        both ranks MPI_Isend SIZE to each other at once and wait for both; t =
 *                time of one exchange, so SIZE/t is the throughput of each direction.
 *
 * --pairs-round-robin measures every pair of ranks: n-1 rounds (n rounded up to even, the
 * odd one out sits a round out) of disjoint pairs running at the same time, the circle
 * method of round-robin tournaments. Each pair measures two sizes only: --min-size
 * (latency) and --max-size (bandwidth, default 1 MiB in this mode). Sample lines carry the
 * ranks "a" < "b", their hostnames and the round.
 *
 * Verification: the payload is a seeded pattern that changes at every point; both ends
 * check the last message of every trial. A mismatch anywhere makes the run "failed".
 * --inject-fault (for tests) makes rank 1 flip one bit of the last message of its first
 * trial before checking it, as a faulty NIC would: the run must then come out failed.
 */
#define _POSIX_C_SOURCE 200809L
#include "ct.h"
#include "ct_mpi.h"
#include "ct_sweep.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_MESSAGE (1ull << 30) /* also keeps counts within MPI's int */
#define HOST_LEN 64
#define CMD_TRIAL 1
#define CMD_STOP 2
#define BIDIR_SEED_XOR 0x9e3779b9u
#define RR_DEFAULT_MAX (1u << 20)
#define RR_SIZES 2

enum mode { MODE_BLOCKING, MODE_NONBLOCKING, MODE_BIDIR };
static const char *const mode_names[] = {"blocking", "nonblocking", "bidir", NULL};

struct pair {
    int peer;
    enum mode mode;
    unsigned char *sendbuf, *recvbuf;
    uint32_t seed; /* pattern currently in sendbuf */
    int verify_failed;
    int inject_fault; /* corrupt what the next trial received (tests) */
};

/* One timed repetition loop; identical code on both ends except who speaks first. */
static void run_repeats(struct pair *p, int count, long repeats, int driver)
{
    MPI_Request req[2];
    MPI_Status st[2]; /* not MPI_STATUSES_IGNORE: MPICH's header trips gcc's bounds check */
    for (long r = 0; r < repeats; r++) {
        switch (p->mode) {
        case MODE_BLOCKING:
            if (driver) {
                CT_MPI_CHECK(MPI_Send(p->sendbuf, count, MPI_BYTE, p->peer, CT_TAG_PINGPONG_DATA,
                                      MPI_COMM_WORLD));
                CT_MPI_CHECK(MPI_Recv(p->recvbuf, count, MPI_BYTE, p->peer, CT_TAG_PINGPONG_DATA,
                                      MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            } else {
                CT_MPI_CHECK(MPI_Recv(p->recvbuf, count, MPI_BYTE, p->peer, CT_TAG_PINGPONG_DATA,
                                      MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                CT_MPI_CHECK(MPI_Send(p->recvbuf, count, MPI_BYTE, p->peer, CT_TAG_PINGPONG_DATA,
                                      MPI_COMM_WORLD));
            }
            break;
        case MODE_NONBLOCKING:
            /* the reply's receive is posted before the request goes out */
            CT_MPI_CHECK(MPI_Irecv(p->recvbuf, count, MPI_BYTE, p->peer, CT_TAG_PINGPONG_DATA,
                                   MPI_COMM_WORLD, &req[0]));
            if (driver) {
                CT_MPI_CHECK(MPI_Isend(p->sendbuf, count, MPI_BYTE, p->peer,
                                       CT_TAG_PINGPONG_DATA, MPI_COMM_WORLD, &req[1]));
                CT_MPI_CHECK(MPI_Waitall(2, req, st));
            } else {
                CT_MPI_CHECK(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
                CT_MPI_CHECK(MPI_Isend(p->recvbuf, count, MPI_BYTE, p->peer,
                                       CT_TAG_PINGPONG_DATA, MPI_COMM_WORLD, &req[1]));
                CT_MPI_CHECK(MPI_Wait(&req[1], MPI_STATUS_IGNORE));
            }
            break;
        case MODE_BIDIR:
            CT_MPI_CHECK(MPI_Irecv(p->recvbuf, count, MPI_BYTE, p->peer, CT_TAG_PINGPONG_DATA,
                                   MPI_COMM_WORLD, &req[0]));
            CT_MPI_CHECK(MPI_Isend(p->sendbuf, count, MPI_BYTE, p->peer, CT_TAG_PINGPONG_DATA,
                                   MPI_COMM_WORLD, &req[1]));
            CT_MPI_CHECK(MPI_Waitall(2, req, st));
            break;
        }
    }
}

/* The payload this end sends: the follower's differs in bidir so each end checks data
 * that really came from the other. */
static void prepare(struct pair *p, uint64_t size, uint32_t seed, int driver)
{
    if (p->seed != seed) {
        ct_pattern_fill(p->sendbuf, size, driver ? seed : seed ^ BIDIR_SEED_XOR);
        p->seed = seed;
    }
    memset(p->recvbuf, 0, size);
}

/* The driver's trial function for ct_sweep. */
static int driver_trial(void *ctx, uint64_t size, long repeats, uint32_t seed, double *elapsed)
{
    struct pair *p = ctx;
    long long cmd[4] = {CMD_TRIAL, (long long)size, repeats, seed};
    CT_MPI_CHECK(MPI_Send(cmd, 4, MPI_LONG_LONG, p->peer, CT_TAG_PINGPONG_CMD, MPI_COMM_WORLD));
    prepare(p, size, seed, 1);
    /* the partner's buffer preparation must not land in the timed interval */
    int ready;
    CT_MPI_CHECK(MPI_Recv(&ready, 1, MPI_INT, p->peer, CT_TAG_PINGPONG_STATUS, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE));
    double t0 = ct_now();
    run_repeats(p, (int)size, repeats, 1);
    *elapsed = ct_now() - t0;
    ct_pattern_corrupt_once(p->recvbuf, size, &p->inject_fault);
    int peer_ok = 0;
    CT_MPI_CHECK(MPI_Recv(&peer_ok, 1, MPI_INT, p->peer, CT_TAG_PINGPONG_STATUS, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE));
    int ok = peer_ok && (p->mode == MODE_BIDIR
                             ? ct_pattern_check(p->recvbuf, size, seed ^ BIDIR_SEED_XOR)
                             : memcmp(p->recvbuf, p->sendbuf, size) == 0);
    if (!ok && !p->verify_failed)
        fprintf(stderr, "ct-mpi-pingpong: payload verification failed at %llu bytes\n",
                (unsigned long long)size);
    p->verify_failed |= !ok;
    return 0; /* MPI faults abort the job (CT_MPI_CHECK) */
}

static void driver_stop(struct pair *p)
{
    long long cmd[4] = {CMD_STOP, 0, 0, 0};
    CT_MPI_CHECK(MPI_Send(cmd, 4, MPI_LONG_LONG, p->peer, CT_TAG_PINGPONG_CMD, MPI_COMM_WORLD));
}

/* The partner obeys commands until told to stop. */
static void follow(struct pair *p)
{
    for (;;) {
        long long cmd[4];
        CT_MPI_CHECK(MPI_Recv(cmd, 4, MPI_LONG_LONG, p->peer, CT_TAG_PINGPONG_CMD, MPI_COMM_WORLD,
                              MPI_STATUS_IGNORE));
        if (cmd[0] != CMD_TRIAL)
            return;
        uint64_t size = (uint64_t)cmd[1];
        uint32_t seed = (uint32_t)cmd[3];
        prepare(p, size, seed, 0);
        int ready = 1;
        CT_MPI_CHECK(
            MPI_Send(&ready, 1, MPI_INT, p->peer, CT_TAG_PINGPONG_STATUS, MPI_COMM_WORLD));
        run_repeats(p, (int)size, (long)cmd[2], 0);
        ct_pattern_corrupt_once(p->recvbuf, size, &p->inject_fault);
        int ok = ct_pattern_check(p->recvbuf, size, seed);
        p->verify_failed |= !ok;
        CT_MPI_CHECK(MPI_Send(&ok, 1, MPI_INT, p->peer, CT_TAG_PINGPONG_STATUS, MPI_COMM_WORLD));
    }
}

/* ---- all pairs ---------------------------------------------------------------------- */

struct pair_result {
    int a, b; /* a < 0: this rank drove no pair this round */
    int npoints;
    ct_sweep_point points[RR_SIZES];
};

/* Partner of `rank` in round r of the circle method over m (even) slots; slot m-1 stays
 * put while the others rotate. A partner >= n is the bye of an odd rank count. */
static int circle_partner(int rank, int r, int m)
{
    int k = m - 1;
    if (rank == k)
        return r;
    if (rank == r)
        return k;
    return ((2 * r - rank) % k + k) % k;
}

static int run_round_robin(struct pair *p, const ct_sweep_opts *o, int rank, int n,
                           const char *hosts)
{
    int m = n + (n % 2), rounds = m - 1;
    uint64_t sizes[RR_SIZES] = {o->min_size, o->max_size};
    struct pair_result mine, *all = NULL;
    if (rank == 0)
        all = ct_mpi_alloc((size_t)n * sizeof *all, "the table of pair results");
    for (int r = 0; r < rounds; r++) {
        memset(&mine, 0, sizeof mine);
        mine.a = -1;
        int partner = circle_partner(rank, r, m);
        if (partner < n) {
            p->peer = partner;
            p->seed = 0;
            if (rank < partner) {
                mine.a = rank;
                mine.b = partner;
                for (int s = 0; s < RR_SIZES; s++) {
                    double est = 0; /* sizes are far apart: calibrate each */
                    uint64_t est_size = 0;
                    ct_sweep_measure(o, &(ct_sweep_transport){driver_trial, p, 2}, sizes[s],
                                     (uint32_t)(r * RR_SIZES + s + 1) * 2654435761u, &est,
                                     &est_size, &mine.points[mine.npoints++]);
                }
                driver_stop(p);
            } else {
                follow(p);
            }
        }
        CT_MPI_CHECK(MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine,
                                MPI_BYTE, 0, MPI_COMM_WORLD));
        for (int q = 0; rank == 0 && q < n; q++) {
            for (int s = 0; s < all[q].npoints && all[q].a >= 0; s++) {
                ct_json j;
                ct_json_start(&j, stdout, "sample");
                ct_json_integer(&j, "a", all[q].a);
                ct_json_integer(&j, "b", all[q].b);
                ct_json_string(&j, "host_a", hosts + (size_t)all[q].a * HOST_LEN);
                ct_json_string(&j, "host_b", hosts + (size_t)all[q].b * HOST_LEN);
                ct_json_integer(&j, "round", r);
                ct_sweep_json_point(&j, &all[q].points[s]);
                ct_json_end(&j);
            }
        }
    }
    free(all);
    return rounds;
}

/* ---- command line and main ---------------------------------------------------------- */

static void usage(void)
{
    printf("usage: mpirun -np N ct-mpi-pingpong [options]\n"
           "  --mode blocking|nonblocking|bidir  (default blocking)\n"
           "  --pairs-round-robin     every pair of ranks, n-1 rounds of disjoint pairs;\n"
           "                          sizes --min-size and --max-size (default 1M) only\n"
           "%s",
           ct_sweep_usage);
}

typedef struct {
    int mode, round_robin;
    ct_sweep_opts sweep;
} options;

/* Returns 0, or -1 with the one line in err. */
static int parse_args(int argc, char **argv, options *o, char *err, size_t errlen)
{
    o->mode = MODE_BLOCKING;
    o->round_robin = 0;
    ct_sweep_defaults(&o->sweep);
    ct_opt sweep[CT_SWEEP_NOPTS];
    ct_sweep_options(&o->sweep, sweep);
    const ct_opt table[] = {
        {"--mode", CT_OPT_CHOICE, .dest = &o->mode, .choices = mode_names},
        {"--pairs-round-robin", CT_OPT_FLAG, .dest = &o->round_robin},
        {NULL, CT_OPT_TABLE, .table = sweep},
        {.type = CT_OPT_END},
    };
    int bad = ct_opt_parse(table, argc, argv, err, errlen) != 0;
    if (o->round_robin && !o->sweep.max_size_given)
        o->sweep.max_size = RR_DEFAULT_MAX;
    return bad || ct_sweep_validate(&o->sweep, MAX_MESSAGE, ct_basename(argv[0]), err, errlen)
               ? -1
               : 0;
}

static int check_ranks(void *opts, int np, const char *prog, char *err, size_t errlen)
{
    (void)opts;
    if (np >= 2)
        return 0;
    snprintf(err, errlen, "%s: needs at least 2 ranks, got %d", prog, np);
    return -1;
}

struct run {
    enum mode mode;
    int round_robin, rounds;
    const char *hosts;
    double wall;
};

static void result_detail(ct_json *j, const void *arg)
{
    const struct run *r = arg;
    ct_json_string(j, "mode", r->round_robin ? "pairs-round-robin" : mode_names[r->mode]);
    if (r->round_robin)
        ct_json_integer(j, "rounds", r->rounds);
    else {
        ct_json_string(j, "host_a", r->hosts);
        ct_json_string(j, "host_b", r->hosts + HOST_LEN);
    }
    ct_json_number(j, "sweep_wall_s", r->wall);
}

int main(int argc, char **argv)
{
    options opt;
    char err[512];
    int bad = parse_args(argc, argv, &opt, err, sizeof err) != 0;
    int rank, n;
    ct_mpi_start_args start = {.parse_failed = bad, .help = opt.sweep.help, .usage = usage,
                               .check = check_ranks, .opts = &opt, .err = err,
                               .errlen = sizeof err};
    int status = ct_mpi_start(&start, &argc, &argv, &rank, &n);
    if (status != CT_MPI_RUN)
        return status;
    enum mode mode = (enum mode)opt.mode;
    int round_robin = opt.round_robin;
    const ct_sweep_opts o = opt.sweep;

    char *hosts = ct_mpi_alloc((size_t)n * HOST_LEN, "the table of host names");
    char host[HOST_LEN] = "";
    gethostname(host, HOST_LEN - 1);
    CT_MPI_CHECK(
        MPI_Allgather(host, HOST_LEN, MPI_CHAR, hosts, HOST_LEN, MPI_CHAR, MPI_COMM_WORLD));
    struct pair p = {.mode = round_robin ? MODE_BLOCKING : mode,
                     .inject_fault = o.inject_fault && rank == 1};
    ct_alloc_failure f = {0};
    p.sendbuf = ct_mpi_try_alloc(&f, o.max_size, "the send buffer");
    p.recvbuf = ct_mpi_try_alloc(&f, o.max_size, "the receive buffer");
    ct_mpi_agree(MPI_COMM_WORLD, &f);

    CT_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double began = ct_now();
    struct run run = {.mode = mode, .round_robin = round_robin, .hosts = hosts};
    if (round_robin) {
        run.rounds = run_round_robin(&p, &o, rank, n, hosts);
    } else if (rank == 0) {
        p.peer = 1;
        ct_sweep_transport t = {driver_trial, &p, mode == MODE_BIDIR ? 1 : 2};
        ct_sweep_run(&o, &t, ct_sweep_emit_sample, NULL);
        driver_stop(&p);
    } else if (rank == 1) {
        p.peer = 0;
        follow(&p);
    }
    run.wall = ct_now() - began;

    int failed = 0;
    CT_MPI_CHECK(
        MPI_Reduce(&p.verify_failed, &failed, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD));
    ct_mpi_result(failed ? "failed" : "passed", NULL, result_detail, &run);
    free(hosts);
    free(p.sendbuf);
    free(p.recvbuf);
    CT_MPI_CHECK(MPI_Finalize());
    return failed ? 1 : 0;
}
