/* ct-tcp-pingpong - raw TCP message-size sweep between two hosts (network level).
 *
 *   server: ct-tcp-pingpong --server --port P            accepts one client, serves its test
 *   client: ct-tcp-pingpong --connect HOST:PORT [...]    drives the sweep, writes the samples
 *
 * The client decides everything (mode, sizes, repeats, Nagle, socket buffers) and tells the
 * server in a small handshake, then sends one header per timed trial, which the server
 * answers with a ready byte once its buffers are prepared; the server only obeys. The timing method (sizes, perturbations, repeats, statistics) is the shared one of
 * ct_sweep.h, identical to ct-mpi-pingpong's.
 *
 * What t (the per-message time of a sample) means in each mode:
 *   pingpong  client sends SIZE, server echoes it back; t = round trip / 2.
 *   stream    client sends R messages back to back, the server answers the last one with
 *             a 1-byte ack as soon as it has arrived; t = (time to the ack) / R, i.e. the
 *             per-message cost of a saturated one-way stream with one ack round trip
 *             amortised over R. The server checks the payload after the ack, not before,
 *             so the check (a pass over SIZE bytes) is not timed.
 *   bidir     both ends send SIZE at the same moment and each waits for the other's; t =
 *             time of one such exchange, so SIZE/t is the throughput of EACH direction
 *             while the other is loaded too (aggregate = 2*SIZE/t).
 *
 * How an end waits for data (--wait, chosen by the client, obeyed by the server):
 *   block     blocking send()/recv(): the process sleeps until data arrive and pays a
 *             wake-up per message (what NetPIPE's NPtcp does; the default).
 *   poll      non-blocking send()/recv() (MSG_DONTWAIT) retried in a spin loop, never
 *             sleeping: the way MPI progress engines wait (MPICH/UCX spins on
 *             epoll_wait(0), OpenMPI on poll(0)), so MPI over TCP is compared with the TCP
 *             layer measured the same way. Needs a core per end: two spinning ends on one
 *             core pay a scheduler tick per message.
 *
 * Verification: the payload is a seeded pattern that changes at every point. After each
 * trial the client compares the last echo (pingpong) or the server's pattern (bidir) and
 * the server checks the last message it received and reports the result in its
 * end-of-trial status byte, which the client reads after stopping the clock in every
 * mode. Any mismatch makes the run "failed". The server's --inject-fault
 * (for tests) flips one bit of the last message of its first trial before checking it,
 * as a faulty NIC would: the run must then come out failed.
 *
 * TCP's own view of the connection (TCP_INFO, read by each end before it closes) goes in
 * its result's detail.tcp_info: retransmitted segments, segments the stack thinks lost,
 * the smoothed RTT and its variance, reordering seen. A marginal cable shows there as
 * retransmissions long before a throughput curve shows it as a dip.
 */
#define _GNU_SOURCE
#include "ct.h"
#include "ct_sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with the counters glibc's copy lacks */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_MESSAGE (1ull << 30) /* 1 GiB: two buffers of this size on each end */
#define MAGIC 0x43545450u        /* "CTTP" */
#define PROTOCOL 3 /* 2: the hello carries the wait method; 3: stream acks, then checks */
#define CMD_TRIAL 1u
#define CMD_BYE 2u
#define BIDIR_SEED_XOR 0x9e3779b9u /* the server's payload differs from the client's */

enum mode { MODE_PINGPONG, MODE_STREAM, MODE_BIDIR };
static const char *const mode_names[] = {"pingpong", "stream", "bidir", NULL};
enum wait { WAIT_BLOCK, WAIT_POLL };
static const char *const wait_names[] = {"block", "poll", NULL};
#define HELLO_BYTES 40

struct options {
    int server;
    const char *connect; /* HOST:PORT */
    long port;
    enum mode mode;
    enum wait wait;
    int nodelay;
    uint64_t sockbuf; /* 0 = system default */
    double connect_timeout, accept_timeout, io_timeout;
    ct_sweep_opts sweep;
};

struct conn {
    int fd;
    const char *peer; /* for messages */
    enum mode mode;
    unsigned char *sendbuf, *recvbuf;
    uint32_t seed; /* pattern currently in sendbuf */
    int verify_failed;
    int nagle; /* Nagle's algorithm left on for the payload */
    int poll;  /* busy-poll with MSG_DONTWAIT instead of sleeping in send/recv */
    int inject_fault; /* server: corrupt the next trial's last message (tests) */
    double io_timeout;
};

/* ---- byte order and exact I/O --------------------------------------------------------- */

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (24 - 8 * i));
}
static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}
static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint64_t get64(const unsigned char *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

/* Fills in why the last I/O call failed, for the error line. */
static const char *io_reason(ssize_t n)
{
    if (n == 0)
        return "connection closed by peer";
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return "timed out waiting for peer";
    return strerror(errno);
}

/* --wait poll: a call that found nothing to do. Returns 1 to retry at once, 0 once the
 * peer has been silent for the I/O timeout (errno = EAGAIN: "timed out"). The clock is
 * read every 4096 empty calls only, so the spin costs one syscall per try. */
static int spin_again(struct conn *c, ssize_t n, unsigned *spins, double *since)
{
    if (!c->poll || n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
        return 0;
    if ((++*spins & 4095u) == 0) {
        double now = ct_now();
        if (*since == 0)
            *since = now;
        else if (now - *since > c->io_timeout)
            return 0;
    }
    return 1;
}

static int send_all(struct conn *c, const unsigned char *buf, uint64_t len)
{
    unsigned spins = 0;
    double since = 0;
    int flags = MSG_NOSIGNAL | (c->poll ? MSG_DONTWAIT : 0);
    while (len > 0) {
        ssize_t n = send(c->fd, buf, len, flags);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            if (spin_again(c, n, &spins, &since))
                continue;
            ct_report_error("send to %s failed: %s", c->peer, io_reason(n < 0 ? -1 : 0));
            return -1;
        }
        buf += n;
        len -= (uint64_t)n;
    }
    return 0;
}

static int recv_all(struct conn *c, unsigned char *buf, uint64_t len)
{
    unsigned spins = 0;
    double since = 0;
    int flags = c->poll ? MSG_DONTWAIT : 0;
    while (len > 0) {
        ssize_t n = recv(c->fd, buf, len, flags);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            if (spin_again(c, n, &spins, &since))
                continue;
            ct_report_error("receive from %s failed: %s", c->peer, io_reason(n));
            return -1;
        }
        buf += n;
        len -= (uint64_t)n;
    }
    return 0;
}

/* Control bytes (trial header, ready, status/ack) go out at once even with Nagle on:
 * otherwise each would wait for the delayed ACK of the payload before it (40 ms on Linux)
 * and the sweep would measure our protocol instead of Nagle's effect on the payload.
 * Setting TCP_NODELAY pushes whatever is queued. */
static int send_control(struct conn *c, const unsigned char *buf, uint64_t len)
{
    int on = 1, off = 0;
    if (c->nagle)
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    int rc = send_all(c, buf, len);
    if (c->nagle)
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &off, sizeof off);
    return rc;
}

/* Sends and receives `len` bytes at the same time: blocking calls in sequence would
 * deadlock once both directions fill their socket buffers. */
static int exchange(struct conn *c, const unsigned char *out, unsigned char *in, uint64_t len)
{
    uint64_t sent = 0, got = 0;
    unsigned spins = 0;
    double since = 0;
    while (sent < len || got < len) {
        int progress = 0;
        if (sent < len) {
            ssize_t n = send(c->fd, out + sent, len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) {
                sent += (uint64_t)n;
                progress = 1;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                ct_report_error("send to %s failed: %s", c->peer, strerror(errno));
                return -1;
            }
        }
        if (got < len) {
            ssize_t n = recv(c->fd, in + got, len - got, MSG_DONTWAIT);
            if (n > 0) {
                got += (uint64_t)n;
                progress = 1;
            } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                ct_report_error("receive from %s failed: %s", c->peer, io_reason(n));
                return -1;
            }
        }
        if (progress) {
            since = 0;
            continue;
        }
        if (c->poll) { /* --wait poll: retry at once; errno is EAGAIN here */
            if (spin_again(c, -1, &spins, &since))
                continue;
            ct_report_error("exchange with %s timed out after %g s", c->peer, c->io_timeout);
            return -1;
        }
        struct pollfd p = {c->fd, (short)((sent < len ? POLLOUT : 0) | (got < len ? POLLIN : 0)),
                           0};
        int r = poll(&p, 1, (int)(c->io_timeout * 1000));
        if (r == 0) {
            ct_report_error("exchange with %s timed out after %g s", c->peer, c->io_timeout);
            return -1;
        }
    }
    return 0;
}

/* ---- socket set-up ------------------------------------------------------------------ */

static int set_timeouts(int fd, double seconds)
{
    struct timeval tv = {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
    return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) |
           setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static void set_sockbuf(int fd, uint64_t bytes)
{
    if (bytes == 0)
        return;
    int v = bytes > (uint64_t)INT32_MAX ? INT32_MAX : (int)bytes;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
}

static void get_sockbuf(int fd, uint64_t *snd, uint64_t *rcv)
{
    int v = 0;
    socklen_t len = sizeof v;
    *snd = getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &len) == 0 ? (uint64_t)v : 0;
    len = sizeof v;
    *rcv = getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 ? (uint64_t)v : 0;
}

/* detail.tcp_info of the result line; nothing when the kernel cannot say */
static void emit_tcp_info(ct_json *j, int fd)
{
    struct tcp_info info;
    socklen_t len = sizeof info;
    memset(&info, 0, sizeof info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0)
        return;
    ct_json_open_object(j, "tcp_info");
    ct_json_integer(j, "total_retrans", info.tcpi_total_retrans);
    ct_json_integer(j, "data_segs_out", info.tcpi_data_segs_out);
    ct_json_integer(j, "dsack_dups", info.tcpi_dsack_dups); /* retransmissions not needed */
    ct_json_integer(j, "lost", info.tcpi_lost);
    ct_json_integer(j, "rtt_us", info.tcpi_rtt);
    ct_json_integer(j, "rttvar_us", info.tcpi_rttvar);
    ct_json_integer(j, "reordering", info.tcpi_reordering);
    ct_json_integer(j, "snd_mss", info.tcpi_snd_mss);
    ct_json_close_object(j);
}

static void set_nodelay(int fd, int on)
{
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

static int alloc_buffers(struct conn *c, uint64_t max_size)
{
    c->sendbuf = malloc(max_size);
    c->recvbuf = malloc(max_size);
    if (!c->sendbuf || !c->recvbuf)
        return -1;
    c->seed = 0;
    return 0;
}

/* Splits "host:port" or "[v6addr]:port" in place. */
static int split_hostport(char *text, char **host, char **port)
{
    char *colon = strrchr(text, ':');
    if (!colon || colon == text || colon[1] == '\0')
        return -1;
    *colon = '\0';
    *port = colon + 1;
    *host = text;
    size_t n = strlen(text);
    if (text[0] == '[' && n > 2 && text[n - 1] == ']') {
        text[n - 1] = '\0';
        *host = text + 1;
    }
    return 0;
}

/* One non-blocking connect attempt bounded by `remaining` seconds; returns the fd, or -1
 * with errno set (ETIMEDOUT when the peer never answered). */
static int connect_once(const struct addrinfo *ai, const struct options *o, double remaining)
{
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0)
        return -1;
    set_sockbuf(fd, o->sockbuf); /* before connect, so the window scale can fit it */
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int err = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            struct pollfd p = {fd, POLLOUT, 0};
            int r = poll(&p, 1, (int)(remaining * 1000) + 1);
            socklen_t len = sizeof err;
            if (r == 0)
                err = ETIMEDOUT;
            else if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
                err = errno;
        }
    }
    if (err != 0) {
        close(fd);
        errno = err;
        return -1;
    }
    fcntl(fd, F_SETFL, flags);
    return fd;
}

/* Each connect attempt is one SYN, bounded by CONNECT_ATTEMPT_S (doubling per attempt up
 * to CONNECT_ATTEMPT_MAX_S) plus a random part of it; then a new attempt sends a new SYN.
 * Left to itself the kernel resends a lost SYN after 1, 3 and 7 s: on a link going down
 * 300 ms of every second (a flapping port) each resend fell into a down window, and the
 * matrix's connects into that host waited out their whole 10 s. The random part keeps the
 * attempts off the period of any flap. A SYN-ACK takes well under a millisecond on a LAN
 * and the peer's kernel answers it without waiting for the server process. */
#define CONNECT_ATTEMPT_S 0.5
#define CONNECT_ATTEMPT_MAX_S 2.0

/* Connects within the time limit, retrying while the peer refuses (its server may still
 * be starting), is unreachable or does not answer. Returns the fd or -1 after writing the
 * error line. */
static int connect_peer(const struct options *o)
{
    char spec[512];
    snprintf(spec, sizeof spec, "%s", o->connect);
    char *host, *port;
    if (split_hostport(spec, &host, &port) != 0) {
        ct_report_error("--connect wants HOST:PORT, got '%s'", o->connect);
        return -1;
    }
    struct addrinfo hints = {0}, *res;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        ct_report_error("cannot resolve %s: %s", o->connect, gai_strerror(gai));
        return -1;
    }
    double deadline = ct_now() + o->connect_timeout, attempt_s = CONNECT_ATTEMPT_S;
    unsigned seed = (unsigned)getpid() ^ (unsigned)(ct_now() * 1e6);
    int fd = -1, err = ETIMEDOUT;
    while (fd < 0) {
        for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
            double remaining = deadline - ct_now();
            if (remaining <= 0)
                break;
            double bound = attempt_s * (1.0 + (double)rand_r(&seed) / RAND_MAX);
            fd = connect_once(ai, o, remaining < bound ? remaining : bound);
            if (fd < 0)
                err = errno;
        }
        if (fd >= 0 || ct_now() + 0.05 >= deadline)
            break;
        if (err == ETIMEDOUT) { /* no answer: a new SYN at once, the next attempt longer */
            attempt_s = 2 * attempt_s < CONNECT_ATTEMPT_MAX_S ? 2 * attempt_s
                                                              : CONNECT_ATTEMPT_MAX_S;
            continue;
        }
        if (err != ECONNREFUSED && err != EHOSTUNREACH && err != ENETUNREACH)
            break;
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    freeaddrinfo(res);
    if (fd < 0)
        ct_report_error("cannot connect to %s within %g s: %s", o->connect, o->connect_timeout,
                        strerror(err));
    return fd;
}

/* ---- client: the trial function of the sweep ------------------------------------------ */

static int client_trial(void *ctx, uint64_t size, long repeats, uint32_t seed, double *elapsed)
{
    struct conn *c = ctx;
    if (c->seed != seed) { /* new point: fresh pattern out, nothing stale in */
        ct_pattern_fill(c->sendbuf, size, seed);
        c->seed = seed;
    }
    memset(c->recvbuf, 0, size);
    unsigned char hdr[24], status;
    put32(hdr, CMD_TRIAL);
    put32(hdr + 4, seed);
    put64(hdr + 8, size);
    put64(hdr + 16, (uint64_t)repeats);
    /* wait until the server has prepared its buffers: that must not be timed */
    if (send_control(c, hdr, sizeof hdr) != 0 || recv_all(c, &status, 1) != 0)
        return -1;

    double t0 = ct_now(), t1;
    switch (c->mode) {
    case MODE_PINGPONG:
        for (long r = 0; r < repeats; r++)
            if (send_all(c, c->sendbuf, size) != 0 || recv_all(c, c->recvbuf, size) != 0)
                return -1;
        t1 = ct_now();
        break;
    case MODE_STREAM:
        for (long r = 0; r < repeats; r++)
            if (send_all(c, c->sendbuf, size) != 0)
                return -1;
        if (recv_all(c, &status, 1) != 0) /* the server's ack ends the timed interval */
            return -1;
        t1 = ct_now();
        break; /* the status of the server's check follows the ack, as in the other modes */
    default: /* MODE_BIDIR */
        for (long r = 0; r < repeats; r++)
            if (exchange(c, c->sendbuf, c->recvbuf, size) != 0)
                return -1;
        t1 = ct_now();
        break;
    }
    if (recv_all(c, &status, 1) != 0)
        return -1;
    *elapsed = t1 - t0;

    int ok = status == 1;
    if (c->mode == MODE_PINGPONG)
        ok = ok && memcmp(c->recvbuf, c->sendbuf, size) == 0;
    else if (c->mode == MODE_BIDIR)
        ok = ok && ct_pattern_check(c->recvbuf, size, seed ^ BIDIR_SEED_XOR);
    if (!ok && !c->verify_failed)
        fprintf(stderr, "ct-tcp-pingpong: payload verification failed at %llu bytes\n",
                (unsigned long long)size);
    c->verify_failed |= !ok;
    return 0;
}

static int run_client(const struct options *o)
{
    double start = ct_now();
    int fd = connect_peer(o);
    if (fd < 0)
        return 1;
    struct conn c = {.fd = fd, .peer = o->connect, .mode = o->mode, .io_timeout = o->io_timeout};
    /* the handshake blocks; the method under test starts with the first trial */
    set_timeouts(fd, o->io_timeout);
    set_nodelay(fd, o->nodelay);
    c.nagle = !o->nodelay;
    if (alloc_buffers(&c, o->sweep.max_size) != 0) {
        ct_report_error("cannot allocate 2 x %llu bytes", (unsigned long long)o->sweep.max_size);
        return 1;
    }

    unsigned char hello[HELLO_BYTES] = {0}, reply[24];
    put32(hello, MAGIC);
    put32(hello + 4, PROTOCOL);
    put32(hello + 8, (uint32_t)o->mode);
    put32(hello + 12, (uint32_t)o->nodelay);
    put64(hello + 16, o->sockbuf);
    put64(hello + 24, o->sweep.max_size);
    put32(hello + 32, (uint32_t)o->wait);
    if (send_all(&c, hello, sizeof hello) != 0 || recv_all(&c, reply, sizeof reply) != 0)
        return 1;
    if (get32(reply) != MAGIC || get32(reply + 4) != 0) {
        ct_report_error("server %s refused the test (%s)", o->connect,
                        get32(reply) != MAGIC ? "not a ct-tcp-pingpong server"
                                              : "cannot allocate the buffers");
        return 1;
    }
    uint64_t snd, rcv;
    get_sockbuf(fd, &snd, &rcv);
    c.poll = o->wait == WAIT_POLL;

    ct_sweep_transport t = {client_trial, &c, o->mode == MODE_PINGPONG ? 2 : 1};
    double sweep_start = ct_now();
    if (ct_sweep_run(&o->sweep, &t, ct_sweep_emit_sample, NULL) != 0)
        return 1; /* the error line is out; the samples so far are already written */
    double sweep_wall = ct_now() - sweep_start;

    unsigned char bye[24] = {0};
    put32(bye, CMD_BYE);
    send_all(&c, bye, sizeof bye);

    ct_json j;
    ct_json_start(&j, stdout, "result");
    ct_json_string(&j, "verification", c.verify_failed ? "failed" : "passed");
    ct_json_open_object(&j, "detail");
    ct_json_string(&j, "mode", mode_names[o->mode]);
    ct_json_bool(&j, "nodelay", o->nodelay);
    ct_json_string(&j, "wait", wait_names[o->wait]);
    ct_json_integer(&j, "sockbuf_requested", (long long)o->sockbuf);
    ct_json_integer(&j, "sockbuf_effective_snd", (long long)snd);
    ct_json_integer(&j, "sockbuf_effective_rcv", (long long)rcv);
    ct_json_integer(&j, "server_sockbuf_effective_snd", (long long)get64(reply + 8));
    ct_json_integer(&j, "server_sockbuf_effective_rcv", (long long)get64(reply + 16));
    ct_json_string(&j, "peer", o->connect);
    ct_json_number(&j, "sweep_wall_s", sweep_wall);
    ct_json_number(&j, "total_wall_s", ct_now() - start);
    emit_tcp_info(&j, fd);
    ct_json_close_object(&j);
    ct_json_end(&j);
    close(fd);
    return c.verify_failed ? 1 : 0;
}

/* ---- server ------------------------------------------------------------------------- */

static int accept_client(const struct options *o, char *peer, size_t peerlen)
{
    int lfd = socket(AF_INET6, SOCK_STREAM, 0), off = 0, on = 1;
    struct sockaddr_in6 a6 = {0};
    if (lfd >= 0) { /* dual-stack: serves IPv4 and IPv6 clients */
        setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)o->port);
        a6.sin6_addr = in6addr_any;
    }
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    set_sockbuf(lfd, o->sockbuf); /* inherited by the accepted socket */
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a6, sizeof a6) != 0 || listen(lfd, 1) != 0) {
        ct_report_error("cannot listen on port %ld: %s", o->port, strerror(errno));
        return -1;
    }
    socklen_t len = sizeof a6;
    getsockname(lfd, (struct sockaddr *)&a6, &len);
    fprintf(stderr, "ct-tcp-pingpong: listening on port %u\n", ntohs(a6.sin6_port));
    double deadline = ct_now() + o->accept_timeout;
    int fd = -1;
    while (fd < 0) {
        struct pollfd p = {lfd, POLLIN, 0};
        double left = deadline - ct_now();
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) != 1) {
            ct_report_error("no client connected to port %ld within %g s", o->port,
                            o->accept_timeout);
            close(lfd);
            return -1;
        }
        len = sizeof a6;
        fd = accept(lfd, (struct sockaddr *)&a6, &len);
        if (fd < 0) {
            ct_report_error("accept failed: %s", strerror(errno));
            close(lfd);
            return -1;
        }
        /* A client whose connect attempt ran out (connect_peer) closes it and sends a new
         * SYN; one that completed just then reaches us closed before its hello: not our
         * client, wait for the next. A live one's hello follows its connect at once. */
        set_timeouts(fd, o->io_timeout);
        char first;
        ssize_t n = recv(fd, &first, 1, MSG_PEEK);
        if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE))) {
            close(fd);
            fd = -1;
        }
    }
    close(lfd);
    char host[NI_MAXHOST] = "?";
    getnameinfo((struct sockaddr *)&a6, len, host, sizeof host, NULL, 0, NI_NUMERICHOST);
    snprintf(peer, peerlen, "client %s", host);
    return fd;
}

static int serve_trial(struct conn *c, uint64_t size, long repeats, uint32_t seed)
{
    if (c->mode == MODE_BIDIR && c->seed != seed) {
        ct_pattern_fill(c->sendbuf, size, seed ^ BIDIR_SEED_XOR);
        c->seed = seed;
    }
    memset(c->recvbuf, 0, size);
    unsigned char ready = 1;
    if (send_control(c, &ready, 1) != 0)
        return -1;
    for (long r = 0; r < repeats; r++) {
        int rc;
        if (c->mode == MODE_PINGPONG)
            rc = recv_all(c, c->recvbuf, size) || send_all(c, c->recvbuf, size);
        else if (c->mode == MODE_STREAM)
            rc = recv_all(c, c->recvbuf, size);
        else
            rc = exchange(c, c->sendbuf, c->recvbuf, size);
        if (rc != 0)
            return -1;
    }
    unsigned char ack = 1; /* stream: stops the client's clock, so it precedes the check */
    if (c->mode == MODE_STREAM && send_control(c, &ack, 1) != 0)
        return -1;
    ct_pattern_corrupt_once(c->recvbuf, size, &c->inject_fault);
    unsigned char status = (unsigned char)ct_pattern_check(c->recvbuf, size, seed);
    c->verify_failed |= !status;
    return send_control(c, &status, 1);
}

static int run_server(const struct options *o)
{
    char peer[NI_MAXHOST + 16];
    int fd = accept_client(o, peer, sizeof peer);
    if (fd < 0)
        return 1;
    struct conn c = {
        .fd = fd, .peer = peer, .io_timeout = o->io_timeout,
        .inject_fault = o->sweep.inject_fault};
    unsigned char hello[HELLO_BYTES], reply[24] = {0};
    if (recv_all(&c, hello, sizeof hello) != 0)
        return 1;
    uint64_t max_size = get64(hello + 24);
    if (get32(hello) != MAGIC || get32(hello + 4) != PROTOCOL || get32(hello + 8) > MODE_BIDIR ||
        get32(hello + 32) > WAIT_POLL) {
        ct_report_error("%s is not a ct-tcp-pingpong client of protocol %d", peer, PROTOCOL);
        return 1;
    }
    c.mode = (enum mode)get32(hello + 8);
    set_nodelay(fd, (int)get32(hello + 12));
    c.nagle = !get32(hello + 12);
    set_sockbuf(fd, get64(hello + 16));
    uint64_t snd, rcv;
    get_sockbuf(fd, &snd, &rcv);
    int refused = max_size < 1 || max_size > MAX_MESSAGE || alloc_buffers(&c, max_size) != 0;
    put32(reply, MAGIC);
    put32(reply + 4, (uint32_t)refused);
    put64(reply + 8, snd);
    put64(reply + 16, rcv);
    if (send_all(&c, reply, sizeof reply) != 0 || refused)
        return 1;
    enum wait wait = (enum wait)get32(hello + 32);
    c.poll = wait == WAIT_POLL;

    long trials = 0;
    for (;;) {
        unsigned char hdr[24];
        if (recv_all(&c, hdr, sizeof hdr) != 0)
            return 1;
        if (get32(hdr) == CMD_BYE)
            break;
        uint64_t size = get64(hdr + 8);
        if (get32(hdr) != CMD_TRIAL || size > max_size) {
            ct_report_error("malformed trial header from %s", peer);
            return 1;
        }
        if (serve_trial(&c, size, (long)get64(hdr + 16), get32(hdr + 4)) != 0)
            return 1;
        trials++;
    }
    ct_json j;
    ct_json_start(&j, stdout, "result");
    ct_json_string(&j, "verification", c.verify_failed ? "failed" : "passed");
    ct_json_open_object(&j, "detail");
    ct_json_string(&j, "role", "server");
    ct_json_string(&j, "mode", mode_names[c.mode]);
    ct_json_string(&j, "wait", wait_names[wait]);
    ct_json_string(&j, "peer", peer);
    ct_json_integer(&j, "trials_served", trials);
    ct_json_integer(&j, "sockbuf_effective_snd", (long long)snd);
    ct_json_integer(&j, "sockbuf_effective_rcv", (long long)rcv);
    emit_tcp_info(&j, fd);
    ct_json_close_object(&j);
    ct_json_end(&j);
    close(fd);
    return c.verify_failed ? 1 : 0;
}

/* ---- command line ------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ct-tcp-pingpong --server [--port P] [--accept-timeout S] [--sockbuf BYTES]\n"
            "       ct-tcp-pingpong --connect HOST:PORT [options]\n"
            "  --mode pingpong|stream|bidir  (default pingpong)\n"
            "  --wait block|poll       wait for data sleeping in recv (default, as NetPIPE)\n"
            "                          or spinning on non-blocking calls (as MPI libraries)\n"
            "  --nagle                 leave Nagle's algorithm on (default: TCP_NODELAY)\n"
            "  --sockbuf BYTES         SO_SNDBUF/SO_RCVBUF on both ends (default: system)\n"
            "  --connect-timeout S     give up connecting after S seconds (default 10)\n"
            "  --io-timeout S          give up when the peer is silent S seconds (default 60)\n"
            "%s",
            ct_sweep_usage);
}

static int parse_args(int argc, char **argv, struct options *o)
{
    const char *prog = ct_basename(argv[0]);
    memset(o, 0, sizeof *o);
    o->connect_timeout = 10;
    o->accept_timeout = 60;
    o->io_timeout = 60;
    ct_sweep_defaults(&o->sweep);
    int mode = MODE_PINGPONG, wait = WAIT_BLOCK, nagle = 0;
    ct_opt sweep[CT_SWEEP_NOPTS];
    ct_sweep_options(&o->sweep, sweep);
    const ct_opt table[] = {
        {"--server", CT_OPT_FLAG, .dest = &o->server},
        {"--connect", CT_OPT_STRING, .dest = &o->connect},
        {"--port", CT_OPT_LONG, .dest = &o->port, .min = 0, .max = 65535},
        {"--mode", CT_OPT_CHOICE, .dest = &mode, .choices = mode_names},
        {"--wait", CT_OPT_CHOICE, .dest = &wait, .choices = wait_names},
        {"--nagle", CT_OPT_FLAG, .dest = &nagle},
        {"--sockbuf", CT_OPT_BYTES, .dest = &o->sockbuf, .max = INT32_MAX},
        {"--connect-timeout", CT_OPT_SECONDS, .dest = &o->connect_timeout, .max = 86400},
        {"--accept-timeout", CT_OPT_SECONDS, .dest = &o->accept_timeout, .max = 86400},
        {"--io-timeout", CT_OPT_SECONDS, .dest = &o->io_timeout, .max = 86400},
        {NULL, CT_OPT_TABLE, .table = sweep},
        {.type = CT_OPT_END},
    };
    char err[512];
    int bad = ct_opt_parse(table, argc, argv, err, sizeof err) != 0;
    if (o->sweep.help) {
        usage(stdout);
        exit(0);
    }
    o->mode = (enum mode)mode;
    o->wait = (enum wait)wait;
    o->nodelay = !nagle;
    if (bad || ct_sweep_validate(&o->sweep, MAX_MESSAGE, prog, err, sizeof err))
        ct_report_error("%s", err);
    else if (o->server == (o->connect != NULL))
        ct_report_error("%s: give exactly one of --server and --connect HOST:PORT", prog);
    else if (o->sweep.min_size < 1)
        ct_report_error("%s: --min-size: must be >= 1 for TCP (a 0-byte send carries nothing)",
                        prog);
    else
        return 0;
    return -1;
}

int main(int argc, char **argv)
{
    struct options o;
    signal(SIGPIPE, SIG_IGN); /* a dead peer shows up as EPIPE, reported as an error line */
    if (parse_args(argc, argv, &o) != 0)
        return CT_EXIT_USAGE;
    return o.server ? run_server(&o) : run_client(&o);
}
