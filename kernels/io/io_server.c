/* ct-io-server - the forwarding I/O server of remote netCDF I/O (seeds/004's I/O servers on
 * cluster II): an OpenMPI job whose S ranks perform real PnetCDF calls on this cluster's file
 * system for the client ranks of a job on another cluster (libct_ncfwd, any MPI), over
 * mutual TLS (ncfwd_proto.h).
 *
 *   mpirun -np S ct-io-server --export DIR --cert C --key K --ca CA --gridmap FILE
 *                             [--port P] [--idle-timeout 60] [--sessions N] [--max-request B]
 *                             [--round 4M]
 *
 * Rank 0 listens on --port (0: any; the ready line on stderr says which), every other rank on
 * a port of its own. A session: client rank 0 says HELLO on rank 0's port; the grid-mapfile
 * must name its certificate's subject; rank 0 answers with every rank's port and tells the
 * other ranks; client rank r then connects to server rank r*S/P with the session's token and
 * the same subject. One session at a time, in the order they come; then the next.
 *
 * Serving: the server ranks take one request from each of their clients, agree (one
 * allreduce) that all of them are well formed and the same operation, and perform it together
 * (create/def/enddef/open/close collectively on the server ranks, puts and gets as one
 * non-blocking request per client completed by wait_all, so S < P aggregates; in rounds of
 * --round bytes per client, received or sent while the other rounds travel, so the link
 * stays busy: see transfer()). A malformed,
 * truncated or oversized frame, a refused path, a client that stops talking for
 * --idle-timeout seconds or disconnects with a file open, ends that session only: its files
 * are aborted, and the server takes the next session.
 *
 * Files and their writers: a created file is written under a temporary name in the same
 * directory (".NAME.ct-partial-TOKEN") and renamed to NAME only by a close that every server
 * rank completed for clients that all stayed: a file whose writer died is removed, never
 * visible under its name, and an older complete NAME stays as it was.
 *
 * Access (GSI-style): the grid-mapfile maps certificate subjects to a directory under
 * --export and a right, one line each:  "/C=JP/O=clustertune/CN=alice" area [rw|ro]
 * Paths are taken relative to that area (an absolute path must lie inside it); "..", a path
 * whose directory resolves outside the area, or a symlink as the file are refused. Every
 * refusal is logged on stderr as "ct-io-server: refused ...".
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "ct.h"
#include "ct_mpi.h"
#include "ct_opt.h"
#include "ncfwd_proto.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pnetcdf.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 64 /* per server rank */
#define MAX_FILES 16
#define GRIDMAP_LINE 2048

typedef struct {
    const char *export_dir, *cert, *key, *ca, *gridmap;
    int port, sessions, help;
    double idle;
    uint64_t max_request;
    uint64_t round; /* bytes per client per round of a put/get; 0: whole requests */
} options;

typedef struct {
    int used, ncid, writing, indep;
    char final[PATH_MAX], temp[PATH_MAX];
} file_slot;

typedef struct {
    int rank, size;
    options o;
    SSL_CTX *ctx;
    int listen_fd, port;
    char export_real[PATH_MAX];
    /* the session */
    uint64_t token;
    uint32_t clients; /* P */
    char subject[256], area[PATH_MAX];
    int read_only;
    int nconn;
    int conn_rank[MAX_CLIENTS];
    ncfwd_conn conn[MAX_CLIENTS];
    file_slot files[MAX_FILES];
    char replaced[PATH_MAX]; /* rank 0: the file a close replaced, unlinked after the reply */
} server;

static void refused(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refused(const char *who, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ct-io-server: refused %s: %s\n", who && *who ? who : "a client", msg);
    fflush(stderr);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ct-io-server: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    fflush(stderr);
    va_end(ap);
}

/* ------------------------------------------------------------ access: grid-mapfile, paths */

/* The area and right of a subject; 0, or -1 if the grid-mapfile does not name it. */
static int gridmap_lookup(const server *s, const char *subject, char *area, size_t len, int *ro)
{
    FILE *f = fopen(s->o.gridmap, "r");
    if (!f)
        return -1;
    char line[GRIDMAP_LINE];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        char *p = line + strspn(line, " \t");
        if (*p != '"')
            continue; /* comments, blank lines */
        char *end = strchr(p + 1, '"');
        if (!end)
            continue;
        *end = '\0';
        if (strcmp(p + 1, subject) != 0)
            continue;
        char a[PATH_MAX] = ".", right[8] = "rw";
        sscanf(end + 1, "%4095s %7s", a, right);
        snprintf(area, len, "%s", a);
        *ro = strcmp(right, "ro") == 0;
        found = 0;
    }
    fclose(f);
    return found;
}

static int inside(const char *root, const char *path)
{
    size_t n = strlen(root);
    return strncmp(root, path, n) == 0 && (path[n] == '\0' || path[n] == '/' || n == 1);
}

/* The file a client path names under the session's area: 0, or -1 with why. */
static int resolve(const server *s, const char *path, int writing, char *out, size_t outlen,
                   char *why, size_t whylen)
{
    char root[PATH_MAX], rel[PATH_MAX];
    if (!realpath(s->area, root)) {
        snprintf(why, whylen, "the area %s does not exist", s->area);
        return -1;
    }
    if (!*path) {
        snprintf(why, whylen, "empty path");
        return -1;
    }
    if (path[0] == '/') {
        if (!inside(root, path) || strlen(path) == strlen(root)) {
            snprintf(why, whylen, "absolute path %s outside the export area", path);
            return -1;
        }
        snprintf(rel, sizeof rel, "%s", path + strlen(root));
    } else {
        snprintf(rel, sizeof rel, "%s", path);
    }
    /* components: no "..", and the file's directory must resolve inside the area */
    char dir[PATH_MAX], copy[PATH_MAX], *save = NULL, *last = NULL;
    snprintf(copy, sizeof copy, "%s", rel);
    snprintf(dir, sizeof dir, "%s", root);
    for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, "..") == 0) {
            snprintf(why, whylen, "path %s contains ..", path);
            return -1;
        }
        if (strcmp(c, ".") == 0)
            continue;
        if (last) {
            size_t n = strlen(dir);
            snprintf(dir + n, sizeof dir - n, "/%s", last);
        }
        last = c;
    }
    if (!last) {
        snprintf(why, whylen, "path %s names no file", path);
        return -1;
    }
    char real_dir[PATH_MAX];
    if (!realpath(dir, real_dir)) {
        snprintf(why, whylen, "directory of %s does not exist", path);
        return -1;
    }
    if (!inside(root, real_dir)) {
        snprintf(why, whylen, "path %s leaves the export area (through a symlink)", path);
        return -1;
    }
    if ((size_t)snprintf(out, outlen, "%s/%s", real_dir, last) >= outlen) {
        snprintf(why, whylen, "path too long");
        return -1;
    }
    struct stat st;
    if (lstat(out, &st) == 0 && S_ISLNK(st.st_mode)) {
        snprintf(why, whylen, "path %s is a symlink", path);
        return -1;
    }
    if (!writing && (lstat(out, &st) != 0 || !S_ISREG(st.st_mode))) {
        snprintf(why, whylen, "no file %s", path);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ sockets, sessions */

static int listen_on(int port, int *bound)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 64) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        close(fd);
        return -1;
    }
    *bound = ntohs(a.sin_port);
    return fd;
}

/* A TLS connection accepted before deadline (monotonic s); 0, or -1 when none came. */
static int accept_one(server *s, ncfwd_conn *c, double deadline)
{
    for (;;) {
        double left = deadline - ct_now();
        if (left <= 0)
            return -1;
        struct pollfd p = {.fd = s->listen_fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left * 1000 > 1000 ? 1000 : left * 1000 + 1)) <= 0)
            continue;
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        ncfwd_set_timeout(fd, 10.0); /* the handshake and HELLO */
        if (ncfwd_tls_start(c, s->ctx, fd, 1)) {
            refused(c->peer, "%s", c->error);
            ncfwd_close(c);
            continue;
        }
        ncfwd_set_timeout(fd, s->o.idle);
        return 0;
    }
}

static void send_status(ncfwd_conn *c, int status)
{
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, status);
    ncfwd_send_wr(c, NCFWD_REPLY, &w);
}

/* The HELLO of a connection: 0, or -1 (refused, logged, closed). */
static int read_hello(server *s, ncfwd_conn *c, uint32_t *rank, uint32_t *size, uint64_t *token)
{
    unsigned char buf[256];
    int op;
    uint32_t len;
    ncfwd_rd r;
    if (ncfwd_recv(c, &op, buf, sizeof buf, &len)) {
        refused(c->peer, "%s", c->error);
        ncfwd_close(c);
        return -1;
    }
    ncfwd_rd_init(&r, buf, len);
    if (op != NCFWD_HELLO || ncfwd_rd_u32(&r, rank) || ncfwd_rd_u32(&r, size) ||
        ncfwd_rd_u64(&r, token) || ncfwd_rd_done(&r) || *size < 1 || *rank >= *size) {
        refused(c->peer, "malformed HELLO (%s frame of %u bytes)", ncfwd_op_name(op), len);
        send_status(c, NC_EINVAL);
        ncfwd_close(c);
        return -1;
    }
    (void)s;
    return 0;
}

static void end_session(server *s)
{
    for (int i = 0; i < s->nconn; i++)
        ncfwd_close(&s->conn[i]);
    s->nconn = 0;
}

/* Waits, without spinning, for a request every rank takes part in (test, then sleep
 * `nap_ns`). */
static void wait_napping(MPI_Request *rq, long nap_ns)
{
    for (;;) {
        int done;
        CT_MPI_CHECK(MPI_Test(rq, &done, MPI_STATUS_IGNORE));
        if (done)
            return;
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
    }
}

static void wait_quietly(MPI_Request *rq)
{
    wait_napping(rq, 2000000);
}

/* Collective: a session formed on every rank (1), or none (0: try again). */
static int open_session(server *s, const uint16_t *ports)
{
    /* shared: token, clients, read_only, area */
    struct {
        uint64_t token;
        uint32_t clients;
        int32_t read_only, ok;
        char subject[256], area[PATH_MAX];
    } sh = {0};
    if (s->rank == 0) {
        ncfwd_conn c = {.fd = -1};
        accept_one(s, &c, 1e300);
        uint32_t rank, size;
        uint64_t token;
        if (read_hello(s, &c, &rank, &size, &token) == 0) {
            char area[PATH_MAX];
            int ro = 0;
            if (rank != 0) {
                refused(c.peer, "HELLO of client rank %u outside a session", rank);
                send_status(&c, NC_EINVAL);
                ncfwd_close(&c);
            } else if (gridmap_lookup(s, c.peer, area, sizeof area, &ro)) {
                refused(c.peer, "subject not in the grid-mapfile %s", s->o.gridmap);
                send_status(&c, NC_EACCESS);
                ncfwd_close(&c);
            } else if (strstr(area, "..") || area[0] == '/') {
                refused(c.peer, "grid-mapfile area %s is not a directory under the export", area);
                send_status(&c, NC_EACCESS);
                ncfwd_close(&c);
            } else {
                sh.ok = 1, sh.token = token, sh.clients = size, sh.read_only = ro;
                snprintf(sh.subject, sizeof sh.subject, "%s", c.peer);
                if ((size_t)snprintf(sh.area, sizeof sh.area, "%s/%s", s->export_real, area) >=
                    sizeof sh.area)
                    sh.ok = 0;
                s->conn[0] = c, s->conn_rank[0] = 0, s->nconn = 1;
            }
        }
    }
    MPI_Request rq;
    CT_MPI_CHECK(MPI_Ibcast(&sh, sizeof sh, MPI_BYTE, 0, MPI_COMM_WORLD, &rq));
    wait_quietly(&rq);
    if (!sh.ok)
        return 0;
    s->token = sh.token, s->clients = sh.clients, s->read_only = sh.read_only;
    snprintf(s->subject, sizeof s->subject, "%s", sh.subject);
    snprintf(s->area, sizeof s->area, "%s", sh.area);
    memset(s->files, 0, sizeof s->files);
    if (s->rank == 0) {
        ncfwd_wr w = {0};
        ncfwd_wr_i32(&w, NC_NOERR), ncfwd_wr_u32(&w, (uint32_t)s->size);
        for (int i = 0; i < s->size; i++)
            ncfwd_wr_u16(&w, ports[i]);
        ncfwd_send_wr(&s->conn[0], NCFWD_REPLY, &w);
        say("session of %u client ranks for %s (area %s%s)", s->clients, s->subject, s->area,
            s->read_only ? ", read-only" : "");
    }
    /* my clients: ranks r with r * S / P == my rank */
    int expect = 0;
    for (uint32_t r = 0; r < s->clients; r++)
        expect += (int)((uint64_t)r * (uint64_t)s->size / s->clients) == s->rank;
    int ok = expect <= MAX_CLIENTS;
    double deadline = ct_now() + s->o.idle;
    while (ok && s->nconn < expect) {
        ncfwd_conn c = {.fd = -1};
        if (accept_one(s, &c, deadline)) {
            refused(NULL, "session of %s: client ranks missing after %.0f s", s->subject,
                    s->o.idle);
            ok = 0;
            break;
        }
        uint32_t rank, size;
        uint64_t token;
        if (read_hello(s, &c, &rank, &size, &token))
            continue;
        int mine = (int)((uint64_t)rank * (uint64_t)s->size / s->clients) == s->rank;
        int dup = 0;
        for (int i = 0; i < s->nconn; i++)
            dup |= s->conn_rank[i] == (int)rank;
        if (token != s->token || size != s->clients || !mine || dup ||
            strcmp(c.peer, s->subject) != 0) {
            refused(c.peer, "HELLO of client rank %u does not belong to the session of %s", rank,
                    s->subject);
            send_status(&c, NC_EACCESS);
            ncfwd_close(&c);
            continue;
        }
        send_status(&c, NC_NOERR);
        s->conn[s->nconn] = c, s->conn_rank[s->nconn] = (int)rank, s->nconn++;
    }
    int all;
    CT_MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    if (!all)
        end_session(s);
    return all;
}

/* ------------------------------------------------------------ serving requests */

typedef struct {
    int op;
    uint32_t len;
    unsigned char buf[NCFWD_MAX_CONTROL];
    /* PUT / GET */
    int32_t handle, varid;
    uint8_t collective;
    uint32_t ndims;
    MPI_Offset start[NCFWD_MAX_DIMS], count[NCFWD_MAX_DIMS];
    uint64_t bytes;
    int *data;
    uint64_t frame_left; /* of the DATA frame being received (streamed put) */
} request;

static file_slot *slot(server *s, int32_t handle)
{
    return handle >= 0 && handle < MAX_FILES && s->files[handle].used ? &s->files[handle] : NULL;
}

/* The transfer arguments of a PUT/GET; its data for a PUT. 0, or -1 with why. */
static int read_transfer(server *s, ncfwd_conn *c, request *q, char *why, size_t whylen)
{
    ncfwd_rd r;
    ncfwd_rd_init(&r, q->buf, q->len);
    if (ncfwd_rd_i32(&r, &q->handle) || ncfwd_rd_i32(&r, &q->varid) ||
        ncfwd_rd_u8(&r, &q->collective) || ncfwd_rd_u32(&r, &q->ndims) ||
        q->ndims > NCFWD_MAX_DIMS || q->collective > 1) {
        snprintf(why, whylen, "malformed %s request", ncfwd_op_name(q->op));
        return -1;
    }
    q->bytes = sizeof(int);
    for (uint32_t i = 0; i < q->ndims; i++) {
        int64_t a, b;
        if (ncfwd_rd_i64(&r, &a) || ncfwd_rd_i64(&r, &b) || a < 0 || b < 0 ||
            (b > 0 && q->bytes > s->o.max_request / (uint64_t)b)) {
            snprintf(why, whylen, "malformed or oversized %s request", ncfwd_op_name(q->op));
            return -1;
        }
        q->start[i] = a, q->count[i] = b;
        q->bytes *= (uint64_t)b;
    }
    if (ncfwd_rd_done(&r) || q->bytes > s->o.max_request) {
        snprintf(why, whylen, "malformed or oversized %s request", ncfwd_op_name(q->op));
        return -1;
    }
    q->data = malloc(q->bytes ? q->bytes : 1);
    if (!q->data) {
        snprintf(why, whylen, "no memory for %llu bytes", (unsigned long long)q->bytes);
        return -1;
    }
    q->frame_left = 0;
    if (q->op == NCFWD_PUT && s->o.round == 0 && ncfwd_recv_data(c, q->data, q->bytes)) {
        snprintf(why, whylen, "%s", c->error);
        return -1;
    }
    return 0;
}

static void abort_files(server *s)
{
    for (int i = 0; i < MAX_FILES; i++) {
        file_slot *f = &s->files[i];
        if (!f->used)
            continue;
        ncmpi_abort(f->ncid);
        if (f->writing && s->rank == 0)
            unlink(f->temp);
        if (s->rank == 0)
            say("aborted %s: %s removed, %s left as it was", f->final, f->temp, f->final);
        f->used = 0;
    }
}

/* Rank 0's control payload, on every rank (define calls need the same arguments). */
static void share_payload(request *q0, unsigned char *payload, uint32_t *len)
{
    uint32_t n = q0 ? q0->len : 0;
    CT_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD));
    if (q0)
        memcpy(payload, q0->buf, n);
    CT_MPI_CHECK(MPI_Bcast(payload, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD));
    *len = n;
}

/* Path checks on rank 0, the verdict everywhere: 0, or an error status (logged). */
static int shared_path(server *s, const char *path, int writing, file_slot *f)
{
    struct {
        int32_t status;
        char final[PATH_MAX];
    } v = {NC_NOERR, ""};
    if (s->rank == 0) {
        char why[PATH_MAX + 100];
        if (writing && s->read_only) {
            refused(s->subject, "create %s: read-only access", path);
            v.status = NC_EACCESS;
        } else if (resolve(s, path, writing, v.final, sizeof v.final, why, sizeof why)) {
            refused(s->subject, "%s", why);
            v.status = writing ? NC_EACCESS : NC_ENOENT;
        }
    }
    CT_MPI_CHECK(MPI_Bcast(&v, sizeof v, MPI_BYTE, 0, MPI_COMM_WORLD));
    if (v.status == NC_NOERR) {
        snprintf(f->final, sizeof f->final, "%s", v.final);
        if (writing) {
            char *base = strrchr(v.final, '/');
            int dir = (int)(base - v.final);
            snprintf(f->temp, sizeof f->temp, "%.*s/.%s.ct-partial-%016llx", dir, v.final,
                     base + 1, (unsigned long long)s->token);
        }
    }
    return v.status;
}

/* One metadata request, performed by every rank with rank 0's arguments; its reply. */
static int metadata(server *s, int op, const unsigned char *payload, uint32_t len, ncfwd_wr *out)
{
    ncfwd_rd r;
    ncfwd_rd_init(&r, payload, len);
    int32_t handle = -1, a = 0, id = -1;
    char name[NCFWD_MAX_NAME] = "", text[NCFWD_MAX_NAME] = "";
    int64_t len64;
    if (ncfwd_rd_i32(&r, &handle))
        return NC_EINVAL;
    file_slot *f = slot(s, handle);
    if (op != NCFWD_CREATE && op != NCFWD_OPEN && !f)
        return NC_EBADID;
    switch (op) {
    case NCFWD_CREATE:
    case NCFWD_OPEN: {
        if (ncfwd_rd_i32(&r, &a) || ncfwd_rd_str(&r, text, sizeof text) || ncfwd_rd_done(&r))
            return NC_EINVAL;
        if (handle < 0 || handle >= MAX_FILES || s->files[handle].used)
            return NC_EBADID;
        f = &s->files[handle];
        memset(f, 0, sizeof *f);
        int writing = op == NCFWD_CREATE;
        if (!writing && (a & NC_WRITE)) {
            if (s->rank == 0)
                refused(s->subject, "open %s for writing: only reading is forwarded", text);
            return NC_EPERM;
        }
        int status = shared_path(s, text, writing, f);
        if (status != NC_NOERR)
            return status;
        status = writing ? ncmpi_create(MPI_COMM_WORLD, f->temp, a | NC_CLOBBER, MPI_INFO_NULL,
                                        &f->ncid)
                         : ncmpi_open(MPI_COMM_WORLD, f->final, NC_NOWRITE, MPI_INFO_NULL,
                                      &f->ncid);
        if (status != NC_NOERR)
            return status;
        f->used = 1, f->writing = writing;
        if (!writing) { /* the header, for the client's inq_* */
            int ndims, nvars;
            ncmpi_inq_ndims(f->ncid, &ndims);
            ncmpi_inq_nvars(f->ncid, &nvars);
            ncfwd_wr_u32(out, (uint32_t)ndims);
            for (int i = 0; i < ndims; i++) {
                char n[NC_MAX_NAME + 1];
                MPI_Offset l;
                ncmpi_inq_dim(f->ncid, i, n, &l);
                ncfwd_wr_str(out, n, strlen(n)), ncfwd_wr_i64(out, l);
            }
            ncfwd_wr_u32(out, (uint32_t)nvars);
            for (int i = 0; i < nvars; i++) {
                char n[NC_MAX_NAME + 1];
                int nd;
                ncmpi_inq_varname(f->ncid, i, n);
                ncmpi_inq_varndims(f->ncid, i, &nd);
                ncfwd_wr_str(out, n, strlen(n)), ncfwd_wr_i32(out, nd);
            }
        }
        return NC_NOERR;
    }
    case NCFWD_PUT_ATT_TEXT:
        if (ncfwd_rd_i32(&r, &a) || ncfwd_rd_str(&r, name, sizeof name) ||
            ncfwd_rd_str(&r, text, sizeof text) || ncfwd_rd_done(&r))
            return NC_EINVAL;
        return ncmpi_put_att_text(f->ncid, a, name, (MPI_Offset)strlen(text), text);
    case NCFWD_DEF_DIM: {
        if (ncfwd_rd_str(&r, name, sizeof name) || ncfwd_rd_i64(&r, &len64) || ncfwd_rd_done(&r))
            return NC_EINVAL;
        int rc = ncmpi_def_dim(f->ncid, name, len64, &id);
        ncfwd_wr_i32(out, id);
        return rc;
    }
    case NCFWD_DEF_VAR: {
        uint32_t nd;
        int dims[NCFWD_MAX_DIMS];
        if (ncfwd_rd_str(&r, name, sizeof name) || ncfwd_rd_i32(&r, &a) ||
            ncfwd_rd_u32(&r, &nd) || nd > NCFWD_MAX_DIMS)
            return NC_EINVAL;
        for (uint32_t i = 0; i < nd; i++)
            if (ncfwd_rd_i32(&r, &dims[i]))
                return NC_EINVAL;
        if (ncfwd_rd_done(&r))
            return NC_EINVAL;
        int rc = ncmpi_def_var(f->ncid, name, a, (int)nd, dims, &id);
        ncfwd_wr_i32(out, id);
        return rc;
    }
    case NCFWD_ENDDEF:
        return ncfwd_rd_done(&r) ? NC_EINVAL : ncmpi_enddef(f->ncid);
    case NCFWD_INQ_DIMID: {
        if (ncfwd_rd_str(&r, name, sizeof name) || ncfwd_rd_done(&r))
            return NC_EINVAL;
        int rc = ncmpi_inq_dimid(f->ncid, name, &id);
        ncfwd_wr_i32(out, id);
        return rc;
    }
    case NCFWD_INQ_DIMLEN: {
        MPI_Offset l = 0;
        if (ncfwd_rd_i32(&r, &a) || ncfwd_rd_done(&r))
            return NC_EINVAL;
        int rc = ncmpi_inq_dimlen(f->ncid, a, &l);
        ncfwd_wr_i64(out, l);
        return rc;
    }
    case NCFWD_INQ_VARID: {
        if (ncfwd_rd_str(&r, name, sizeof name) || ncfwd_rd_done(&r))
            return NC_EINVAL;
        int rc = ncmpi_inq_varid(f->ncid, name, &id);
        ncfwd_wr_i32(out, id);
        return rc;
    }
    case NCFWD_BEGIN_INDEP:
        if (ncfwd_rd_done(&r) || f->indep)
            return NC_EINVAL;
        f->indep = 1;
        return ncmpi_begin_indep_data(f->ncid);
    case NCFWD_END_INDEP:
        if (ncfwd_rd_done(&r) || !f->indep)
            return NC_EINVAL;
        f->indep = 0;
        return ncmpi_end_indep_data(f->ncid);
    case NCFWD_CLOSE: {
        if (ncfwd_rd_done(&r))
            return NC_EINVAL;
        int rc = ncmpi_close(f->ncid), all;
        CT_MPI_CHECK(MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
        if (f->writing && s->rank == 0) {
            /* An older NAME is first renamed aside, then the new file renamed to NAME: a
             * rename over an existing file makes ext4 (auto_da_alloc) flush the new file's
             * data first, 4-40 ms for 64 MiB here. NAME is absent for the microseconds between
             * the two renames. The older file's pages are freed (another 14-46 ms) on a
             * thread after the client has its reply. */
            snprintf(s->replaced, sizeof s->replaced, "%s", f->temp);
            char *base = strrchr(s->replaced, '/'), *mark = strstr(base ? base : "", ".ct-partial-");
            if (mark)
                memcpy(mark, ".ct-replace-", strlen(".ct-replace-"));
            if (!mark || all != NC_NOERR || rename(f->final, s->replaced) != 0)
                s->replaced[0] = '\0';
            if (all == NC_NOERR && rename(f->temp, f->final) != 0) {
                say("rename %s -> %s: %s", f->temp, f->final, strerror(errno));
                all = NC_EFILE;
                if (s->replaced[0] && rename(s->replaced, f->final) == 0) /* the older back */
                    s->replaced[0] = '\0';
            }
            if (all != NC_NOERR)
                unlink(f->temp);
        }
        CT_MPI_CHECK(MPI_Bcast(&all, 1, MPI_INT, 0, MPI_COMM_WORLD));
        f->used = 0;
        return all;
    }
    }
    return NC_EINVAL;
}

/* The rows of client i's request in round r (rows: slices along the first dimension): the
 * first and the number; 0 rows when the request has ended before r. */
static MPI_Offset rows_of(const request *q, MPI_Offset per_round, int r, MPI_Offset *first)
{
    MPI_Offset rows = q->ndims ? q->count[0] : 1;
    *first = (MPI_Offset)r * per_round;
    if (*first >= rows)
        return 0;
    return rows - *first < per_round ? rows - *first : per_round;
}

/* Puts or gets of every client of this rank, collectively over the server ranks, in rounds:
 * each round takes the next --round bytes (whole rows) of every client's block, one
 * non-blocking PnetCDF request per client completed by wait_all (collective) or wait
 * (independent), so S < P aggregates. A put's round is received just before it is written and
 * a get's round sent just after it is read, so the server's file I/O overlaps the transfer
 * of the other rounds on the link (the kernel's socket buffers carry them meanwhile); with
 * --round 0 the whole block crosses the link before (put) or after (get) one call, as the
 * paper's servers did. The status goes back before a get's data and after a put's. 0, or -1
 * when a client's stream failed (malformed, truncated, gone): the session must end, on every
 * rank (agreed here); who and why name the client on the rank that saw it. */
static int transfer(server *s, int op, request *q, int *who, char *why, size_t whylen)
{
    int collective = 1, handle = -1;
    for (int i = 0; i < s->nconn; i++)
        collective = q[i].collective, handle = q[i].handle;
    /* the file and mode are the same for every client (checked by agreement below) */
    int mine[2] = {collective, handle}, lo[2], hi[2];
    if (s->nconn == 0)
        mine[0] = INT_MAX, mine[1] = INT_MAX;
    CT_MPI_CHECK(MPI_Allreduce(mine, lo, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (s->nconn == 0)
        mine[0] = INT_MIN, mine[1] = INT_MIN;
    CT_MPI_CHECK(MPI_Allreduce(mine, hi, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    collective = lo[0], handle = lo[1];
    file_slot *f = slot(s, handle);
    int status = lo[0] == hi[0] && lo[1] == hi[1] && f ? NC_NOERR : NC_EINVAL;
    for (int i = 0; i < s->nconn; i++)
        status = status == NC_NOERR && q[i].handle == handle && q[i].collective == collective
                     ? NC_NOERR
                     : NC_EINVAL;
    if (f && status == NC_NOERR) {
        if (!collective && !f->indep)
            status = ncmpi_begin_indep_data(f->ncid), f->indep = 1;
        else if (collective && f->indep)
            status = ncmpi_end_indep_data(f->ncid), f->indep = 0;
    }
    /* rounds: every rank takes part in as many as the longest block needs */
    MPI_Offset per_round[MAX_CLIENTS];
    int rounds = 1, streamed = s->o.round > 0;
    for (int i = 0; i < s->nconn; i++) {
        MPI_Offset rows = q[i].ndims ? q[i].count[0] : 1;
        uint64_t row = rows ? q[i].bytes / (uint64_t)rows : 0;
        per_round[i] = rows;
        if (streamed && row > 0 && rows > 0) {
            uint64_t k = (uint64_t)s->o.round / row;
            per_round[i] = k < 1 ? 1 : k < (uint64_t)rows ? (MPI_Offset)k : rows;
        }
        int r = rows ? (int)((rows + per_round[i] - 1) / per_round[i]) : 1;
        rounds = r > rounds ? r : rounds;
    }
    if (!streamed)
        rounds = 1;
    int all_rounds;
    CT_MPI_CHECK(MPI_Allreduce(&rounds, &all_rounds, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    int failed = 0;
    for (int r = 0; r < all_rounds; r++) {
        int reqs[MAX_CLIENTS], stats[MAX_CLIENTS], n = 0;
        MPI_Offset first[MAX_CLIENTS], rows[MAX_CLIENTS];
        for (int i = 0; i < s->nconn; i++) {
            rows[i] = rows_of(&q[i], per_round[i], r, &first[i]);
            if (failed || rows[i] == 0)
                continue;
            uint64_t row = q[i].ndims && q[i].count[0] ? q[i].bytes / (uint64_t)q[i].count[0]
                                                       : q[i].bytes;
            unsigned char *at = (unsigned char *)q[i].data + (uint64_t)first[i] * row;
            /* a put's data are read off the stream even when the put fails (status) */
            if (op == NCFWD_PUT && streamed &&
                ncfwd_recv_data_part(&s->conn[i], at, (uint64_t)rows[i] * row, &q[i].frame_left,
                                     q[i].bytes - (uint64_t)first[i] * row)) {
                snprintf(why, whylen, "%s", s->conn[i].error);
                *who = i, failed = 1;
                continue;
            }
            if (status != NC_NOERR)
                continue;
            MPI_Offset start[NCFWD_MAX_DIMS], count[NCFWD_MAX_DIMS];
            memcpy(start, q[i].start, sizeof start);
            memcpy(count, q[i].count, sizeof count);
            if (q[i].ndims)
                start[0] += first[i], count[0] = rows[i];
            status = op == NCFWD_PUT
                         ? ncmpi_iput_vara_int(f->ncid, q[i].varid, start, count, (int *)at,
                                               &reqs[n])
                         : ncmpi_iget_vara_int(f->ncid, q[i].varid, start, count, (int *)at,
                                               &reqs[n]);
            if (status == NC_NOERR)
                n++;
        }
        if (f && s->size > 1) {
            /* a rank that has its round waits asleep for the others: MPI spins in
             * collectives, and a spinning rank takes the CPU that the others' TLS and
             * copies need (2 cores for clients and servers here) */
            MPI_Request rq;
            CT_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &rq));
            wait_napping(&rq, 200000);
        }
        if (f) {
            int rc = collective ? ncmpi_wait_all(f->ncid, n, reqs, stats)
                                : ncmpi_wait(f->ncid, n, reqs, stats);
            status = status == NC_NOERR ? rc : status;
            for (int k = 0; status == NC_NOERR && k < n; k++)
                status = stats[k];
        }
        if (op != NCFWD_GET || failed)
            continue;
        /* a get: the status before the first round's data; a failure after it has no reply
         * left to travel in, so it ends the session */
        if (r > 0 && status != NC_NOERR) {
            snprintf(why, whylen, "get failed after its data began: %s", ncmpi_strerror(status));
            *who = 0, failed = 1;
            continue;
        }
        for (int i = 0; i < s->nconn; i++) { /* a client gone shows at its next request */
            if (r == 0)
                send_status(&s->conn[i], status);
            if (status == NC_NOERR && rows[i] > 0) {
                uint64_t row = q[i].ndims && q[i].count[0]
                                   ? q[i].bytes / (uint64_t)q[i].count[0]
                                   : q[i].bytes;
                ncfwd_send_data(&s->conn[i], (unsigned char *)q[i].data + (uint64_t)first[i] * row,
                                (uint64_t)rows[i] * row);
            }
        }
    }
    int any_failed;
    CT_MPI_CHECK(MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (any_failed)
        return -1;
    if (op == NCFWD_PUT)
        for (int i = 0; i < s->nconn; i++)
            send_status(&s->conn[i], status);
    return 0;
}

static void *unlinker(void *path)
{
    unlink(path);
    free(path);
    return NULL;
}

/* Removes a file on a thread of its own (no MPI there): the next requests need not wait for
 * the kernel to free its pages; unlinked here when no thread can start. */
static void unlink_behind(const char *path)
{
    pthread_t t;
    char *copy = strdup(path);
    if (copy && pthread_create(&t, NULL, unlinker, copy) == 0) {
        pthread_detach(t);
        return;
    }
    free(copy);
    unlink(path);
}

/* Serves one session until BYE, or ends it at the first fault anywhere. */
static void serve(server *s)
{
    static request q[MAX_CLIENTS];
    for (;;) {
        /* one request from each of my clients */
        int ok = 1, op_lo = INT_MAX, op_hi = INT_MIN;
        char why[300] = "";
        int who = -1;
        for (int i = 0; i < s->nconn && ok; i++) {
            q[i].data = NULL;
            if (ncfwd_recv(&s->conn[i], &q[i].op, q[i].buf, sizeof q[i].buf, &q[i].len)) {
                snprintf(why, sizeof why, "%s", s->conn[i].error), who = i, ok = 0;
                break;
            }
            if (q[i].op == NCFWD_REPLY || q[i].op == NCFWD_DATA || q[i].op == NCFWD_HELLO) {
                snprintf(why, sizeof why, "%s frame out of place", ncfwd_op_name(q[i].op));
                who = i, ok = 0;
                break;
            }
            if ((q[i].op == NCFWD_PUT || q[i].op == NCFWD_GET) &&
                read_transfer(s, &s->conn[i], &q[i], why, sizeof why)) {
                who = i, ok = 0;
                break;
            }
            op_lo = q[i].op < op_lo ? q[i].op : op_lo;
            op_hi = q[i].op > op_hi ? q[i].op : op_hi;
        }
        int v[3] = {!ok, -op_lo, op_hi}, agreed[3];
        CT_MPI_CHECK(MPI_Allreduce(v, agreed, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        int op = agreed[2];
        int fault = agreed[0] || -agreed[1] != op;
        if (!fault && (op == NCFWD_PUT || op == NCFWD_GET))
            fault = transfer(s, op, q, &who, why, sizeof why) != 0;
        if (fault) {
            int open = 0;
            for (int i = 0; i < MAX_FILES; i++)
                open |= s->files[i].used;
            if (who >= 0 && !(open == 0 && strstr(why, "closed by the peer")))
                refused(s->conn[who].peer, "client rank %d: %s; session ended",
                        s->conn_rank[who], why);
            else if (who < 0 && !agreed[0] && -agreed[1] != op)
                refused(s->subject, "client ranks sent different requests; session ended");
            abort_files(s);
            for (int i = 0; i < s->nconn; i++)
                free(q[i].data);
            break;
        }
        if (op == NCFWD_BYE)
            break;
        if (op != NCFWD_PUT && op != NCFWD_GET) {
            unsigned char payload[NCFWD_MAX_CONTROL];
            uint32_t len;
            share_payload(s->nconn ? &q[0] : NULL, payload, &len);
            for (int i = 0; i < s->nconn; i++) /* every client asked the same */
                if (q[i].len != len || memcmp(q[i].buf, payload, len) != 0)
                    ok = 0;
            static ncfwd_wr out;
            out.len = 0, out.overflow = 0;
            int status = metadata(s, op, payload, len, &out);
            if (!ok)
                status = NC_EINVAL;
            ncfwd_wr w = {0};
            ncfwd_wr_i32(&w, status);
            if (status == NC_NOERR && !out.overflow) {
                memcpy(w.buf + w.len, out.buf, out.len);
                w.len += out.len;
            }
            for (int i = 0; i < s->nconn; i++)
                ncfwd_send_wr(&s->conn[i], NCFWD_REPLY, &w);
            if (s->replaced[0]) {
                unlink_behind(s->replaced);
                s->replaced[0] = '\0';
            }
        }
        for (int i = 0; i < s->nconn; i++)
            free(q[i].data), q[i].data = NULL;
    }
    end_session(s);
}

/* ------------------------------------------------------------ main */

static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen)
{
    *o = (options){.idle = 60.0, .max_request = (uint64_t)1 << 31, .round = 4 << 20};
    const ct_opt table[] = {
        {"--export", CT_OPT_STRING, .dest = &o->export_dir},
        {"--cert", CT_OPT_STRING, .dest = &o->cert},
        {"--key", CT_OPT_STRING, .dest = &o->key},
        {"--ca", CT_OPT_STRING, .dest = &o->ca},
        {"--gridmap", CT_OPT_STRING, .dest = &o->gridmap},
        {"--port", CT_OPT_INT, .dest = &o->port, .min = 0, .max = 65535},
        {"--sessions", CT_OPT_INT, .dest = &o->sessions, .min = 0, .max = INT_MAX},
        {"--idle-timeout", CT_OPT_SECONDS, .dest = &o->idle, .max = 86400},
        {"--max-request", CT_OPT_BYTES, .dest = &o->max_request, .max = (double)((uint64_t)1 << 40)},
        {"--round", CT_OPT_BYTES, .dest = &o->round, .max = (double)((uint64_t)1 << 40)},
        {"--help", CT_OPT_FLAG, .dest = &o->help},
        {.type = CT_OPT_END},
    };
    if (ct_opt_parse(table, argc, argv, err, errlen))
        return -1;
    const char *missing = !o->export_dir ? "--export" : !o->cert ? "--cert" : !o->key ? "--key"
                          : !o->ca ? "--ca" : !o->gridmap ? "--gridmap" : NULL;
    if (!o->help && missing) {
        snprintf(err, errlen, "%s: %s: required", ct_basename(argv[0]), missing);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    server s = {0};
    char err[512];
    if (parse_options(argc, argv, &s.o, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return CT_EXIT_USAGE;
    }
    if (s.o.help) {
        printf("usage: %s --export DIR --cert C --key K --ca CA --gridmap FILE [--port P] "
               "[--sessions N] [--idle-timeout S] [--max-request BYTES] [--round BYTES]\n", ct_basename(argv[0]));
        return 0;
    }
    if (!realpath(s.o.export_dir, s.export_real)) {
        fprintf(stderr, "%s: --export %s: %s\n", ct_basename(argv[0]), s.o.export_dir,
                strerror(errno));
        return CT_EXIT_USAGE;
    }
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-reply is an error to handle, not our death */
    ct_mpi_init(&argc, &argv);
    CT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &s.rank));
    CT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &s.size));
    if (s.size > NCFWD_MAX_SERVERS)
        ct_mpi_fail("%d ranks: at most %d", s.size, NCFWD_MAX_SERVERS);
    s.ctx = ncfwd_tls_context(1, s.o.cert, s.o.key, s.o.ca, err, sizeof err);
    if (!s.ctx)
        ct_mpi_fail("TLS: %s", err);
    s.listen_fd = listen_on(s.rank == 0 ? s.o.port : 0, &s.port);
    if (s.listen_fd < 0)
        ct_mpi_fail("cannot listen on port %d: %s", s.rank == 0 ? s.o.port : 0, strerror(errno));
    uint16_t port = (uint16_t)s.port, ports[NCFWD_MAX_SERVERS];
    CT_MPI_CHECK(MPI_Allgather(&port, 1, MPI_UINT16_T, ports, 1, MPI_UINT16_T, MPI_COMM_WORLD));
    if (s.rank == 0)
        say("listening on port %d (%d ranks, export %s)", s.port, s.size, s.export_real);
    for (int done = 0; s.o.sessions == 0 || done < s.o.sessions;) {
        if (!open_session(&s, ports))
            continue;
        serve(&s);
        done++;
        if (s.rank == 0)
            say("session %d ended", done);
    }
    SSL_CTX_free(s.ctx);
    MPI_Finalize();
    return 0;
}
