/* ncfwd_client.c - libct_ncfwd: PnetCDF's function names for the subset the I/O benchmark
 * uses, forwarded to ct-io-server over mutual TLS (ncfwd_proto.h). Needs no PnetCDF (only
 * its header, for the prototypes and constants) and builds with either MPI, so a client job
 * under MPICH writes netCDF files through a server job under OpenMPI on another cluster.
 *
 * Configuration (environment of every rank):
 *   CT_NCFWD_SERVER   host:port of the server's rank 0 (required)
 *   CT_NCFWD_CERT, CT_NCFWD_KEY, CT_NCFWD_CA   this client's certificate, key, and the CA
 *   CT_NCFWD_SERVER_SUBJECT  the subject (RFC 2253) the server's certificate must have; when
 *                     unset, its subjectAltName must name the host or address dialled. Either
 *                     way a certificate of the same CA issued to someone else is refused.
 *   CT_NCFWD_BATCH    1 (default): define-mode calls are pipelined and their replies read at
 *                     enddef, the open's reply carries the header so inq_* answer locally;
 *                     0: one round trip per call (the paper's forwarding)
 *   CT_NCFWD_SESSION  job (default): one session until the process exits; file: a session
 *                     per open/create, ended at close (the paper's servers per open/close)
 *   CT_NCFWD_TIMEOUT  seconds a read or write may wait (default 120)
 *
 * Sessions: rank 0 of the communicator says HELLO (its rank, the size, a random token) to
 * the server's rank 0, which answers with the ports of every server rank; client rank r then
 * connects to server rank r*S/P (S server ranks, P client ranks): one server rank per client
 * rank when S = P (the paper), contiguous client ranks aggregated when S < P.
 *
 * Semantics of this subset: every call is made by every rank of the communicator, in the same
 * order (collective use; independent put/get too), as the benchmark does. In batched mode an
 * error of create/def_* surfaces at enddef. Ids of new dimensions and variables are their
 * definition order, as netCDF assigns them; the server checks it.
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include "ncfwd_proto.h"

#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <openssl/rand.h>
#include <pnetcdf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FILES 16
#define MAX_CACHED 64

typedef struct {
    int used, ndims, nvars, indep, pending, first_error, cached;
    char dim_names[MAX_CACHED][NC_MAX_NAME + 1];
    MPI_Offset dim_lens[MAX_CACHED];
    char var_names[MAX_CACHED][NC_MAX_NAME + 1];
    int var_ndims[MAX_CACHED];
} file_state;

static struct {
    int connected, rank, batch, per_file, atexit_set;
    double timeout;
    SSL_CTX *ctx;
    ncfwd_conn conn;
    file_state files[MAX_FILES];
    char version[64];
} S = {.conn = {.fd = -1}};

static int fail(const char *what)
{
    fprintf(stderr, "ncfwd: rank %d: %s\n", S.rank, what);
    return NC_EIO;
}

static int conn_fail(void)
{
    char msg[NCFWD_MAX_SUBJECT + 40];
    snprintf(msg, sizeof msg, "server connection: %s", S.conn.error);
    ncfwd_close(&S.conn);
    S.connected = 0;
    return fail(msg);
}

static int tcp_connect(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *a;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* reads one REPLY into r (payload in buf); its status, or an error code */
static int reply(unsigned char *buf, ncfwd_rd *r)
{
    int op;
    uint32_t len;
    if (ncfwd_recv(&S.conn, &op, buf, NCFWD_MAX_CONTROL, &len))
        return conn_fail();
    if (op != NCFWD_REPLY) {
        snprintf(S.conn.error, sizeof S.conn.error, "%s frame where a REPLY was due",
                 ncfwd_op_name(op));
        return conn_fail();
    }
    ncfwd_rd_init(r, buf, len);
    int32_t status;
    if (ncfwd_rd_i32(r, &status)) {
        snprintf(S.conn.error, sizeof S.conn.error, "REPLY without a status");
        return conn_fail();
    }
    return status;
}

static void say_bye(void)
{
    if (S.connected) {
        ncfwd_send(&S.conn, NCFWD_BYE, NULL, 0);
        ncfwd_close(&S.conn);
        S.connected = 0;
    }
}

/* The session also ends at MPI_Finalize (the profiling interface): an MPICH job on a virtual
 * cluster's hosts did not get as far as the atexit handler, and its server logged an
 * "unexpected eof" for every session in place of the BYE. atexit stays for programs that
 * exit without finalizing. Then the next MPI_Finalize in the lookup order, not PMPI's: on a
 * virtual cluster MPICH jobs preload a finalize shim (barrier + _exit, for MPICH 4.0 + UCX's
 * TCP finalize hang, openucx/ucx#8738), which this definition in the program hid, so the
 * forwarding client alone ran MPICH's own finalize there. */
int MPI_Finalize(void)
{
    say_bye();
    int (*next)(void);
    *(void **)&next = dlsym(RTLD_NEXT, "MPI_Finalize"); /* POSIX's cast for a function */
    return next ? next() : PMPI_Finalize();
}

static int hello(const char *host, const char *port, uint32_t rank, uint32_t size, uint64_t token,
                 uint16_t *ports, uint32_t *servers)
{
    int fd = tcp_connect(host, port);
    if (fd < 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "cannot connect to %s:%s: %s", host, port, strerror(errno));
        return fail(msg);
    }
    ncfwd_set_timeout(fd, S.timeout);
    const char *pinned = getenv("CT_NCFWD_SERVER_SUBJECT");
    if (pinned && !*pinned)
        pinned = NULL;
    if (ncfwd_tls_start(&S.conn, S.ctx, fd, 0, pinned ? NULL : host) == 0 && pinned &&
        strcmp(S.conn.peer, pinned) != 0)
        snprintf(S.conn.error, sizeof S.conn.error,
                 "the server's certificate is %.450s, not the expected %.450s", S.conn.peer, pinned);
    if (S.conn.error[0]) {
        ncfwd_close(&S.conn);
        char msg[NCFWD_MAX_SUBJECT + 300];
        snprintf(msg, sizeof msg, "%s:%s: %s", host, port, S.conn.error);
        return fail(msg);
    }
    S.connected = 1;
    ncfwd_wr w = {0};
    ncfwd_wr_u32(&w, rank), ncfwd_wr_u32(&w, size), ncfwd_wr_u64(&w, token);
    if (ncfwd_send_wr(&S.conn, NCFWD_HELLO, &w))
        return conn_fail();
    static unsigned char buf[NCFWD_MAX_CONTROL];
    ncfwd_rd r;
    int status = reply(buf, &r);
    if (status != NC_NOERR) {
        if (S.connected)
            fprintf(stderr, "ncfwd: rank %d: the server refused the session (%d)\n", S.rank,
                    status);
        return status;
    }
    if (ports) {
        if (ncfwd_rd_u32(&r, servers) || *servers < 1 || *servers > NCFWD_MAX_SERVERS)
            return fail("HELLO reply without the server ranks");
        for (uint32_t i = 0; i < *servers; i++)
            if (ncfwd_rd_u16(&r, &ports[i]))
                return fail("HELLO reply cut short");
    }
    return NC_NOERR;
}

/* Collective over comm: a session with the server, unless one is open. */
static int session(MPI_Comm comm)
{
    int rank, size, status = NC_NOERR, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    S.rank = rank;
    int local = S.connected;
    MPI_Allreduce(&local, &rc, 1, MPI_INT, MPI_MIN, comm);
    if (rc)
        return NC_NOERR;
    const char *server = getenv("CT_NCFWD_SERVER"), *cert = getenv("CT_NCFWD_CERT"),
               *key = getenv("CT_NCFWD_KEY"), *ca = getenv("CT_NCFWD_CA");
    char host[256] = "", port[16] = "";
    const char *colon = server ? strrchr(server, ':') : NULL;
    if (!colon || colon == server || (size_t)(colon - server) >= sizeof host || !cert || !key || !ca)
        return fail("CT_NCFWD_SERVER (host:port), CT_NCFWD_CERT, CT_NCFWD_KEY and CT_NCFWD_CA "
                    "must be set");
    memcpy(host, server, (size_t)(colon - server));
    snprintf(port, sizeof port, "%s", colon + 1);
    const char *t = getenv("CT_NCFWD_TIMEOUT");
    S.timeout = t && atof(t) > 0 ? atof(t) : 120.0;
    const char *b = getenv("CT_NCFWD_BATCH");
    S.batch = !(b && strcmp(b, "0") == 0);
    const char *s = getenv("CT_NCFWD_SESSION");
    S.per_file = s && strcmp(s, "file") == 0;
    if (!S.ctx) {
        char why[300];
        S.ctx = ncfwd_tls_context(0, cert, key, ca, why, sizeof why);
        if (!S.ctx)
            return fail(why);
    }
    if (!S.atexit_set) {
        atexit(say_bye);
        S.atexit_set = 1;
        /* a server gone mid-write is then an error with its line (EPIPE), not a silent death
         * by SIGPIPE, unless the program chose a handler of its own */
        struct sigaction sa;
        if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
            signal(SIGPIPE, SIG_IGN);
    }
    /* rank 0 first: token and the server ranks' ports for everyone */
    uint64_t token = 0;
    uint16_t ports[NCFWD_MAX_SERVERS];
    uint32_t servers = 0;
    if (rank == 0) {
        if (RAND_bytes((unsigned char *)&token, sizeof token) != 1)
            token = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL;
        status = hello(host, port, 0, (uint32_t)size, token, ports, &servers);
    }
    unsigned char shared[8 + 4 + 4 + 2 * NCFWD_MAX_SERVERS];
    memcpy(shared, &token, 8), memcpy(shared + 8, &status, 4), memcpy(shared + 12, &servers, 4);
    memcpy(shared + 16, ports, sizeof ports);
    MPI_Bcast(shared, sizeof shared, MPI_BYTE, 0, comm);
    memcpy(&token, shared, 8), memcpy(&status, shared + 8, 4), memcpy(&servers, shared + 12, 4);
    memcpy(ports, shared + 16, sizeof ports);
    if (status != NC_NOERR)
        return status;
    if (rank != 0) {
        int mine = (int)((long long)rank * servers / size);
        char p[16];
        snprintf(p, sizeof p, "%u", (unsigned)ports[mine]);
        status = hello(host, mine == 0 ? port : p, (uint32_t)rank, (uint32_t)size, token, NULL,
                       NULL);
    }
    MPI_Allreduce(&status, &rc, 1, MPI_INT, MPI_MIN, comm);
    return rc;
}

static int slot_of(int ncid)
{
    return ncid >= 0 && ncid < MAX_FILES && S.files[ncid].used ? ncid : -1;
}

/* Sends one request; in batched mode (pipelined) its reply is read later, else now. */
static int request(int ncid, int op, const ncfwd_wr *w, int pipelined, unsigned char *buf,
                   ncfwd_rd *r)
{
    if (!S.connected)
        return fail("no session with the server");
    if (ncfwd_send_wr(&S.conn, op, w))
        return conn_fail();
    if (pipelined) {
        S.files[ncid].pending++;
        return NC_NOERR;
    }
    return reply(buf, r);
}

/* Reads the replies of pipelined requests; the first error among them. */
static int drain(int ncid)
{
    static unsigned char buf[NCFWD_MAX_CONTROL];
    file_state *f = &S.files[ncid];
    int first = f->first_error;
    while (f->pending > 0) {
        ncfwd_rd r;
        int status = reply(buf, &r);
        f->pending--;
        if (!S.connected)
            return status;
        if (status != NC_NOERR && first == NC_NOERR)
            first = status;
    }
    f->first_error = NC_NOERR;
    return first;
}

static int new_slot(void)
{
    for (int i = 0; i < MAX_FILES; i++)
        if (!S.files[i].used) {
            memset(&S.files[i], 0, sizeof S.files[i]);
            S.files[i].used = 1;
            return i;
        }
    return -1;
}

static int end_file(int ncid)
{
    S.files[ncid].used = 0;
    if (S.per_file) {
        int open = 0;
        for (int i = 0; i < MAX_FILES; i++)
            open |= S.files[i].used;
        if (!open)
            say_bye();
    }
    return NC_NOERR;
}

/* ------------------------------------------------------------ the PnetCDF subset */

const char *ncmpi_inq_libvers(void)
{
    snprintf(S.version, sizeof S.version, "clustertune ncfwd protocol %d", NCFWD_VERSION);
    return S.version;
}

const char *ncmpi_strerror(int err)
{
    switch (err) {
    case NC_NOERR: return "No error";
    case NC_EIO: return "I/O forwarding: the server connection failed (see stderr)";
    case NC_EACCESS: return "I/O forwarding: access refused by the server";
    case NC_ENOENT: return "No such file";
    case NC_EFILE: return "I/O forwarding: the server's file operation failed";
    case NC_EBADDIM: return "Invalid dimension id or name";
    case NC_ENOTVAR: return "Variable not found";
    default: return "netCDF error (forwarded from the server)";
    }
}

static int create_or_open(int op, MPI_Comm comm, const char *path, int mode, int *ncidp)
{
    int rc = session(comm);
    if (rc != NC_NOERR)
        return rc;
    int ncid = new_slot();
    if (ncid < 0)
        return fail("too many open files");
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, ncid), ncfwd_wr_i32(&w, mode), ncfwd_wr_str(&w, path, strlen(path));
    static unsigned char buf[NCFWD_MAX_CONTROL];
    ncfwd_rd r;
    rc = request(ncid, op, &w, op == NCFWD_CREATE && S.batch, buf, &r);
    if (rc == NC_NOERR && op == NCFWD_OPEN) { /* the header, cached for inq_* */
        file_state *f = &S.files[ncid];
        uint32_t ndims, nvars;
        int bad = ncfwd_rd_u32(&r, &ndims);
        for (uint32_t i = 0; !bad && i < ndims; i++) {
            char name[NC_MAX_NAME + 1];
            int64_t len;
            bad = ncfwd_rd_str(&r, name, sizeof name) || ncfwd_rd_i64(&r, &len);
            if (!bad && i < MAX_CACHED) {
                memcpy(f->dim_names[i], name, sizeof name);
                f->dim_lens[i] = len;
            }
        }
        bad = bad || ncfwd_rd_u32(&r, &nvars);
        for (uint32_t i = 0; !bad && i < nvars; i++) {
            char name[NC_MAX_NAME + 1];
            int32_t nd;
            bad = ncfwd_rd_str(&r, name, sizeof name) || ncfwd_rd_i32(&r, &nd);
            if (!bad && i < MAX_CACHED) {
                memcpy(f->var_names[i], name, sizeof name);
                f->var_ndims[i] = nd;
            }
        }
        if (bad)
            rc = fail("OPEN reply cut short");
        f->ndims = (int)ndims, f->nvars = (int)nvars;
        f->cached = !bad && ndims <= MAX_CACHED && nvars <= MAX_CACHED;
    }
    if (rc != NC_NOERR) {
        end_file(ncid);
        return rc;
    }
    *ncidp = ncid;
    return NC_NOERR;
}

int ncmpi_create(MPI_Comm comm, const char *path, int cmode, MPI_Info info, int *ncidp)
{
    (void)info;
    return create_or_open(NCFWD_CREATE, comm, path, cmode, ncidp);
}

int ncmpi_open(MPI_Comm comm, const char *path, int omode, MPI_Info info, int *ncidp)
{
    (void)info;
    return create_or_open(NCFWD_OPEN, comm, path, omode, ncidp);
}

/* a define-mode call: pipelined in batched mode */
static int define(int ncid, int op, const ncfwd_wr *w, int32_t *id)
{
    if (slot_of(ncid) < 0)
        return NC_EBADID;
    static unsigned char buf[NCFWD_MAX_CONTROL];
    ncfwd_rd r;
    int rc = request(ncid, op, w, S.batch, buf, &r);
    if (rc == NC_NOERR && id && !S.batch && ncfwd_rd_i32(&r, id))
        return fail("reply without the id");
    return rc;
}

int ncmpi_put_att_text(int ncid, int varid, const char *name, MPI_Offset len, const char *op)
{
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, ncid), ncfwd_wr_i32(&w, varid), ncfwd_wr_str(&w, name, strlen(name));
    ncfwd_wr_str(&w, op, (size_t)len);
    return define(ncid, NCFWD_PUT_ATT_TEXT, &w, NULL);
}

int ncmpi_def_dim(int ncid, const char *name, MPI_Offset len, int *idp)
{
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, ncid), ncfwd_wr_str(&w, name, strlen(name)), ncfwd_wr_i64(&w, len);
    int32_t id = slot_of(ncid) >= 0 ? S.files[ncid].ndims : -1; /* netCDF: definition order */
    int rc = define(ncid, NCFWD_DEF_DIM, &w, &id);
    if (rc == NC_NOERR) {
        S.files[ncid].ndims++;
        *idp = id;
    }
    return rc;
}

int ncmpi_def_var(int ncid, const char *name, nc_type xtype, int ndims, const int *dimidsp,
                  int *varidp)
{
    if (ndims < 0 || ndims > NCFWD_MAX_DIMS)
        return NC_EINVAL;
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, ncid), ncfwd_wr_str(&w, name, strlen(name)), ncfwd_wr_i32(&w, xtype);
    ncfwd_wr_u32(&w, (uint32_t)ndims);
    for (int i = 0; i < ndims; i++)
        ncfwd_wr_i32(&w, dimidsp[i]);
    int32_t id = slot_of(ncid) >= 0 ? S.files[ncid].nvars : -1;
    int rc = define(ncid, NCFWD_DEF_VAR, &w, &id);
    if (rc == NC_NOERR) {
        if (id < MAX_CACHED)
            S.files[ncid].var_ndims[id] = ndims;
        S.files[ncid].nvars++;
        *varidp = id;
    }
    return rc;
}

static int simple(int ncid, int op)
{
    if (slot_of(ncid) < 0)
        return NC_EBADID;
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, ncid);
    static unsigned char buf[NCFWD_MAX_CONTROL];
    ncfwd_rd r;
    int rc = request(ncid, op, &w, 0, buf, &r);
    return rc;
}

/* A request whose reply comes after those of the pipelined requests before it: sent
 * pipelined, then every reply read in order; the first error among them. */
static int after_pipeline(int ncid, int op)
{
    if (slot_of(ncid) < 0)
        return NC_EBADID;
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, ncid);
    int rc = request(ncid, op, &w, 1, NULL, NULL);
    return rc != NC_NOERR ? rc : drain(ncid);
}

int ncmpi_enddef(int ncid) { return after_pipeline(ncid, NCFWD_ENDDEF); }

int ncmpi_inq_dimid(int ncid, const char *name, int *idp)
{
    if (slot_of(ncid) < 0)
        return NC_EBADID;
    file_state *f = &S.files[ncid];
    if (S.batch && f->cached) {
        for (int i = 0; i < f->ndims; i++)
            if (strcmp(f->dim_names[i], name) == 0)
                return *idp = i, NC_NOERR;
        return NC_EBADDIM;
    }
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, ncid), ncfwd_wr_str(&w, name, strlen(name));
    static unsigned char buf[NCFWD_MAX_CONTROL];
    ncfwd_rd r;
    int32_t id;
    int rc = request(ncid, NCFWD_INQ_DIMID, &w, 0, buf, &r);
    if (rc == NC_NOERR && ncfwd_rd_i32(&r, &id))
        return fail("INQ_DIMID reply cut short");
    if (rc == NC_NOERR)
        *idp = id;
    return rc;
}

int ncmpi_inq_dimlen(int ncid, int dimid, MPI_Offset *lenp)
{
    if (slot_of(ncid) < 0)
        return NC_EBADID;
    file_state *f = &S.files[ncid];
    if (S.batch && f->cached) {
        if (dimid < 0 || dimid >= f->ndims)
            return NC_EBADDIM;
        *lenp = f->dim_lens[dimid];
        return NC_NOERR;
    }
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, ncid), ncfwd_wr_i32(&w, dimid);
    static unsigned char buf[NCFWD_MAX_CONTROL];
    ncfwd_rd r;
    int64_t len;
    int rc = request(ncid, NCFWD_INQ_DIMLEN, &w, 0, buf, &r);
    if (rc == NC_NOERR && ncfwd_rd_i64(&r, &len))
        return fail("INQ_DIMLEN reply cut short");
    if (rc == NC_NOERR)
        *lenp = len;
    return rc;
}

int ncmpi_inq_varid(int ncid, const char *name, int *varidp)
{
    if (slot_of(ncid) < 0)
        return NC_EBADID;
    file_state *f = &S.files[ncid];
    if (S.batch && f->cached) {
        for (int i = 0; i < f->nvars; i++)
            if (strcmp(f->var_names[i], name) == 0)
                return *varidp = i, NC_NOERR;
        return NC_ENOTVAR;
    }
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, ncid), ncfwd_wr_str(&w, name, strlen(name));
    static unsigned char buf[NCFWD_MAX_CONTROL];
    ncfwd_rd r;
    int32_t id;
    int rc = request(ncid, NCFWD_INQ_VARID, &w, 0, buf, &r);
    if (rc == NC_NOERR && ncfwd_rd_i32(&r, &id))
        return fail("INQ_VARID reply cut short");
    if (rc == NC_NOERR)
        *varidp = id;
    return rc;
}

/* Batched mode: the mode switch travels with each put/get (the server switches itself). */
int ncmpi_begin_indep_data(int ncid)
{
    if (slot_of(ncid) < 0)
        return NC_EBADID;
    S.files[ncid].indep = 1;
    return S.batch ? NC_NOERR : simple(ncid, NCFWD_BEGIN_INDEP);
}

int ncmpi_end_indep_data(int ncid)
{
    if (slot_of(ncid) < 0)
        return NC_EBADID;
    S.files[ncid].indep = 0;
    return S.batch ? NC_NOERR : simple(ncid, NCFWD_END_INDEP);
}

static int transfer(int op, int ncid, int varid, const MPI_Offset *start, const MPI_Offset *count,
                    void *data, int collective)
{
    if (slot_of(ncid) < 0)
        return NC_EBADID;
    file_state *f = &S.files[ncid];
    if (varid < 0 || varid >= f->nvars || varid >= MAX_CACHED)
        return NC_ENOTVAR;
    if (collective == f->indep)
        return collective ? NC_EINDEP : NC_ENOTINDEP;
    int ndims = f->var_ndims[varid];
    uint64_t values = 1;
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, ncid), ncfwd_wr_i32(&w, varid), ncfwd_wr_u8(&w, (uint8_t)collective);
    ncfwd_wr_u32(&w, (uint32_t)ndims);
    for (int i = 0; i < ndims; i++) {
        if (start[i] < 0 || count[i] < 0)
            return NC_EINVALCOORDS;
        ncfwd_wr_i64(&w, start[i]), ncfwd_wr_i64(&w, count[i]);
        values *= (uint64_t)count[i];
    }
    if (!S.connected)
        return fail("no session with the server");
    if (ncfwd_send_wr(&S.conn, op, &w))
        return conn_fail();
    if (op == NCFWD_PUT && ncfwd_send_data(&S.conn, data, values * sizeof(int)))
        return conn_fail();
    static unsigned char buf[NCFWD_MAX_CONTROL];
    ncfwd_rd r;
    int rc = reply(buf, &r);
    if (rc == NC_NOERR && op == NCFWD_GET && ncfwd_recv_data(&S.conn, data, values * sizeof(int)))
        return conn_fail();
    return rc;
}

int ncmpi_put_vara_int_all(int ncid, int varid, const MPI_Offset *start, const MPI_Offset *count,
                           const int *op)
{
    return transfer(NCFWD_PUT, ncid, varid, start, count, (void *)op, 1);
}

int ncmpi_put_vara_int(int ncid, int varid, const MPI_Offset *start, const MPI_Offset *count,
                       const int *op)
{
    return transfer(NCFWD_PUT, ncid, varid, start, count, (void *)op, 0);
}

int ncmpi_get_vara_int_all(int ncid, int varid, const MPI_Offset *start, const MPI_Offset *count,
                           int *ip)
{
    return transfer(NCFWD_GET, ncid, varid, start, count, ip, 1);
}

int ncmpi_get_vara_int(int ncid, int varid, const MPI_Offset *start, const MPI_Offset *count,
                       int *ip)
{
    return transfer(NCFWD_GET, ncid, varid, start, count, ip, 0);
}

int ncmpi_close(int ncid)
{
    int rc = after_pipeline(ncid, NCFWD_CLOSE);
    if (slot_of(ncid) >= 0)
        end_file(ncid);
    return rc;
}
