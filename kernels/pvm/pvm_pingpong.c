/* ct-pvm-pingpong - PVM message-size sweep, the third protocol of seeds/002.
 *
 *   ct-pvm-pingpong [--host HOST] [--route direct|daemon] [sweep options]
 *
 * Needs a running pvmd (e.g. `echo quit | pvm`, or a virtual machine with the hosts
 * added). The started task is the driver; it spawns one copy of itself as the partner,
 * on HOST if given (any host of the virtual machine otherwise), and sweeps ping-pongs with
 * the method of ct_sweep.h, so the samples compare with ct-tcp-pingpong and
 * ct-mpi-pingpong point by point. t = round trip / 2.
 *
 * Messages are packed with PvmDataInPlace (no copy into a PVM buffer on send) and, with
 * the default --route direct, travel over a task-to-task TCP link instead of through the
 * two pvmds.
 *
 * Verification: a seeded pattern that changes at every point; the partner checks the
 * last message of each trial and reports, the driver checks the last echo. With
 * --inject-fault (tests only) the driver flips one bit of the first trial's last echo
 * after the timed loop, as a faulty NIC would: the run must then come out failed.
 */
#define _POSIX_C_SOURCE 200809L
#include "ct.h"
#include "ct_sweep.h"

#include <pvm3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_MESSAGE (1ull << 30)
#define TAG_CMD 1
#define TAG_DATA 2
#define TAG_STATUS 3
#define CMD_TRIAL 1
#define CMD_STOP 2
#define PARTNER_FLAG "--partner"

struct pair {
    int peer; /* PVM task id */
    unsigned char *sendbuf, *recvbuf;
    uint32_t seed;
    int verify_failed;
    int inject_fault; /* corrupt the next trial's echo (tests) */
};

static void send_bytes(int tid, int tag, unsigned char *buf, uint64_t size)
{
    pvm_initsend(PvmDataInPlace);
    pvm_pkbyte((char *)buf, (int)size, 1);
    pvm_send(tid, tag);
}

static int recv_bytes(int tid, int tag, unsigned char *buf, uint64_t size)
{
    if (pvm_recv(tid, tag) < 0)
        return -1;
    return pvm_upkbyte((char *)buf, (int)size, 1) < 0 ? -1 : 0;
}

static void send_ints(int tid, int tag, int *v, int n)
{
    pvm_initsend(PvmDataRaw);
    pvm_pkint(v, n, 1);
    pvm_send(tid, tag);
}

static int recv_ints(int tid, int tag, int *v, int n)
{
    if (pvm_recv(tid, tag) < 0)
        return -1;
    return pvm_upkint(v, n, 1) < 0 ? -1 : 0;
}

static void prepare(struct pair *p, uint64_t size, uint32_t seed)
{
    if (p->seed != seed) {
        ct_pattern_fill(p->sendbuf, size, seed);
        p->seed = seed;
    }
    memset(p->recvbuf, 0, size);
}

static int driver_trial(void *ctx, uint64_t size, long repeats, uint32_t seed, double *elapsed)
{
    struct pair *p = ctx;
    /* size <= 1 GiB and repeats <= 1e8 fit an int; the seed travels as its bits */
    int cmd[4] = {CMD_TRIAL, (int)size, (int)repeats, (int)seed}, ready, ok;
    send_ints(p->peer, TAG_CMD, cmd, 4);
    prepare(p, size, seed);
    if (recv_ints(p->peer, TAG_STATUS, &ready, 1) != 0)
        goto lost;
    double t0 = ct_now();
    for (long r = 0; r < repeats; r++) {
        send_bytes(p->peer, TAG_DATA, p->sendbuf, size);
        if (recv_bytes(p->peer, TAG_DATA, p->recvbuf, size) != 0)
            goto lost;
    }
    *elapsed = ct_now() - t0;
    ct_pattern_corrupt_once(p->recvbuf, size, &p->inject_fault);
    if (recv_ints(p->peer, TAG_STATUS, &ok, 1) != 0)
        goto lost;
    ok = ok && memcmp(p->recvbuf, p->sendbuf, size) == 0;
    p->verify_failed |= !ok;
    return 0;
lost:
    ct_report_error("lost the PVM partner task t%x at %llu bytes", p->peer,
                    (unsigned long long)size);
    return -1;
}

static int follow(struct pair *p)
{
    for (;;) {
        int cmd[4];
        if (recv_ints(p->peer, TAG_CMD, cmd, 4) != 0)
            return 1;
        if (cmd[0] != CMD_TRIAL)
            return 0;
        uint64_t size = (uint64_t)(unsigned)cmd[1];
        uint32_t seed = (uint32_t)cmd[3];
        prepare(p, size, seed);
        int ready = 1;
        send_ints(p->peer, TAG_STATUS, &ready, 1);
        for (int r = 0; r < cmd[2]; r++) {
            if (recv_bytes(p->peer, TAG_DATA, p->recvbuf, size) != 0)
                return 1;
            send_bytes(p->peer, TAG_DATA, p->recvbuf, size);
        }
        int ok = ct_pattern_check(p->recvbuf, size, seed);
        send_ints(p->peer, TAG_STATUS, &ok, 1);
    }
}

static int alloc_pair(struct pair *p, uint64_t max_size)
{
    p->sendbuf = malloc(max_size ? max_size : 1);
    p->recvbuf = malloc(max_size ? max_size : 1);
    p->seed = 0;
    return p->sendbuf && p->recvbuf ? 0 : -1;
}

int main(int argc, char **argv)
{
    ct_sweep_opts o;
    ct_sweep_defaults(&o);
    static const char *const routes[] = {"direct", "daemon", NULL};
    const char *host = NULL;
    int route = 0;
    uint64_t partner_size = 0; /* the driver's --max-size, given to the partner it spawns */
    ct_opt sweep[CT_SWEEP_NOPTS];
    ct_sweep_options(&o, sweep);
    const ct_opt table[] = {
        {"--host", CT_OPT_STRING, .dest = &host},
        {"--route", CT_OPT_CHOICE, .dest = &route, .choices = routes},
        {PARTNER_FLAG, CT_OPT_BYTES, .dest = &partner_size},
        {NULL, CT_OPT_TABLE, .table = sweep},
        {.type = CT_OPT_END},
    };
    char err[512];
    int bad = ct_opt_parse(table, argc, argv, err, sizeof err) != 0;
    if (o.help) {
        printf("usage: ct-pvm-pingpong [--host HOST] [--route direct|daemon] [options]\n%s",
               ct_sweep_usage);
        return 0;
    }
    int partner = partner_size > 0, direct = route == 0;
    if (partner)
        o.max_size = partner_size;
    if (bad || ct_sweep_validate(&o, MAX_MESSAGE, ct_basename(argv[0]), err, sizeof err)) {
        ct_report_error("%s", err);
        return CT_EXIT_USAGE;
    }

    pvm_setopt(PvmAutoErr, 0); /* errors are reported here, as JSON */
    int me = pvm_mytid();
    if (me < 0) {
        ct_report_error("cannot reach a PVM daemon (start one with: echo quit | pvm)");
        return 1;
    }
    if (direct)
        pvm_setopt(PvmRoute, PvmRouteDirect);
    struct pair p = {.inject_fault = o.inject_fault};
    if (alloc_pair(&p, o.max_size) != 0) {
        ct_report_error("cannot allocate 2 x %llu bytes", (unsigned long long)o.max_size);
        pvm_exit();
        return 1;
    }
    if (partner) {
        p.peer = pvm_parent();
        int rc = follow(&p);
        pvm_exit();
        return rc;
    }

    /* the partner allocates what the driver will send; an absolute path spawns from
     * anywhere, as long as every host sees the same file system (as virtual hosts do) */
    char self[4096], size_text[32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    snprintf(size_text, sizeof size_text, "%llu", (unsigned long long)o.max_size);
    char *child_argv[] = {PARTNER_FLAG, size_text, NULL};
    int got = pvm_spawn(self, child_argv, host ? PvmTaskHost : PvmTaskDefault,
                        host ? (char *)host : "", 1, &p.peer);
    if (got != 1) {
        ct_report_error("pvm_spawn of the partner%s%s failed (code %d)", host ? " on " : "",
                        host ? host : "", got == 0 ? p.peer : got);
        pvm_exit();
        return 1;
    }
    ct_sweep_transport t = {driver_trial, &p, 2};
    double start = ct_now();
    int rc = ct_sweep_run(&o, &t, ct_sweep_emit_sample, NULL);
    double wall = ct_now() - start;
    if (rc == 0) {
        int stop[4] = {CMD_STOP, 0, 0, 0};
        send_ints(p.peer, TAG_CMD, stop, 4);
        char *partner_host = "";
        struct pvmhostinfo *hosts;
        int nhost, narch;
        int hostid = pvm_tidtohost(p.peer);
        if (pvm_config(&nhost, &narch, &hosts) >= 0)
            for (int h = 0; h < nhost; h++)
                if (hosts[h].hi_tid == hostid)
                    partner_host = hosts[h].hi_name;
        ct_json j;
        ct_json_start(&j, stdout, "result");
        ct_json_string(&j, "verification", p.verify_failed ? "failed" : "passed");
        ct_json_open_object(&j, "detail");
        ct_json_string(&j, "mode", "pingpong");
        ct_json_string(&j, "route", direct ? "direct" : "daemon");
        ct_json_string(&j, "partner_host", partner_host);
        ct_json_number(&j, "sweep_wall_s", wall);
        ct_json_close_object(&j);
        ct_json_end(&j);
    } else {
        pvm_kill(p.peer);
    }
    pvm_exit();
    return rc != 0 || p.verify_failed;
}
