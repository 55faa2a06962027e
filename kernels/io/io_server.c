/* ct-io-server - the forwarding I/O server of remote netCDF I/O (seeds/004's I/O servers on
 * cluster II): an OpenMPI job whose S ranks perform real PnetCDF calls on this cluster's file
 * system for the client ranks of a job on another cluster (libct_ncfwd, any MPI), over
 * mutual TLS (ncfwd_proto.h).
 *
 *   mpirun -np S ct-io-server --export DIR --cert C --key K --ca CA --gridmap FILE
 *                             [--crl FILE] [--port P] [--idle-timeout 60]
 *                             [--handshake-timeout 10] [--sessions N] [--max-request B]
 *                             [--max-session-memory B] [--round 4M]
 *
 * Rank 0 listens on --port (0: any; the ready line on stderr says which), every other rank on
 * a port of its own. A session: client rank 0 says HELLO on rank 0's port; the grid-mapfile
 * must name its certificate's subject; rank 0 answers with every rank's port and tells the
 * other ranks; client rank r then connects to server rank r*S/P with the session's token and
 * the same subject. One session at a time, in the order they come; then the next: a HELLO
 * that opens another session while one forms (its client rank 0, another token) waits in
 * the queue for its turn (at most 64 HELLOs wait per rank; more are refused).
 *
 * Connections: each rank takes every connection as it comes and runs the TLS handshakes and
 * HELLOs of all of them at once (non-blocking), each with a hard deadline of
 * --handshake-timeout from its accept, its clock stopped while a session is served (new
 * connections then wait in the kernel's backlog, accepted ones unread): a peer that stays
 * silent, or trickles its bytes, is dropped at its
 * deadline and holds up nobody else meanwhile; when 64 are in progress, the oldest is dropped
 * for the newest. The CRL (--crl) is re-read
 * whenever its file changes; a revoked or expired certificate is refused at the handshake,
 * with the reason and the certificate's subject in the log.
 *
 * Serving: the server ranks take one request from each of their clients, agree (one
 * allreduce) that all of them are well formed and the same operation, and perform it together
 * (create/def/enddef/open/close collectively on the server ranks, puts and gets as one
 * non-blocking request per client completed by wait_all, so S < P aggregates; in rounds of
 * --round bytes per client, received or sent while the other rounds travel, so the link
 * stays busy: see transfer()). A rank holds one round of each client's block at a time (the
 * whole block with --round 0), at most --max-session-memory bytes in all (default: half the
 * host's memory shared by the ranks on it): a request needing more is NC_ENOMEM for every
 * client, and the session goes on. A malformed,
 * truncated or oversized frame, a refused path, a client that stops talking for
 * --idle-timeout seconds or disconnects with a file open, ends that session only: its files
 * are aborted, and the server takes the next session. Every reply is built in one bounded
 * buffer (ncfwd_wr): a reply that would not fit is an error reply, never a longer one.
 *
 * Files and their writers: a created file is written under a temporary name in the same
 * directory (".NAME.ct-partial-RANDOM", RANDOM drawn by the server), created exclusively
 * (O_EXCL: never through a link planted under that name), and renamed to NAME only by a close
 * that every server rank completed for clients that all stayed: a file whose writer died is
 * removed, never visible under its name, and an older complete NAME stays as it was.
 *
 * Access (GSI-style): the grid-mapfile maps certificate subjects (RFC 2253) to a directory
 * under --export and a right, one line each:  "CN=alice,OU=user,O=clustertune,C=JP" area rw
 * (or ro); blank lines and # comments aside, any other line is an error (FILE:LINE) at
 * start-up, and a reason to refuse every client until it is fixed when the file is re-read
 * at each session. Paths are taken relative to the area (an absolute path must lie inside
 * it). Every directory from the export root down to the file is opened one component at a
 * time with O_NOFOLLOW, and the file itself too (reads) or created exclusively (writes), and
 * PnetCDF is given those open directories (/proc/self/fd/N/...): no symlink is ever followed
 * under the export, and nothing checked can be swapped before its use. Every refusal is
 * logged on stderr as "ct-io-server: refused ...".
 */
#define _GNU_SOURCE /* O_PATH, accept4 */
#include "ct.h"
#include "ct_mpi.h"
#include "ct_opt.h"
#include "ncfwd_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/rand.h>
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
#define MAX_PENDING 64 /* connections in their handshake or HELLO at once, per rank */
#define GRIDMAP_LINE 4096
#define HELLO_BYTES 16
#define MEMORY_DEFAULT UINT64_MAX /* --max-session-memory not given: see default_memory() */
#define PARTIAL ".ct-partial-"
#define REPLACE ".ct-replace-"

typedef struct {
    const char *export_dir, *cert, *key, *ca, *gridmap, *crl;
    int port, sessions, help, check_only;
    double idle, handshake;
    uint64_t max_request;
    uint64_t round;      /* bytes per client per round of a put/get; 0: whole requests */
    uint64_t max_memory; /* request buffers one rank holds at once; MEMORY_DEFAULT: not given */
} options;

typedef struct {
    int used, ncid, writing, indep;
    int dir;                         /* O_PATH fd of the file's directory */
    int fd;                          /* the file (temporary, when written), open while used:
                                      * PnetCDF re-opens it by its /proc/self/fd name */
    char name[NAME_MAX + 1];         /* the file in dir */
    char temp[NAME_MAX + 1];         /* its temporary name while written */
    char shown[PATH_MAX];            /* the path as the log shows it */
} file_slot;

/* A connection in its TLS handshake or HELLO (non-blocking), or done with both. */
typedef struct {
    ncfwd_conn c;
    double deadline; /* ct_now() by which both must be done */
    int tls_done;
    unsigned char buf[NCFWD_HEADER + HELLO_BYTES];
    size_t have;
} pending;

typedef struct {
    ncfwd_conn c;
    uint32_t rank, size;
    uint64_t token;
} hello_msg;

typedef struct {
    int rank, size;
    options o;
    SSL_CTX *ctx;
    int listen_fd, port;
    char export_real[PATH_MAX];
    int export_fd; /* O_PATH fd of the export root: every path is walked from it */
    struct stat crl_seen; /* the CRL file as last loaded */
    pending pend[MAX_PENDING];
    int npend;
    hello_msg ready[MAX_PENDING]; /* HELLOs received, in order, not yet taken */
    int nready;
    /* the session */
    uint64_t token;
    uint32_t clients; /* P */
    char subject[NCFWD_MAX_SUBJECT], area[PATH_MAX];
    int read_only;
    int nconn;
    int conn_rank[MAX_CLIENTS];
    ncfwd_conn conn[MAX_CLIENTS];
    file_slot files[MAX_FILES];
    int replaced_dir; /* rank 0: the file a close replaced, unlinked after the reply */
    char replaced[NAME_MAX + 1];
} server;

static void refused(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refused(const char *who, const char *fmt, ...)
{
    char msg[PATH_MAX + 600];
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

/* Whether an area (or a client path) stays under its root as text: relative, no "..". */
static int relative_below(const char *path)
{
    if (path[0] == '/')
        return 0;
    for (const char *c = path; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return 0;
        c += n + (c[n] == '/');
    }
    return 1;
}

/* One line of the grid-mapfile (its "\n" or "\r\n" end included or not): 1 an entry (subject,
 * area, ro), 0 blank or a comment, -1 an error (why). The grammar, the same as
 * security.gridmap_entries' (docs/io.md, tested on the same lines from both sides):
 *   [ \t]* "SUBJECT" [ \t]+ AREA [ \t]+ RIGHT [ \t]*     RIGHT rw or ro, nothing after
 * where a backslash in SUBJECT escapes the next character (kept as written: RFC 2253's
 * escapes, e.g. \" inside a value) and an unescaped " ends it; AREA is a path relative to
 * the export without a ".." component; blanks are spaces and tabs only. */
static int gridmap_line(char *line, char **subject, char **area, int *ro, char *why, size_t len)
{
    size_t n = strlen(line);
    if (n && line[n - 1] == '\n')
        line[--n] = '\0';
    if (n && line[n - 1] == '\r')
        line[--n] = '\0';
    char *p = line + strspn(line, " \t");
    if (*p == '\0' || *p == '#')
        return 0;
    char *end = NULL;
    if (*p == '"')
        for (end = p + 1; *end && *end != '"'; end++)
            end += end[0] == '\\' && end[1];
    if (!end || *end != '"' || end == p + 1 || (end[1] != ' ' && end[1] != '\t')) {
        snprintf(why, len, "expected \"SUBJECT\" AREA rw|ro");
        return -1;
    }
    *end = '\0';
    *subject = p + 1;
    char *save = NULL, *right;
    *area = strtok_r(end + 1, " \t", &save);
    right = *area ? strtok_r(NULL, " \t", &save) : NULL;
    if (!*area || !right) {
        snprintf(why, len, "subject %s without %s", *subject, *area ? "a right (rw or ro)"
                                                                    : "an area and a right");
        return -1;
    }
    if (strcmp(right, "rw") != 0 && strcmp(right, "ro") != 0) {
        snprintf(why, len, "right %.20s: rw or ro", right);
        return -1;
    }
    if (strtok_r(NULL, " \t", &save)) {
        snprintf(why, len, "text after the right");
        return -1;
    }
    if (!relative_below(*area)) {
        snprintf(why, len, "area %.200s: a directory relative to the export, without ..", *area);
        return -1;
    }
    *ro = strcmp(right, "ro") == 0;
    return 1;
}

/* Reads the whole grid-mapfile strictly: 0 (found: whether subject has a line; its area and
 * right), or -1 with why naming FILE:LINE. The first bad line makes the whole file bad, a
 * second line for any subject too (whichever line the server took would be a guess). */
static int gridmap_read(const char *path, const char *subject, char *area, size_t arealen,
                        int *ro, int *found, char *why, size_t whylen)
{
    FILE *f = fopen(path, "r");
    *found = 0;
    if (!f) {
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char line[GRIDMAP_LINE], bad[300];
    char **seen = NULL; /* the subjects so far */
    size_t nseen = 0;
    int rc = 0;
    long start = ftell(f); /* where the line began: -1 where the file cannot tell */
    for (int n = 1; rc == 0 && fgets(line, sizeof line, f); n++, start = ftell(f)) {
        char *subj, *a;
        int r, line_ro = 0;
        /* the bytes fgets took against the string's length: a NUL would end the line early */
        if (start >= 0 && ftell(f) - start != (long)strlen(line)) {
            snprintf(bad, sizeof bad, "a NUL byte");
            r = -1;
        } else if (!strchr(line, '\n') && !feof(f)) {
            snprintf(bad, sizeof bad, "line longer than %d bytes", GRIDMAP_LINE - 2);
            r = -1;
        } else {
            r = gridmap_line(line, &subj, &a, &line_ro, bad, sizeof bad);
        }
        for (size_t k = 0; r == 1 && k < nseen; k++)
            if (strcmp(seen[k], subj) == 0) {
                snprintf(bad, sizeof bad, "a second line for %.200s", subj);
                r = -1;
            }
        char **more = r == 1 ? realloc(seen, (nseen + 1) * sizeof *seen) : seen;
        if (r == 1 && (!more || !(more[nseen] = strdup(subj)))) {
            seen = more ? more : seen;
            snprintf(bad, sizeof bad, "out of memory");
            r = -1;
        } else if (r == 1) {
            seen = more, nseen++;
        }
        if (r < 0) {
            snprintf(why, whylen, "%s:%d: %s", path, n, bad);
            rc = -1;
        } else if (r == 1 && strcmp(subj, subject) == 0) {
            *found = 1, *ro = line_ro;
            snprintf(area, arealen, "%s", a);
        }
    }
    for (size_t k = 0; k < nseen; k++)
        free(seen[k]);
    free(seen);
    fclose(f);
    return rc;
}

/* Opens the directory `rel` (components separated by '/'; "." and empty ones skipped) under
 * the directory fd `at`, one component at a time, each a real directory (O_NOFOLLOW): its
 * O_PATH fd, or -1 with errno (ELOOP or ENOTDIR for a symlink, EINVAL for ".."). */
static int walk(int at, const char *rel)
{
    int fd = openat(at, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    char copy[PATH_MAX], *save = NULL;
    if ((size_t)snprintf(copy, sizeof copy, "%s", rel) >= sizeof copy) {
        close(fd);
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *c = strtok_r(copy, "/", &save); c && fd >= 0; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0) {
            close(fd);
            errno = EINVAL;
            return -1;
        }
        int next = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(fd);
        errno = e;
        fd = next;
    }
    return fd;
}

static const char *walk_why(int e)
{
    return e == ELOOP || e == ENOTDIR ? "passes through a symlink or a non-directory"
           : e == ENOENT              ? "names a directory that does not exist"
                                      : strerror(e);
}

/* Opens a file to read in dir without following a symlink (and without blocking on a FIFO):
 * its fd, or -1 with why. */
static int open_regular(int dir, const char *name, const char *shown, char *why, size_t whylen)
{
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        snprintf(why, whylen, errno == ELOOP ? "path %s is a symlink" : "no file %s", shown);
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "no file %s (not a regular file)", shown);
        close(fd);
        return -1;
    }
    return fd;
}

/* Splits a client path into its directory relative to the export (area included) and its
 * last component: 0, or -1 with why. Checks the text only; the walk checks the file system. */
static int split_path(const server *s, const char *path, char *dir, size_t dirlen, char *name,
                      char *why, size_t whylen)
{
    char rel[PATH_MAX], area_abs[PATH_MAX + PATH_MAX];
    if (!*path) {
        snprintf(why, whylen, "empty path");
        return -1;
    }
    snprintf(area_abs, sizeof area_abs, "%s/%s", s->export_real, s->area);
    if (path[0] == '/') {
        /* absolute: only inside the area, as the area's path reads (no symlink in it) */
        size_t n = strlen(area_abs);
        if (strcmp(s->area, ".") == 0)
            n = strlen(s->export_real);
        if (strncmp(path, area_abs, n) != 0 || path[n] != '/') {
            snprintf(why, whylen, "absolute path %s outside the export area", path);
            return -1;
        }
        snprintf(rel, sizeof rel, "%s", path + n + 1);
    } else {
        snprintf(rel, sizeof rel, "%s", path);
    }
    if (!relative_below(rel)) {
        snprintf(why, whylen, "path %s contains ..", path);
        return -1;
    }
    char *slash = strrchr(rel, '/');
    const char *last = slash ? slash + 1 : rel;
    if (!*last || strcmp(last, ".") == 0) {
        snprintf(why, whylen, "path %s names no file", path);
        return -1;
    }
    /* room for the temporary name: "." NAME ".ct-partial-" 16 hex digits */
    if (strlen(last) + 1 + strlen(PARTIAL) + 16 > NAME_MAX) {
        snprintf(why, whylen, "file name of %s too long", path);
        return -1;
    }
    strcpy(name, last);
    if (slash)
        *slash = '\0';
    if ((size_t)snprintf(dir, dirlen, "%s/%s", s->area, slash ? rel : ".") >= dirlen) {
        snprintf(why, whylen, "path too long");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ sockets, handshakes */

static int listen_on(int port, int *bound)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
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

static void set_blocking(int fd, int blocking)
{
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK);
}

static void send_status(ncfwd_conn *c, int status)
{
    ncfwd_wr w = {0};
    ncfwd_wr_i32(&w, status);
    ncfwd_send_wr(c, NCFWD_REPLY, &w);
}

/* Re-reads the CRL when its file changed since the last load (or was replaced). */
static void reload_crl(server *s, int first)
{
    struct stat st;
    if (!s->o.crl)
        return;
    int gone = stat(s->o.crl, &st) != 0;
    if (!first && !gone && st.st_ino == s->crl_seen.st_ino &&
        st.st_mtim.tv_sec == s->crl_seen.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == s->crl_seen.st_mtim.tv_nsec && st.st_size == s->crl_seen.st_size)
        return;
    if (gone)
        memset(&st, 0, sizeof st);
    s->crl_seen = st;
    char why[600];
    if (ncfwd_tls_set_crl(s->ctx, s->o.ca, s->o.crl, why, sizeof why)) {
        if (first)
            ct_mpi_fail("--crl %s: %s", s->o.crl, why);
        say("CRL %s unusable (%s): every client refused until it is fixed", s->o.crl, why);
    } else if (!first && s->rank == 0) {
        say("CRL %s re-read", s->o.crl);
    }
}

static void drop_pending(server *s, int i)
{
    ncfwd_close(&s->pend[i].c);
    s->pend[i] = s->pend[--s->npend];
}

/* Advances one pending connection as far as its bytes allow: 1 its HELLO is complete (moved
 * to the ready queue), 0 waiting for more, -1 refused (logged, closed). */
static int advance(server *s, int i)
{
    pending *p = &s->pend[i];
    if (!p->tls_done) {
        int rc = ncfwd_tls_step(&p->c, 1);
        if (rc < 0) {
            refused(p->c.peer, "%s", p->c.error);
            drop_pending(s, i);
            return -1;
        }
        if (rc == 0)
            return 0;
        p->tls_done = 1;
    }
    for (;;) {
        size_t need = NCFWD_HEADER;
        int op = 0;
        uint32_t len = 0;
        char why[200];
        if (p->have >= NCFWD_HEADER) {
            if (ncfwd_parse_header(p->buf, &op, &len, why, sizeof why) || op != NCFWD_HELLO ||
                len != HELLO_BYTES) {
                refused(p->c.peer, "malformed HELLO (%s frame of %u bytes%s%s)",
                        ncfwd_op_name(op), len, *why ? ": " : "", *why ? why : "");
                set_blocking(p->c.fd, 1);
                ncfwd_set_timeout(p->c.fd, 1.0);
                send_status(&p->c, NC_EINVAL);
                drop_pending(s, i);
                return -1;
            }
            need += len;
        }
        if (p->have == need)
            break;
        why[0] = '\0';
        ERR_clear_error();
        int n = SSL_read(p->c.ssl, p->buf + p->have, (int)(need - p->have));
        if (n <= 0) {
            int e = SSL_get_error(p->c.ssl, n);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                p->c.want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
                return 0;
            }
            refused(p->c.peer, "connection ended before its HELLO");
            drop_pending(s, i);
            return -1;
        }
        p->have += (size_t)n;
    }
    if (s->nready == MAX_PENDING) {
        refused(p->c.peer, "%d HELLOs already wait for their session", MAX_PENDING);
        drop_pending(s, i);
        return -1;
    }
    ncfwd_rd r;
    hello_msg *h = &s->ready[s->nready];
    ncfwd_rd_init(&r, p->buf + NCFWD_HEADER, HELLO_BYTES);
    if (ncfwd_rd_u32(&r, &h->rank) || ncfwd_rd_u32(&r, &h->size) || ncfwd_rd_u64(&r, &h->token) ||
        h->size < 1 || h->rank >= h->size) {
        refused(p->c.peer, "malformed HELLO (rank %u of %u)", h->rank, h->size);
        set_blocking(p->c.fd, 1);
        ncfwd_set_timeout(p->c.fd, 1.0);
        send_status(&p->c, NC_EINVAL);
        drop_pending(s, i);
        return -1;
    }
    /* from here the session's rules: blocking, --idle-timeout on every read and write */
    set_blocking(p->c.fd, 1);
    ncfwd_set_timeout(p->c.fd, s->o.idle);
    h->c = p->c;
    s->nready++;
    s->pend[i] = s->pend[--s->npend];
    return 1;
}

/* Whether, while the session of s->token forms, h opens a later session (its client rank 0
 * on rank 0's port, another token): it keeps its place in the queue, answered in its turn. */
static int later_session(const server *s, const hello_msg *h)
{
    return s->rank == 0 && h->rank == 0 && h->token != s->token;
}

/* The next HELLO on this rank's port, in the order they completed (while a session forms,
 * the next that may belong to it: later_session), or -1 when `until` (ct_now() seconds)
 * passes first. Every connection's TLS handshake and HELLO run at once, each with a hard
 * deadline --handshake-timeout after its accept (the clock stopped while a session is served:
 * resume_clocks), so a silent or slow peer delays nobody else. */
static int next_hello(server *s, double until, int forming, hello_msg *out)
{
    for (;;) {
        for (int k = 0; k < s->nready; k++) {
            if (forming && later_session(s, &s->ready[k]))
                continue;
            *out = s->ready[k];
            s->nready--;
            memmove(s->ready + k, s->ready + k + 1, (size_t)(s->nready - k) * sizeof *out);
            return 0;
        }
        double now = ct_now();
        for (int i = s->npend - 1; i >= 0; i--)
            if (s->pend[i].deadline <= now) {
                refused(s->pend[i].c.peer, "no TLS handshake and HELLO within %g s",
                        s->o.handshake);
                drop_pending(s, i);
            }
        if (now >= until)
            return -1;
        struct pollfd fds[MAX_PENDING + 1];
        int n = 0;
        double wake = until;
        for (int i = 0; i < s->npend; i++) {
            fds[n++] = (struct pollfd){.fd = s->pend[i].c.fd, .events = (short)s->pend[i].c.want};
            wake = s->pend[i].deadline < wake ? s->pend[i].deadline : wake;
        }
        int listening = s->nready < MAX_PENDING;
        if (listening)
            fds[n++] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        double left = wake - now;
        int ms = left > 1.0 ? 1000 : (int)(left * 1000) + 1;
        if (poll(fds, (nfds_t)n, ms) <= 0)
            continue;
        /* the pending ones first, from the end: advance() moves the last into a freed place */
        for (int i = s->npend - 1; i >= 0; i--)
            if (fds[i].revents)
                advance(s, i);
        if (listening && fds[n - 1].revents) {
            int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            reload_crl(s, 0);
            if (s->npend == MAX_PENDING) {
                /* full: the oldest goes, so silent connections, however many, cannot stop
                 * the accepting of new ones (an honest handshake takes milliseconds) */
                int oldest = 0;
                for (int i = 1; i < s->npend; i++)
                    oldest = s->pend[i].deadline < s->pend[oldest].deadline ? i : oldest;
                refused(s->pend[oldest].c.peer, "dropped for a newer connection (%d in their "
                        "handshake)", MAX_PENDING);
                drop_pending(s, oldest);
            }
            pending *p = &s->pend[s->npend++];
            *p = (pending){.deadline = ct_now() + s->o.handshake};
            if (ncfwd_tls_begin(&p->c, s->ctx, fd, 1, NULL)) {
                refused(NULL, "%s", p->c.error);
                drop_pending(s, s->npend - 1);
                continue;
            }
            advance(s, s->npend - 1);
        }
    }
}

/* A connection's handshake deadline does not run while a session is served (nothing reads
 * it meanwhile): the `served` seconds are given back to every connection still pending. */
static void resume_clocks(server *s, double served)
{
    for (int i = 0; i < s->npend; i++)
        s->pend[i].deadline += served;
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

/* Rank 0: whether a session may start for the HELLO h (else refused, answered, closed); its
 * area and right. The grid-mapfile is re-read each time, strictly. */
static int admit(server *s, hello_msg *h, char *area, size_t arealen, int *ro)
{
    char why[PATH_MAX + 400];
    int found = 0, status = NC_NOERR;
    if (h->rank != 0) {
        refused(h->c.peer, "HELLO of client rank %u outside a session", h->rank);
        status = NC_EINVAL;
    } else if (gridmap_read(s->o.gridmap, h->c.peer, area, arealen, ro, &found, why,
                            sizeof why)) {
        refused(h->c.peer, "grid-mapfile %s; every client is refused until it is fixed", why);
        status = NC_EACCESS;
    } else if (!found) {
        refused(h->c.peer, "subject not in the grid-mapfile %s", s->o.gridmap);
        status = NC_EACCESS;
    } else {
        int fd = walk(s->export_fd, area);
        if (fd < 0) {
            refused(h->c.peer, "grid-mapfile area %s %s under the export %s", area,
                    walk_why(errno), s->export_real);
            status = NC_EACCESS;
        }
        close(fd);
    }
    if (status != NC_NOERR) {
        send_status(&h->c, status);
        ncfwd_close(&h->c);
    }
    return status == NC_NOERR;
}

/* Collective: a session formed on every rank (1), or none (0: try again). */
static int open_session(server *s, const uint16_t *ports)
{
    /* shared: token, clients, read_only, area */
    struct {
        uint64_t token;
        uint32_t clients;
        int32_t read_only, ok;
        char subject[NCFWD_MAX_SUBJECT], area[PATH_MAX];
    } sh = {0};
    if (s->rank == 0) {
        hello_msg h;
        char area[PATH_MAX];
        int ro = 0;
        if (next_hello(s, 1e300, 0, &h) == 0 && admit(s, &h, area, sizeof area, &ro)) {
            sh.ok = 1, sh.token = h.token, sh.clients = h.size, sh.read_only = ro;
            snprintf(sh.subject, sizeof sh.subject, "%s", h.c.peer);
            snprintf(sh.area, sizeof sh.area, "%s", area);
            s->conn[0] = h.c, s->conn_rank[0] = 0, s->nconn = 1;
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
        hello_msg h;
        if (next_hello(s, deadline, 1, &h)) {
            refused(NULL, "session of %s: client ranks missing after %.0f s", s->subject,
                    s->o.idle);
            ok = 0;
            break;
        }
        int mine = (int)((uint64_t)h.rank * (uint64_t)s->size / s->clients) == s->rank;
        int dup = 0;
        for (int i = 0; i < s->nconn; i++)
            dup |= s->conn_rank[i] == (int)h.rank;
        if (h.token != s->token || h.size != s->clients || !mine || dup ||
            strcmp(h.c.peer, s->subject) != 0) {
            refused(h.c.peer, "HELLO of client rank %u does not belong to the session of %s",
                    h.rank, s->subject);
            send_status(&h.c, NC_EACCESS);
            ncfwd_close(&h.c);
            continue;
        }
        send_status(&h.c, NC_NOERR);
        s->conn[s->nconn] = h.c, s->conn_rank[s->nconn] = (int)h.rank, s->nconn++;
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

/* The transfer arguments of a PUT/GET (its data, and the buffer for them, are transfer()'s).
 * 0, or -1 with why. */
static int read_transfer(server *s, request *q, char *why, size_t whylen)
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
    q->data = NULL, q->frame_left = 0;
    return 0;
}

static void free_slot(file_slot *f)
{
    if (f->dir >= 0)
        close(f->dir);
    if (f->fd >= 0)
        close(f->fd);
    f->dir = f->fd = -1, f->used = 0;
}

static void abort_files(server *s)
{
    for (int i = 0; i < MAX_FILES; i++) {
        file_slot *f = &s->files[i];
        if (!f->used)
            continue;
        ncmpi_abort(f->ncid);
        if (f->writing && s->rank == 0) {
            unlinkat(f->dir, f->temp, 0);
            say("aborted %s: its temporary %s removed, %s left as it was", f->shown, f->temp,
                f->shown);
        } else if (s->rank == 0) {
            say("closed %s (open for reading when the session ended)", f->shown);
        }
        free_slot(f);
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

/* The file a create or open names, checked on rank 0 and opened on every rank (f->dir and
 * f->fd): 0, or an error status (logged). Rank 0 checks the path's text and walks it, and
 * for a create makes the temporary file exclusively (O_CREAT | O_EXCL | O_NOFOLLOW, under a
 * random name: never through a link, never someone else's file); every rank then walks the
 * path itself and opens the file without following a link (a create's temporary must be the
 * very file rank 0 made), so any rank's failure, the tree changed meanwhile, fails them all. */
static int shared_path(server *s, const char *path, int writing, file_slot *f)
{
    struct {
        int32_t status;
        char dir[PATH_MAX], name[NAME_MAX + 1], temp[NAME_MAX + 1];
        dev_t dev; /* of the temporary rank 0 made */
        ino_t ino;
    } v = {NC_NOERR, "", "", "", 0, 0};
    char why[PATH_MAX + 200] = "";
    struct stat st;
    f->dir = f->fd = -1;
    snprintf(f->shown, sizeof f->shown, "%s", path);
    if (s->rank == 0) {
        uint64_t random = 0;
        if (writing && s->read_only) {
            snprintf(why, sizeof why, "create %s: read-only access", path);
            v.status = NC_EACCESS;
        } else if (split_path(s, path, v.dir, sizeof v.dir, v.name, why, sizeof why)) {
            v.status = NC_EACCESS;
        } else if ((f->dir = walk(s->export_fd, v.dir)) < 0) {
            snprintf(why, sizeof why, "path %s %s in the export area", path, walk_why(errno));
            v.status = NC_EACCESS;
        } else if (!writing) {
            v.status = (f->fd = open_regular(f->dir, v.name, path, why, sizeof why)) < 0
                           ? NC_ENOENT
                           : NC_NOERR;
        } else if (fstatat(f->dir, v.name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                   !S_ISREG(st.st_mode)) {
            /* a link in NAME's place would be replaced by the rename, never followed: but
             * a client has no business naming one */
            snprintf(why, sizeof why, "path %s is %s", path,
                     S_ISLNK(st.st_mode) ? "a symlink" : "not a regular file");
            v.status = NC_EACCESS;
        } else if (RAND_bytes((unsigned char *)&random, sizeof random) != 1) {
            snprintf(why, sizeof why, "no random bytes for a temporary name");
            v.status = NC_EIO;
        } else {
            /* split_path kept NAME to 226 bytes: "." NAME PARTIAL 16 digits fits NAME_MAX */
            snprintf(v.temp, sizeof v.temp, ".%.226s" PARTIAL "%016llx", v.name,
                     (unsigned long long)random);
            f->fd = openat(f->dir, v.temp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                           0666);
            if (f->fd < 0 || fstat(f->fd, &st) != 0) {
                snprintf(why, sizeof why, "create %s: %s", path, strerror(errno));
                v.status = NC_EACCESS;
            } else {
                v.dev = st.st_dev, v.ino = st.st_ino;
            }
        }
        if (*why)
            refused(s->subject, "%s", why);
    }
    CT_MPI_CHECK(MPI_Bcast(&v, sizeof v, MPI_BYTE, 0, MPI_COMM_WORLD));
    int status = v.status;
    if (status == NC_NOERR && s->rank != 0) {
        if ((f->dir = walk(s->export_fd, v.dir)) < 0)
            status = NC_EACCESS;
        else if (!writing)
            status = (f->fd = open_regular(f->dir, v.name, path, why, sizeof why)) < 0
                         ? NC_ENOENT
                         : NC_NOERR;
        else if ((f->fd = openat(f->dir, v.temp, O_RDWR | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
                 fstat(f->fd, &st) != 0 || st.st_dev != v.dev || st.st_ino != v.ino)
            status = NC_EACCESS;
    }
    int worst;
    CT_MPI_CHECK(MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (worst != NC_NOERR) {
        if (s->rank == 0 && status == NC_NOERR)
            refused(s->subject, "%s: the directory tree changed under the server ranks", path);
        if (writing && s->rank == 0 && f->fd >= 0)
            unlinkat(f->dir, v.temp, 0);
        free_slot(f);
        return worst;
    }
    snprintf(f->name, sizeof f->name, "%s", v.name);
    snprintf(f->temp, sizeof f->temp, "%s", v.temp);
    return NC_NOERR;
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
        /* PnetCDF gets the file this rank opened, by a name the kernel resolves from the open
         * file itself: nothing is looked up along the path again, now or when PnetCDF opens
         * the file a second time (independent mode) */
        char at[64];
        snprintf(at, sizeof at, "/proc/self/fd/%d", f->fd);
        status = writing ? ncmpi_create(MPI_COMM_WORLD, at, a | NC_CLOBBER, MPI_INFO_NULL,
                                        &f->ncid)
                         : ncmpi_open(MPI_COMM_WORLD, at, NC_NOWRITE, MPI_INFO_NULL, &f->ncid);
        if (status != NC_NOERR) {
            if (s->rank == 0)
                refused(s->subject, "%s %s: %s", writing ? "create" : "open", f->shown,
                        ncmpi_strerror(status));
            if (writing && s->rank == 0)
                unlinkat(f->dir, f->temp, 0);
            free_slot(f);
            return status;
        }
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
            if (out->overflow) { /* no handle for the client: the file is closed again */
                if (s->rank == 0)
                    refused(s->subject, "open %s: its header exceeds one reply (%d bytes)",
                            f->shown, NCFWD_MAX_CONTROL);
                ncmpi_close(f->ncid);
                free_slot(f);
                return NC_ENOMEM;
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
            int d = f->dir;
            snprintf(s->replaced, sizeof s->replaced, "%s", f->temp);
            memcpy(strstr(s->replaced, PARTIAL), REPLACE, strlen(REPLACE));
            if (all != NC_NOERR || renameat(d, f->name, d, s->replaced) != 0)
                s->replaced[0] = '\0';
            if (all == NC_NOERR && renameat(d, f->temp, d, f->name) != 0) {
                say("rename %s -> %s: %s", f->temp, f->shown, strerror(errno));
                all = NC_EFILE;
                if (s->replaced[0] && renameat(d, s->replaced, d, f->name) == 0) /* older back */
                    s->replaced[0] = '\0';
            }
            if (all != NC_NOERR)
                unlinkat(d, f->temp, 0);
            if (s->replaced[0])
                s->replaced_dir = dup(d);
        }
        CT_MPI_CHECK(MPI_Bcast(&all, 1, MPI_INT, 0, MPI_COMM_WORLD));
        free_slot(f);
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

/* Reads and drops the next `want` bytes of a put's DATA stream: a refused put's client sends
 * its data all the same, and the stream must stay in step for its next request. */
static int skip_data(ncfwd_conn *c, request *q, uint64_t want, uint64_t total_left)
{
    static unsigned char sink[64 * 1024];
    while (want > 0) {
        uint64_t n = want < sizeof sink ? want : sizeof sink;
        if (ncfwd_recv_data_part(c, sink, n, &q->frame_left, total_left))
            return -1;
        want -= n, total_left -= n;
    }
    return 0;
}

static void free_data(server *s, request *q)
{
    for (int i = 0; i < s->nconn; i++)
        free(q[i].data), q[i].data = NULL;
}

/* Puts or gets of every client of this rank, collectively over the server ranks, in rounds:
 * each round takes the next --round bytes (whole rows) of every client's block, one
 * non-blocking PnetCDF request per client completed by wait_all (collective) or wait
 * (independent), so S < P aggregates. A put's round is received just before it is written and
 * a get's round sent just after it is read, so the server's file I/O overlaps the transfer
 * of the other rounds on the link (the kernel's socket buffers carry them meanwhile); with
 * --round 0 the whole block crosses the link before (put) or after (get) one call, as the
 * paper's servers did. Memory: one round per client (the whole block with --round 0), the
 * buffer reused from round to round, and all of this rank's within --max-session-memory, or
 * the request is NC_ENOMEM for every client (agreed, like every other check) before any data
 * moves. The status goes back before a get's data and after a put's. 0, or -1 when a client's
 * stream failed (malformed, truncated, gone): the session must end, on every rank (agreed
 * here); who and why name the client on the rank that saw it. */
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
    /* PnetCDF takes as many start/count entries as the variable has dimensions: a request
     * naming fewer would have it read stale entries and a buffer sized for the request's
     * count past its end (found by ct-io-fuzz under ASan) */
    for (int i = 0; f && i < s->nconn && status == NC_NOERR; i++) {
        int nd = -1;
        if (ncmpi_inq_varndims(f->ncid, q[i].varid, &nd) != NC_NOERR || nd != (int)q[i].ndims)
            status = NC_EINVAL;
    }
    /* rounds of whole rows (slices along the first dimension), one row at least */
    MPI_Offset per_round[MAX_CLIENTS];
    uint64_t row[MAX_CLIENTS], need = 0;
    int rounds = 1, streamed = s->o.round > 0;
    for (int i = 0; i < s->nconn; i++) {
        MPI_Offset rows = q[i].ndims ? q[i].count[0] : 1;
        row[i] = rows ? q[i].bytes / (uint64_t)rows : 0;
        per_round[i] = rows;
        if (streamed && row[i] > 0 && rows > 0) {
            uint64_t k = (uint64_t)s->o.round / row[i];
            per_round[i] = k < 1 ? 1 : k < (uint64_t)rows ? (MPI_Offset)k : rows;
        }
        int r = rows ? (int)((rows + per_round[i] - 1) / per_round[i]) : 1;
        rounds = r > rounds ? r : rounds;
        need += (uint64_t)per_round[i] * row[i];
    }
    if (!streamed)
        rounds = 1;
    if (status == NC_NOERR && need > s->o.max_memory) {
        refused(s->subject, "%s needing %llu bytes at once on server rank %d: above "
                "--max-session-memory %llu", ncfwd_op_name(op), (unsigned long long)need,
                s->rank, (unsigned long long)s->o.max_memory);
        status = NC_ENOMEM;
    }
    for (int i = 0; i < s->nconn && status == NC_NOERR; i++) {
        uint64_t bytes = (uint64_t)per_round[i] * row[i];
        if (!(q[i].data = malloc(bytes ? bytes : 1)))
            status = NC_ENOMEM;
    }
    /* every rank must take the same way: begin/end_indep are collective, and every client
     * gets the same status (NC errors are negative: the minimum is any rank's error) */
    int agreed;
    CT_MPI_CHECK(MPI_Allreduce(&status, &agreed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    status = agreed;
    if (f && status == NC_NOERR) {
        if (!collective && !f->indep)
            status = ncmpi_begin_indep_data(f->ncid), f->indep = 1;
        else if (collective && f->indep)
            status = ncmpi_end_indep_data(f->ncid), f->indep = 0;
    }
    int all_rounds;
    CT_MPI_CHECK(MPI_Allreduce(&rounds, &all_rounds, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (op == NCFWD_GET && status != NC_NOERR)
        all_rounds = 1; /* refused (agreed): its status alone, no data to send */
    int failed = 0;
    for (int r = 0; r < all_rounds; r++) {
        int reqs[MAX_CLIENTS], stats[MAX_CLIENTS], n = 0;
        MPI_Offset first[MAX_CLIENTS], rows[MAX_CLIENTS];
        for (int i = 0; i < s->nconn; i++) {
            rows[i] = rows_of(&q[i], per_round[i], r, &first[i]);
            if (failed || rows[i] == 0)
                continue;
            uint64_t bytes = (uint64_t)rows[i] * row[i];
            uint64_t left = q[i].bytes - (uint64_t)first[i] * row[i];
            /* a put's data are read off the stream even when the put fails (status) */
            if (op == NCFWD_PUT &&
                (q[i].data ? ncfwd_recv_data_part(&s->conn[i], q[i].data, bytes,
                                                  &q[i].frame_left, left)
                           : skip_data(&s->conn[i], &q[i], bytes, left))) {
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
                         ? ncmpi_iput_vara_int(f->ncid, q[i].varid, start, count, q[i].data,
                                               &reqs[n])
                         : ncmpi_iget_vara_int(f->ncid, q[i].varid, start, count, q[i].data,
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
            if (status == NC_NOERR && rows[i] > 0)
                ncfwd_send_data(&s->conn[i], q[i].data, (uint64_t)rows[i] * row[i]);
        }
    }
    free_data(s, q);
    int any_failed;
    CT_MPI_CHECK(MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (any_failed)
        return -1;
    if (op == NCFWD_PUT)
        for (int i = 0; i < s->nconn; i++)
            send_status(&s->conn[i], status);
    return 0;
}

typedef struct {
    int dir;
    char name[NAME_MAX + 1];
} doomed;

static void *unlinker(void *arg)
{
    doomed *d = arg;
    unlinkat(d->dir, d->name, 0);
    close(d->dir);
    free(d);
    return NULL;
}

/* Removes the file a close replaced on a thread of its own (no MPI there): the next requests
 * need not wait for the kernel to free its pages; unlinked here when no thread can start. */
static void unlink_behind(server *s)
{
    pthread_t t;
    doomed *d = malloc(sizeof *d);
    if (d) {
        d->dir = s->replaced_dir;
        snprintf(d->name, sizeof d->name, "%s", s->replaced);
        if (pthread_create(&t, NULL, unlinker, d) == 0) {
            pthread_detach(t);
            d = NULL;
        }
    }
    if (d) {
        free(d);
        unlinkat(s->replaced_dir, s->replaced, 0);
        close(s->replaced_dir);
    }
    s->replaced[0] = '\0', s->replaced_dir = -1;
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
                read_transfer(s, &q[i], why, sizeof why)) {
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
            break;
        }
        if (op == NCFWD_BYE) { /* a file not closed by then was never completed */
            abort_files(s);
            break;
        }
        if (op != NCFWD_PUT && op != NCFWD_GET) {
            unsigned char payload[NCFWD_MAX_CONTROL];
            uint32_t len;
            share_payload(s->nconn ? &q[0] : NULL, payload, &len);
            for (int i = 0; i < s->nconn; i++) /* every client asked the same */
                if (q[i].len != len || memcmp(q[i].buf, payload, len) != 0)
                    ok = 0;
            /* on every rank, before anything is done: a request some client did not make
             * (a CLOSE's rename among them) is performed for none */
            int all_ok;
            CT_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
            ok = all_ok;
            /* the reply: the status, then what the request returns, in one bounded writer;
             * a result that does not fit is an error reply of the status alone */
            static ncfwd_wr w;
            w.len = 4, w.overflow = 0;
            int status = ok ? metadata(s, op, payload, len, &w) : NC_EINVAL;
            if (!ok && s->rank == 0)
                refused(s->subject, "client ranks sent different %s requests: none performed",
                        ncfwd_op_name(op));
            if (status == NC_NOERR && w.overflow)
                status = NC_ENOMEM; /* metadata() bounds its results: not reached today */
            if (status != NC_NOERR)
                w.len = 4, w.overflow = 0;
            for (int b = 0; b < 4; b++)
                w.buf[b] = (unsigned char)((uint32_t)status >> (8 * b));
            for (int i = 0; i < s->nconn; i++)
                ncfwd_send_wr(&s->conn[i], NCFWD_REPLY, &w);
            if (s->replaced[0])
                unlink_behind(s);
        }
    }
    end_session(s);
}

/* ------------------------------------------------------------ main */

static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen)
{
    *o = (options){.idle = 60.0, .handshake = 10.0, .max_request = (uint64_t)1 << 31,
                   .round = 4 << 20, .max_memory = MEMORY_DEFAULT};
    const ct_opt table[] = {
        {"--export", CT_OPT_STRING, .dest = &o->export_dir},
        {"--cert", CT_OPT_STRING, .dest = &o->cert},
        {"--key", CT_OPT_STRING, .dest = &o->key},
        {"--ca", CT_OPT_STRING, .dest = &o->ca},
        {"--gridmap", CT_OPT_STRING, .dest = &o->gridmap},
        {"--crl", CT_OPT_STRING, .dest = &o->crl},
        {"--handshake-timeout", CT_OPT_SECONDS, .dest = &o->handshake, .max = 3600},
        {"--port", CT_OPT_INT, .dest = &o->port, .min = 0, .max = 65535},
        {"--sessions", CT_OPT_INT, .dest = &o->sessions, .min = 0, .max = INT_MAX},
        {"--idle-timeout", CT_OPT_SECONDS, .dest = &o->idle, .max = 86400},
        {"--max-request", CT_OPT_BYTES, .dest = &o->max_request, .max = (double)((uint64_t)1 << 40)},
        {"--round", CT_OPT_BYTES, .dest = &o->round, .max = (double)((uint64_t)1 << 40)},
        {"--max-session-memory", CT_OPT_BYTES, .dest = &o->max_memory,
         .max = (double)((uint64_t)1 << 50)},
        {"--help", CT_OPT_FLAG, .dest = &o->help},
        {"--check-only", CT_OPT_FLAG, .dest = &o->check_only},
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
    if (o->max_memory == 0) {
        snprintf(err, errlen, "%s: --max-session-memory: a byte count above 0",
                 ct_basename(argv[0]));
        return -1;
    }
    return 0;
}

/* --max-session-memory's default: half of this host's memory, shared by the server ranks on
 * the host (collective). A client may ask up to --max-request per request, and a rank serves
 * up to MAX_CLIENTS clients: without a bound, one session could make the host swap or the
 * OOM killer end the service for everyone. */
static uint64_t default_memory(void)
{
    MPI_Comm host;
    int here = 1;
    CT_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                     &host));
    CT_MPI_CHECK(MPI_Comm_size(host, &here));
    CT_MPI_CHECK(MPI_Comm_free(&host));
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)1 << 32;
    return ram / 2 / (uint64_t)here;
}

static void usage(void)
{
    printf("usage: ct-io-server --export DIR --cert C --key K --ca CA --gridmap FILE [--crl FILE] "
           "[--port P] [--sessions N] [--idle-timeout S] [--handshake-timeout S] "
           "[--max-request BYTES] [--max-session-memory BYTES] [--round BYTES] [--check-only]\n"
           "  --check-only: check the options, the export and the grid-mapfile, then exit\n");
}

/* The export and the grid-mapfile, which this process reads itself: refused before MPI
 * starts, one line on stderr (a server refused for its files starts nothing). */
static int local_files(server *s, const char *prog, char *err, size_t errlen)
{
    if (!realpath(s->o.export_dir, s->export_real)) {
        snprintf(err, errlen, "%s: --export %s: %s", prog, s->o.export_dir, strerror(errno));
        return -1;
    }
    s->export_fd = open(s->export_real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (s->export_fd < 0) {
        snprintf(err, errlen, "%s: --export %s: %s", prog, s->o.export_dir, strerror(errno));
        return -1;
    }
    char why[PATH_MAX + 400], area[PATH_MAX];
    int ro, found;
    if (gridmap_read(s->o.gridmap, "", area, sizeof area, &ro, &found, why, sizeof why)) {
        snprintf(err, errlen, "%s: --gridmap %s", prog, why);
        return -1;
    }
    return 0;
}

static int check_ranks(void *opts, int np, const char *prog, char *err, size_t errlen)
{
    (void)opts;
    if (np <= NCFWD_MAX_SERVERS)
        return 0;
    snprintf(err, errlen, "%s: %d ranks: at most %d", prog, np, NCFWD_MAX_SERVERS);
    return -1;
}

int main(int argc, char **argv)
{
    server s = {0};
    char err[PATH_MAX + 600];
    int bad = parse_options(argc, argv, &s.o, err, sizeof err) != 0;
    if (!bad && !s.o.help && local_files(&s, ct_basename(argv[0]), err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return CT_EXIT_USAGE;
    }
    if (!bad && !s.o.help && s.o.check_only)
        return 0; /* nothing started: the files a server would refuse to start on are fine */
    s.replaced_dir = -1;
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-reply is an error to handle, not our death */
    ct_mpi_start_args start = {.parse_failed = bad, .help = s.o.help, .usage = usage,
                               .check = check_ranks, .err = err, .errlen = sizeof err};
    int status = ct_mpi_start(&start, &argc, &argv, &s.rank, &s.size);
    if (status != CT_MPI_RUN)
        return status;
    if (s.o.max_memory == MEMORY_DEFAULT)
        s.o.max_memory = default_memory();
    s.ctx = ncfwd_tls_context(1, s.o.cert, s.o.key, s.o.ca, err, sizeof err);
    if (!s.ctx)
        ct_mpi_fail("TLS: %s", err);
    reload_crl(&s, 1);
    s.listen_fd = listen_on(s.rank == 0 ? s.o.port : 0, &s.port);
    if (s.listen_fd < 0)
        ct_mpi_fail("cannot listen on port %d: %s", s.rank == 0 ? s.o.port : 0, strerror(errno));
    uint16_t port = (uint16_t)s.port, ports[NCFWD_MAX_SERVERS];
    CT_MPI_CHECK(MPI_Allgather(&port, 1, MPI_UINT16_T, ports, 1, MPI_UINT16_T, MPI_COMM_WORLD));
    if (s.rank == 0)
        say("listening on port %d (%d ranks, export %s, %llu bytes of requests per rank)",
            s.port, s.size, s.export_real, (unsigned long long)s.o.max_memory);
    for (int done = 0; s.o.sessions == 0 || done < s.o.sessions;) {
        if (!open_session(&s, ports))
            continue;
        double started = ct_now();
        serve(&s);
        resume_clocks(&s, ct_now() - started);
        done++;
        if (s.rank == 0)
            say("session %d ended", done);
    }
    SSL_CTX_free(s.ctx);
    MPI_Finalize();
    return 0;
}
