/* ct-nfq-delay - the wire of a virtual-cluster host, in place of netem (which these
 * kernels lack): serialisation at the link rate, delay, jitter and loss. Run inside the
 * host's namespace,
 * behind
 *   iptables -t mangle -A POSTROUTING -o eth0 -j NFQUEUE --queue-num Q --queue-bypass
 * it receives each outgoing packet's id, length and first HEADER_COPY bytes over
 * nfnetlink, drops it with probability LOSS, or lets it leave when a wire of RATE bit/s
 * would have finished sending it after the packets before it, plus DELAY_US and a uniform
 * offset in [-JITTER_US, +JITTER_US] (at least 0). Packets leave in the order of their
 * release times: without jitter that is arrival order, with jitter it reorders.
 *
 * Why a pacer here and not tbf: a token bucket lets any message smaller than its bucket
 * through at memory speed (the bucket refills while the reply travels), so mid-size
 * ping-pong read up to twice the nominal rate; a bucket of one frame cannot hold 1 Gbit
 * (per-packet timer cost). The pacer charges every packet its time on the wire: the
 * Ethernet frames it becomes (a GSO packet is cut at the MTU, each frame repeating the
 * IP and TCP headers) and each frame's 38 B of header, FCS, preamble and gap.
 * Every decision comes from one PRNG seeded with SEED, so the same packet sequence meets
 * the same drops and offsets. --queue-bypass lets traffic through untouched if this
 * daemon is not running.
 *
 * Without loss the kernel queues whole GSO packets (up to 64 KiB, cheap); with loss it
 * hands over wire-sized segments, so LOSS is a fraction of the frames on the wire.
 *
 * --params FILE: SIGHUP re-reads the parameters from FILE, lines "delay_us=N",
 * "jitter_us=N", "loss=P", "seed=N" (keys left out keep their value); the PRNG restarts
 * from the seed. --stats FILE: the counters as one JSON object, rewritten at most once a
 * second, at exit and at once on SIGUSR1 (a reader sends it and waits for the new file).
 *
 * The pacer checks itself: every packet it lets through was due at a time it computed
 * (arrival or wire free, plus serialisation and delay); how late the verdict actually
 * left (after the send() that carries it) is counted in a log-scale histogram of
 * nanoseconds, 8 buckets per power of two ("late_hist": bucket i < 8 holds i ns, above
 * that bucket 8*m+s holds [(8+s) << (m-3), (9+s) << (m-3)) ns), with the largest seen.
 * A busy CPU that keeps this daemon from running shows there; what it cannot see is a
 * packet that waited in the kernel queue before the daemon read it (its due time starts
 * when read).
 *
 * usage: ct-nfq-delay QUEUE DELAY_US [--rate-bps R] [--mtu M] [--jitter-us J] [--loss P]
 *                     [--seed S] [--params FILE] [--stats FILE] */
#define _GNU_SOURCE
#include "ct.h"
#include "ct_opt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HELD_MAX 65536 /* more than the kernel queue holds (QUEUE_MAXLEN below) */
#define MAX_DELAY_US 3600e6
#define VERDICT_BYTES 32 /* one verdict message: header, nfgenmsg, verdict attribute */
#define HEADER_COPY 128   /* bytes of each packet copied to us: its IP and TCP headers */
#define FRAME_OVERHEAD 38 /* Ethernet header 14 + FCS 4 + preamble 8 + inter-frame gap 12 */

struct params { long delay_us, jitter_us; double loss; long seed; double rate_bps; };
struct held { uint64_t release_ns, arrival; uint32_t id; };

static struct held heap[HELD_MAX]; /* min-heap on (release_ns, arrival) */
static unsigned held;
static int sock;
static uint16_t queue_num;
static uint32_t sequence;
static uint64_t prng, loss_threshold;
static uint64_t wire_free_ns; /* when the emulated wire has sent everything accepted so far */
static long mtu = 1500;
static int drop_all;
static struct { unsigned long long packets, dropped, errors, released; } count;
static volatile sig_atomic_t stopping, reload, stats_now;
#define BATCH_MAX 2048
static char verdicts[VERDICT_BYTES * BATCH_MAX];
static size_t verdict_len;
#define LATE_BUCKETS 512 /* 8 per power of two of nanoseconds, up to 2^64 */
static unsigned long long late_hist[LATE_BUCKETS];
static uint64_t late_max_ns;
static uint64_t batch_due[BATCH_MAX]; /* due times of the accepted packets in verdicts[] */
static unsigned batch_timed;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t next_random(void) /* splitmix64 */
{
    uint64_t z = (prng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static char *add_attribute(char *at, uint16_t type, const void *data, uint16_t len)
{
    struct nlattr *a = (struct nlattr *)at;
    a->nla_type = type;
    a->nla_len = (uint16_t)(NLA_HDRLEN + len);
    memcpy(at + NLA_HDRLEN, data, len);
    return at + NLA_ALIGN(a->nla_len);
}

/* Writes one queue message into out; returns its length. */
static size_t queue_message(char *out, uint8_t type, uint16_t flags, const char *attrs, size_t len)
{
    struct nlmsghdr *nh = (struct nlmsghdr *)out;
    struct nfgenmsg *gen = NLMSG_DATA(nh);
    nh->nlmsg_len = (uint32_t)(NLMSG_LENGTH(sizeof *gen) + len);
    nh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | type;
    nh->nlmsg_flags = NLM_F_REQUEST | flags;
    nh->nlmsg_seq = ++sequence;
    nh->nlmsg_pid = 0;
    gen->nfgen_family = AF_UNSPEC;
    gen->version = NFNETLINK_V0;
    gen->res_id = htons(queue_num);
    memcpy(out + NLMSG_LENGTH(sizeof *gen), attrs, len);
    return NLMSG_ALIGN(nh->nlmsg_len);
}

/* Send a configuration message; at start (ack) fail loudly if the kernel refuses it,
 * later the refusal arrives in the main loop and is counted as an error. */
static void configure(const char *attrs, size_t len, int ack)
{
    char msg[512], reply[1024];
    size_t n = queue_message(msg, NFQNL_MSG_CONFIG, ack ? NLM_F_ACK : 0, attrs, len);
    if (send(sock, msg, n, 0) < 0) {
        ct_report_error("nfq-delay: send config: %s", strerror(errno));
        exit(1);
    }
    if (!ack)
        return;
    ssize_t got = recv(sock, reply, sizeof reply, 0);
    struct nlmsghdr *nh = (struct nlmsghdr *)reply;
    if (got > 0 && nh->nlmsg_type == NLMSG_ERROR) {
        int err = ((struct nlmsgerr *)NLMSG_DATA(nh))->error;
        if (err) {
            ct_report_error("nfq-delay: queue %u config refused: %s", queue_num, strerror(-err));
            exit(1);
        }
    }
}

/* Whole GSO packets without loss; wire-sized segments with it (see the top). */
static void configure_gso(int whole, int ack)
{
    char attrs[64];
    uint32_t mask = htonl(NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN);
    uint32_t flags = htonl(NFQA_CFG_F_FAIL_OPEN | (whole ? NFQA_CFG_F_GSO : 0));
    char *end = add_attribute(attrs, NFQA_CFG_MASK, &mask, sizeof mask);
    end = add_attribute(end, NFQA_CFG_FLAGS, &flags, sizeof flags);
    configure(attrs, (size_t)(end - attrs), ack);
}

static unsigned late_bucket(uint64_t ns)
{
    if (ns < 8)
        return (unsigned)ns;
    unsigned msb = 63u - (unsigned)__builtin_clzll(ns);
    return msb * 8 + (unsigned)((ns >> (msb - 3)) & 7);
}

/* Sends the batch; each accepted packet in it is as late as now is past its due time. */
static void flush_verdicts(void)
{
    if (verdict_len && send(sock, verdicts, verdict_len, 0) < 0)
        count.errors++;
    verdict_len = 0;
    if (!batch_timed)
        return;
    uint64_t sent = now_ns();
    for (unsigned i = 0; i < batch_timed; i++) {
        uint64_t late = sent > batch_due[i] ? sent - batch_due[i] : 0;
        late_hist[late_bucket(late)]++;
        if (late > late_max_ns)
            late_max_ns = late;
    }
    count.released += batch_timed;
    batch_timed = 0;
}

static void verdict(uint32_t id, uint32_t what)
{
    char attrs[16];
    struct nfqnl_msg_verdict_hdr v = { htonl(what), htonl(id) };
    char *end = add_attribute(attrs, NFQA_VERDICT_HDR, &v, sizeof v);
    if (verdict_len + VERDICT_BYTES > sizeof verdicts)
        flush_verdicts();
    verdict_len += queue_message(verdicts + verdict_len, NFQNL_MSG_VERDICT, 0, attrs, (size_t)(end - attrs));
}

/* Lets a held packet go; its lateness is counted when the batch is sent. */
static void release(struct held h)
{
    verdict(h.id, NF_ACCEPT); /* may flush the batch before this one joins it */
    batch_due[batch_timed++] = h.release_ns;
}

static int earlier(const struct held *a, const struct held *b)
{
    return a->release_ns < b->release_ns || (a->release_ns == b->release_ns && a->arrival < b->arrival);
}

static void push(struct held h)
{
    unsigned i = held++;
    while (i && earlier(&h, &heap[(i - 1) / 2])) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = h;
}

static struct held pop(void)
{
    struct held top = heap[0], last = heap[--held];
    unsigned i = 0;
    for (;;) {
        unsigned c = 2 * i + 1;
        if (c >= held)
            break;
        if (c + 1 < held && earlier(&heap[c + 1], &heap[c]))
            c++;
        if (!earlier(&heap[c], &last))
            break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = last;
    return top;
}

static void on_signal(int sig) { (void)sig; stopping = 1; }
static void on_hangup(int sig) { (void)sig; reload = 1; }
static void on_usr1(int sig) { (void)sig; stats_now = 1; }

static const char *check_params(const struct params *p)
{
    if (p->delay_us < 0 || p->delay_us > MAX_DELAY_US)
        return "delay_us: expected 0 to 3600000000";
    if (p->jitter_us < 0 || p->jitter_us > MAX_DELAY_US)
        return "jitter_us: expected 0 to 3600000000";
    if (!(p->loss >= 0 && p->loss <= 1))
        return "loss: expected a fraction from 0 to 1";
    if (!(p->rate_bps >= 0 && p->rate_bps <= 1e12))
        return "rate_bps: expected 0 (no pacing) to 1e12";
    return NULL;
}

static void apply_params(const struct params *p, struct params *current, int ack)
{
    int gso_changed = (p->loss > 0) != (current->loss > 0);
    *current = *p;
    prng = (uint64_t)p->seed;
    drop_all = p->loss >= 1;
    loss_threshold = (uint64_t)(p->loss * 18446744073709551616.0); /* loss * 2^64 */
    if (ack || gso_changed) /* at start, always */
        configure_gso(p->loss == 0, ack);
    fprintf(stderr, "ct-nfq-delay: queue %u, rate %g bit/s, delay %ld us, jitter %ld us, "
            "loss %g, seed %ld\n", queue_num, p->rate_bps, p->delay_us, p->jitter_us, p->loss,
            p->seed);
}

/* Reads "key=value" lines over *p; on a bad file leaves *p alone and says why. */
static void read_params(const char *path, struct params *p)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "ct-nfq-delay: %s: %s (parameters unchanged)\n", path, strerror(errno));
        return;
    }
    struct params next = *p;
    char line[128], key[32];
    double value;
    int bad = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, " %31[a-z_] = %lf", key, &value) != 2)
            bad = 1;
        else if (!strcmp(key, "delay_us"))
            next.delay_us = (long)value;
        else if (!strcmp(key, "jitter_us"))
            next.jitter_us = (long)value;
        else if (!strcmp(key, "loss"))
            next.loss = value;
        else if (!strcmp(key, "seed"))
            next.seed = (long)value;
        else if (!strcmp(key, "rate_bps"))
            next.rate_bps = value;
        else
            bad = 1;
    }
    fclose(f);
    const char *problem = bad ? "expected lines key=number" : check_params(&next);
    if (problem)
        fprintf(stderr, "ct-nfq-delay: %s: %s (parameters unchanged)\n", path, problem);
    else
        *p = next;
}

static void write_stats(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "{\"packets\": %llu, \"dropped\": %llu, \"errors\": %llu, \"released\": %llu, "
            "\"late_max_ns\": %llu, \"late_hist\": [", count.packets, count.dropped, count.errors,
            count.released, (unsigned long long)late_max_ns);
    unsigned used = LATE_BUCKETS;
    while (used && !late_hist[used - 1])
        used--;
    for (unsigned i = 0; i < used; i++)
        fprintf(f, i ? ",%llu" : "%llu", late_hist[i]);
    fprintf(f, "]}\n");
    if (fclose(f) == 0)
        rename(tmp, path);
}

/* Bytes a packet of len bytes puts on the wire: the frames a GSO packet is cut into at
 * the MTU, each repeating the IP and TCP headers seen in its first bytes, plus framing. */
static uint64_t wire_bytes(const unsigned char *head, size_t copied, uint32_t len)
{
    uint32_t headers = 0;
    if (copied >= 20 && (head[0] >> 4) == 4) {
        headers = (uint32_t)(head[0] & 15) * 4;
        if (head[9] == 6 /* TCP */ && copied >= headers + 13)
            headers += (uint32_t)(head[headers + 12] >> 4) * 4;
    }
    uint32_t room = (uint32_t)mtu > headers ? (uint32_t)mtu - headers : (uint32_t)mtu;
    uint32_t payload = len > headers ? len - headers : len;
    uint64_t frames = payload ? (payload + room - 1) / room : 1;
    return (uint64_t)len + (frames - 1) * headers + frames * FRAME_OVERHEAD;
}

static void take_packet(const struct nlmsghdr *nh, uint64_t now, const struct params *p)
{
    int left = (int)(nh->nlmsg_len - NLMSG_LENGTH(sizeof(struct nfgenmsg)));
    const struct nlattr *a =
        (const struct nlattr *)((const char *)NLMSG_DATA(nh) + NLMSG_ALIGN(sizeof(struct nfgenmsg)));
    uint32_t id = 0, length = 0;
    int have_id = 0;
    const unsigned char *head = NULL;
    size_t copied = 0;
    for (; left >= (int)sizeof *a && a->nla_len >= sizeof *a && a->nla_len <= left;
         left -= NLA_ALIGN(a->nla_len), a = (const struct nlattr *)((const char *)a + NLA_ALIGN(a->nla_len))) {
        const void *data = (const char *)a + NLA_HDRLEN;
        switch (a->nla_type & NLA_TYPE_MASK) {
        case NFQA_PACKET_HDR:
            id = ntohl(((const struct nfqnl_msg_packet_hdr *)data)->packet_id);
            have_id = 1;
            break;
        case NFQA_PAYLOAD:
            head = data;
            copied = a->nla_len - NLA_HDRLEN;
            if (!length)
                length = (uint32_t)copied;
            break;
        case NFQA_CAP_LEN: /* the whole length, when the copy was cut short */
            length = ntohl(*(const uint32_t *)data);
            break;
        }
    }
    if (!have_id)
        return;
    count.packets++;
    if (p->loss > 0 && (drop_all || next_random() < loss_threshold)) {
        count.dropped++;
        verdict(id, NF_DROP);
        return;
    }
    uint64_t sent = now;
    if (p->rate_bps > 0) { /* it starts when the wire is free and takes its serialisation */
        uint64_t start = now > wire_free_ns ? now : wire_free_ns;
        wire_free_ns = start + (uint64_t)((double)wire_bytes(head, copied, length) * 8e9 / p->rate_bps);
        sent = wire_free_ns;
    }
    int64_t hold = p->delay_us * 1000ll;
    if (p->jitter_us > 0) {
        double u = (double)(next_random() >> 11) * 0x1.0p-53; /* [0, 1) */
        hold += (int64_t)((2 * u - 1) * (double)p->jitter_us * 1000.0);
    }
    if (held == HELD_MAX) /* full: release the earliest now */
        release(pop());
    push((struct held){ sent + (uint64_t)(hold > 0 ? hold : 0), count.packets, id });
}

int main(int argc, char **argv)
{
    int qnum, help = 0;
    struct params want = { 0, 0, 0.0, 1, 0.0 }, now_params = { 0, 0, 0.0, 0, 0.0 };
    const char *params_path = NULL, *stats_path = NULL;
    const ct_opt table[] = {
        {"QUEUE", CT_OPT_INT, .dest = &qnum, .min = 0, .max = 65535},
        {"DELAY_US", CT_OPT_LONG, .dest = &want.delay_us, .min = 0, .max = MAX_DELAY_US},
        {"--rate-bps", CT_OPT_NUMBER, .dest = &want.rate_bps},
        {"--mtu", CT_OPT_LONG, .dest = &mtu, .min = 68, .max = 65535},
        {"--jitter-us", CT_OPT_LONG, .dest = &want.jitter_us, .min = 0, .max = MAX_DELAY_US},
        {"--loss", CT_OPT_NUMBER, .dest = &want.loss},
        {"--seed", CT_OPT_LONG, .dest = &want.seed, .min = 0, .max = 2147483647},
        {"--params", CT_OPT_STRING, .dest = &params_path},
        {"--stats", CT_OPT_STRING, .dest = &stats_path},
        {"--help", CT_OPT_FLAG, .dest = &help},
        {.type = CT_OPT_END},
    };
    char err[512];
    int bad = ct_opt_parse(table, argc, argv, err, sizeof err) != 0;
    const char *problem = bad ? NULL : check_params(&want);
    if (problem) {
        snprintf(err, sizeof err, "%s: --%s", ct_basename(argv[0]), problem);
        bad = 1;
    }
    if (help || bad) {
        fprintf(help ? stdout : stderr,
                "%s%susage: %s QUEUE DELAY_US [--rate-bps R] [--mtu M] [--jitter-us J] "
                "[--loss P] [--seed S] [--params FILE] [--stats FILE]\n",
                help ? "" : err, help ? "" : "\n", ct_basename(argv[0]));
        return help ? 0 : CT_EXIT_USAGE;
    }
    queue_num = (uint16_t)qnum;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* the default 50 us timer slack would add to D */
    /* A real wire is hardware: it must not wait for a CPU behind the benchmark's own
     * processes (on a busy 2-core box that cost a paced 100 Mbit link a fifth of its
     * rate). Lowest real-time priority; it sleeps between packets. */
    struct sched_param rt = { .sched_priority = 1 };
    if (sched_setscheduler(0, SCHED_FIFO, &rt) != 0)
        setpriority(PRIO_PROCESS, 0, -10);
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_hangup;
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);

    sock = socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER);
    struct sockaddr_nl self = { .nl_family = AF_NETLINK };
    if (sock < 0 || bind(sock, (struct sockaddr *)&self, sizeof self)) {
        ct_report_error("nfq-delay: netlink socket: %s", strerror(errno));
        return 1;
    }
    int rcvbuf = 8 << 20;
    setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
    int one = 1;
    setsockopt(sock, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);

    char attrs[128], *end;
    struct nfqnl_msg_config_cmd bind_cmd = { NFQNL_CFG_CMD_BIND, 0, htons(AF_INET) };
    end = add_attribute(attrs, NFQA_CFG_CMD, &bind_cmd, sizeof bind_cmd);
    configure(attrs, (size_t)(end - attrs), 1);
    struct nfqnl_msg_config_params copy = { htonl(HEADER_COPY), NFQNL_COPY_PACKET };
    uint32_t max_len = htonl(HELD_MAX / 2);
    end = add_attribute(attrs, NFQA_CFG_PARAMS, &copy, sizeof copy);
    end = add_attribute(end, NFQA_CFG_QUEUE_MAXLEN, &max_len, sizeof max_len);
    configure(attrs, (size_t)(end - attrs), 1);
    apply_params(&want, &now_params, 1);

    static char buf[1 << 16];
    uint64_t stats_due = 0;
    unsigned long long stats_seen = ~0ull;
    while (!stopping) {
        if (reload && params_path) {
            reload = 0;
            read_params(params_path, &want);
            apply_params(&want, &now_params, 0);
        }
        uint64_t now = now_ns();
        struct timespec wait = { 0, 200000000 }; /* idle: wake up now and then for the stats */
        if (held) {
            uint64_t d = heap[0].release_ns > now ? heap[0].release_ns - now : 0;
            wait.tv_sec = (time_t)(d / 1000000000ull);
            wait.tv_nsec = (long)(d % 1000000000ull);
        }
        struct pollfd pfd = { sock, POLLIN, 0 };
        int ready = ppoll(&pfd, 1, &wait, NULL);
        now = now_ns();
        while (ready > 0) {
            ssize_t n = recv(sock, buf, sizeof buf, MSG_DONTWAIT);
            if (n <= 0)
                break;
            int len = (int)n;
            for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, len); nh = NLMSG_NEXT(nh, len)) {
                if (nh->nlmsg_type == ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET))
                    take_packet(nh, now, &now_params);
                else if (nh->nlmsg_type == NLMSG_ERROR && ((struct nlmsgerr *)NLMSG_DATA(nh))->error)
                    count.errors++;
            }
        }
        /* release every packet due within 2 us, all verdicts in one send */
        while (held && heap[0].release_ns <= now + 2000)
            release(pop());
        flush_verdicts();
        if (stats_path && (stats_now || (now >= stats_due && count.packets != stats_seen))) {
            stats_now = 0;
            write_stats(stats_path);
            stats_seen = count.packets;
            stats_due = now + 1000000000ull;
        }
    }
    while (held)
        release(pop());
    flush_verdicts();
    if (stats_path)
        write_stats(stats_path);
    return 0;
}
