/* ct-nfq-delay - per-packet delay for a virtual-cluster host, in place of netem
 * (which these kernels lack). Run inside the host's namespace, behind
 *   iptables -t mangle -A POSTROUTING -o eth0 -j NFQUEUE --queue-num Q --queue-bypass
 * it receives each outgoing packet's id over nfnetlink (metadata only, no payload copy),
 * holds it for DELAY_US and then accepts it. Packets leave in arrival order, so a fixed
 * delay keeps the FIFO: one batch verdict releases every packet up to an id.
 * --queue-bypass lets traffic through undelayed if this daemon is not running.
 *
 * usage: ct-nfq-delay QUEUE DELAY_US */
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
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RING 65536 /* power of two; more than the kernel queue holds by default */

struct held { uint64_t release_ns; uint32_t id; };

static struct held ring[RING];
static unsigned head, tail; /* ring[head..tail) are held, oldest first */
static int sock;
static uint16_t queue_num;
static uint32_t sequence;
static volatile sig_atomic_t stopping;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static char *add_attribute(char *at, uint16_t type, const void *data, uint16_t len)
{
    struct nlattr *a = (struct nlattr *)at;
    a->nla_type = type;
    a->nla_len = (uint16_t)(NLA_HDRLEN + len);
    memcpy(at + NLA_HDRLEN, data, len);
    return at + NLA_ALIGN(a->nla_len);
}

static int send_queue_message(uint8_t type, uint16_t flags, const char *attrs, size_t len)
{
    char buf[512];
    struct nlmsghdr *nh = (struct nlmsghdr *)buf;
    struct nfgenmsg *gen = NLMSG_DATA(nh);
    nh->nlmsg_len = (uint32_t)(NLMSG_LENGTH(sizeof *gen) + len);
    nh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | type;
    nh->nlmsg_flags = NLM_F_REQUEST | flags;
    nh->nlmsg_seq = ++sequence;
    nh->nlmsg_pid = 0;
    gen->nfgen_family = AF_UNSPEC;
    gen->version = NFNETLINK_V0;
    gen->res_id = htons(queue_num);
    memcpy(buf + NLMSG_LENGTH(sizeof *gen), attrs, len);
    return (int)send(sock, buf, nh->nlmsg_len, 0);
}

/* Send a configuration message and fail loudly if the kernel refuses it. */
static void configure(const char *attrs, size_t len)
{
    char reply[1024];
    if (send_queue_message(NFQNL_MSG_CONFIG, NLM_F_ACK, attrs, len) < 0) {
        ct_report_error("nfq-delay: send config: %s", strerror(errno));
        exit(1);
    }
    ssize_t n = recv(sock, reply, sizeof reply, 0);
    struct nlmsghdr *nh = (struct nlmsghdr *)reply;
    if (n > 0 && nh->nlmsg_type == NLMSG_ERROR) {
        int err = ((struct nlmsgerr *)NLMSG_DATA(nh))->error;
        if (err) {
            ct_report_error("nfq-delay: queue %u config refused: %s", queue_num, strerror(-err));
            exit(1);
        }
    }
}

static void accept_through(uint32_t id)
{
    char attrs[64];
    struct nfqnl_msg_verdict_hdr verdict = { htonl(NF_ACCEPT), htonl(id) };
    char *end = add_attribute(attrs, NFQA_VERDICT_HDR, &verdict, sizeof verdict);
    send_queue_message(NFQNL_MSG_VERDICT_BATCH, 0, attrs, (size_t)(end - attrs));
}

static void on_signal(int sig) { (void)sig; stopping = 1; }

static void hold_packet(const struct nlmsghdr *nh, uint64_t release_ns)
{
    int left = (int)(nh->nlmsg_len - NLMSG_LENGTH(sizeof(struct nfgenmsg)));
    const struct nlattr *a =
        (const struct nlattr *)((const char *)NLMSG_DATA(nh) + NLMSG_ALIGN(sizeof(struct nfgenmsg)));
    for (; left >= (int)sizeof *a && a->nla_len >= sizeof *a && a->nla_len <= left;
         left -= NLA_ALIGN(a->nla_len), a = (const struct nlattr *)((const char *)a + NLA_ALIGN(a->nla_len))) {
        if ((a->nla_type & NLA_TYPE_MASK) != NFQA_PACKET_HDR)
            continue;
        const struct nfqnl_msg_packet_hdr *ph = (const void *)((const char *)a + NLA_HDRLEN);
        if (((tail + 1) & (RING - 1)) == head) { /* ring full: release everything held */
            accept_through(ring[(tail - 1) & (RING - 1)].id);
            head = tail;
        }
        ring[tail].release_ns = release_ns;
        ring[tail].id = ntohl(ph->packet_id);
        tail = (tail + 1) & (RING - 1);
        return;
    }
}

int main(int argc, char **argv)
{
    int qnum, help = 0;
    long delay_us;
    const ct_opt table[] = {
        {"QUEUE", CT_OPT_INT, .dest = &qnum, .min = 0, .max = 65535},
        {"DELAY_US", CT_OPT_LONG, .dest = &delay_us, .min = 0, .max = 3600e6},
        {"--help", CT_OPT_FLAG, .dest = &help},
        {.type = CT_OPT_END},
    };
    char err[512];
    int bad = ct_opt_parse(table, argc, argv, err, sizeof err) != 0;
    if (help || bad) {
        fprintf(help ? stdout : stderr, "%s%susage: %s QUEUE DELAY_US\n", help ? "" : err,
                help ? "" : "\n", ct_basename(argv[0]));
        return help ? 0 : CT_EXIT_USAGE;
    }
    queue_num = (uint16_t)qnum;
    const uint64_t delay_ns = (uint64_t)delay_us * 1000ull;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* the default 50 us timer slack would add to D */
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

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
    configure(attrs, (size_t)(end - attrs));
    struct nfqnl_msg_config_params params = { htonl(0), NFQNL_COPY_META };
    uint32_t max_len = htonl(RING / 2);
    uint32_t flags = htonl(NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN);
    end = add_attribute(attrs, NFQA_CFG_PARAMS, &params, sizeof params);
    end = add_attribute(end, NFQA_CFG_QUEUE_MAXLEN, &max_len, sizeof max_len);
    end = add_attribute(end, NFQA_CFG_MASK, &flags, sizeof flags);
    end = add_attribute(end, NFQA_CFG_FLAGS, &flags, sizeof flags);
    configure(attrs, (size_t)(end - attrs));
    fprintf(stderr, "ct-nfq-delay: queue %u, %ld us\n", queue_num, delay_us);

    static char buf[1 << 16];
    while (!stopping) {
        uint64_t now = now_ns();
        struct timespec wait = { 0, 200000000 }; /* idle: wake up now and then to see signals */
        if (head != tail) {
            uint64_t d = ring[head].release_ns > now ? ring[head].release_ns - now : 0;
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
            for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, len); nh = NLMSG_NEXT(nh, len))
                if (nh->nlmsg_type == ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET))
                    hold_packet(nh, now + delay_ns);
        }
        /* release every packet due within 2 us: one batch verdict instead of many */
        int due = 0;
        uint32_t last = 0;
        while (head != tail && ring[head].release_ns <= now + 2000) {
            last = ring[head].id;
            due = 1;
            head = (head + 1) & (RING - 1);
        }
        if (due)
            accept_through(last);
    }
    if (head != tail)
        accept_through(ring[(tail - 1) & (RING - 1)].id);
    return 0;
}
