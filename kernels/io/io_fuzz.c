/* ct-io-fuzz - drives ct-io-server's frame parser and request handling with generated and
 * mutated frames, in process, under AddressSanitizer + UndefinedBehaviorSanitizer (built
 * only with -DCT_SANITIZE=ON; see CMakeLists.txt).
 *
 *   ct-io-fuzz --frames N [--seed S] [--seconds T]
 *
 * The server's own code is compiled into this program (io_server.c included below, its main
 * renamed), so serve() runs exactly as in ct-io-server, on one rank (MPI singleton), over a
 * socketpair in place of TLS (ncfwd_conn with ssl == NULL reads and writes the fd). Each
 * iteration is one session: a sequence of frames that mostly follows the protocol (create,
 * define, put with its DATA, get, open, close; names and paths from a set of hostile ones:
 * "..", absolute, through a symlink, too long, with NUL) and is then mutated (bits flipped,
 * bytes cut or inserted, lengths and ops changed, random frames spliced in), written by one
 * thread while another drains the replies. The strict grid-mapfile parser gets mutated lines.
 *
 * Checks after each session (a broken one is a finding, printed, and the exit status is 1):
 * nothing was created, changed or removed outside the export (a directory "outside" the
 * export reaches through a symlink "escape"), no temporary (.ct-partial-) is left, no file
 * descriptor leaked. A sanitizer report ends the process with its own message.
 * Prints "frames N sessions M findings K" at the end.
 */
#define main ct_io_server_main
#include "io_server.c"
#undef main

#include <dirent.h>

/* ------------------------------------------------------------ a small PRNG (xorshift64*) */

static uint64_t rng_state = 88172645463325252ULL;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static uint32_t below(uint32_t n) { return n ? (uint32_t)(rnd() % n) : 0; }

/* ------------------------------------------------------------ building a session's bytes */

typedef struct {
    unsigned char *p;
    size_t len, cap;
    long frames;
} stream;

static void put_bytes(stream *st, const void *b, size_t n)
{
    if (st->len + n > st->cap) {
        st->cap = (st->len + n) * 2;
        st->p = realloc(st->p, st->cap);
        if (!st->p)
            abort();
    }
    memcpy(st->p + st->len, b, n);
    st->len += n;
}

static void put_frame(stream *st, int op, const ncfwd_wr *w)
{
    unsigned char h[NCFWD_HEADER];
    ncfwd_make_header(h, op, (uint32_t)w->len);
    put_bytes(st, h, sizeof h);
    put_bytes(st, w->buf, w->len);
    st->frames++;
}

/* integers a client might send: the edges first */
static int64_t any_int(void)
{
    static const int64_t edge[] = {0, 1, 2, -1, 3, 7, 15, 16, 255, 65535, 65536, INT32_MAX,
                                   INT32_MIN, (int64_t)1 << 32, INT64_MAX, INT64_MIN};
    return below(3) ? edge[below(sizeof edge / sizeof edge[0])] : (int64_t)rnd();
}

static int32_t small_int(int32_t n) { return below(8) ? (int32_t)below((uint32_t)n) : (int32_t)any_int(); }

static const char *const paths[] = {
    "f.nc", "sub/f.nc", "g.nc", "sub/g.nc", "../up.nc", "sub/../../x.nc", "/etc/passwd",
    "/tmp/x.nc", "escape/in.nc", "escape", "sub/link.nc", "sub", ".", "", "sub/", "./f.nc",
    "a/b/c/d.nc", ".f.nc.ct-partial-0000000000000000", "sub//f.nc", "escape/../f.nc",
};

static void put_name(ncfwd_wr *w)
{
    char name[NCFWD_MAX_NAME + 8];
    size_t n;
    switch (below(6)) {
    case 0: /* a long one, at and beyond the limits */
        n = below(3) == 0 ? NCFWD_MAX_NAME - 1 : 200 + below(300);
        memset(name, 'n', n);
        break;
    case 1: /* bytes of any kind, NUL included */
        n = below(24);
        for (size_t i = 0; i < n; i++)
            name[i] = (char)rnd();
        break;
    default: {
        const char *p = paths[below(sizeof paths / sizeof paths[0])];
        static const char *const names[] = {"x", "y", "z", "data", "t"};
        if (below(2))
            p = names[below(5)];
        n = strlen(p);
        memcpy(name, p, n);
    }
    }
    ncfwd_wr_str(w, name, n);
}

/* One request (and for a put its DATA): mostly well formed, its fields from the edges. */
static void put_request(stream *st)
{
    ncfwd_wr w = {0};
    int op = 2 + (int)below(NCFWD_OP_LAST - 1); /* CREATE .. BYE, HELLO aside */
    int32_t handle = small_int(MAX_FILES + 1);
    switch (op) {
    case NCFWD_CREATE:
    case NCFWD_OPEN:
        ncfwd_wr_i32(&w, handle), ncfwd_wr_i32(&w, below(4) ? (int32_t)(below(2) * NC_64BIT_OFFSET) : small_int(1 << 16));
        put_name(&w);
        break;
    case NCFWD_PUT_ATT_TEXT:
        ncfwd_wr_i32(&w, handle), ncfwd_wr_i32(&w, below(4) ? (int32_t)below(3) - 1 : small_int(3));
        put_name(&w), put_name(&w);
        break;
    case NCFWD_DEF_DIM:
        ncfwd_wr_i32(&w, handle), put_name(&w), ncfwd_wr_i64(&w, below(3) ? (int64_t)below(64) : any_int());
        break;
    case NCFWD_DEF_VAR: {
        ncfwd_wr_i32(&w, handle), put_name(&w), ncfwd_wr_i32(&w, below(3) ? NC_INT : small_int(16));
        uint32_t nd = below(4) ? below(4) : (uint32_t)any_int();
        ncfwd_wr_u32(&w, nd);
        for (uint32_t i = 0; i < nd && i < 12; i++)
            ncfwd_wr_i32(&w, small_int(4));
        break;
    }
    case NCFWD_ENDDEF:
    case NCFWD_BEGIN_INDEP:
    case NCFWD_END_INDEP:
    case NCFWD_CLOSE:
        ncfwd_wr_i32(&w, handle);
        break;
    case NCFWD_INQ_DIMID:
    case NCFWD_INQ_VARID:
        ncfwd_wr_i32(&w, handle), put_name(&w);
        break;
    case NCFWD_INQ_DIMLEN:
        ncfwd_wr_i32(&w, handle), ncfwd_wr_i32(&w, small_int(4));
        break;
    case NCFWD_PUT:
    case NCFWD_GET: {
        uint32_t nd = below(6) ? 1 + below(3) : (uint32_t)small_int(12);
        ncfwd_wr_i32(&w, handle), ncfwd_wr_i32(&w, small_int(3));
        ncfwd_wr_u8(&w, (uint8_t)(below(6) ? below(2) : rnd())), ncfwd_wr_u32(&w, nd);
        uint64_t values = 1;
        for (uint32_t i = 0; i < nd && i < 12; i++) {
            int64_t count = below(6) ? (int64_t)below(9) : any_int();
            ncfwd_wr_i64(&w, below(6) ? (int64_t)below(8) : any_int()), ncfwd_wr_i64(&w, count);
            values = count >= 0 && count < 4096 && values < (1u << 20) ? values * (uint64_t)count
                                                                       : UINT64_MAX;
        }
        put_frame(st, op, &w);
        if (op == NCFWD_PUT && values < 16384) { /* its data, in DATA frames of any split */
            uint64_t bytes = values * 4;
            while (bytes > 0) {
                uint64_t n = below(3) ? bytes : 1 + below((uint32_t)bytes);
                ncfwd_wr d = {0};
                for (uint64_t i = 0; i < n; i++)
                    ncfwd_wr_u8(&d, (uint8_t)i);
                put_frame(st, NCFWD_DATA, &d);
                bytes -= n;
            }
        }
        return;
    }
    case NCFWD_DATA:
        for (uint32_t i = below(64); i > 0; i--)
            ncfwd_wr_u8(&w, (uint8_t)rnd());
        break;
    default: /* BYE */
        break;
    }
    put_frame(st, op, &w);
}

/* A session that writes a file the way libct_ncfwd does, so the later requests meet real
 * open files (create, a dimension, a variable, enddef), then random requests. */
static void put_session(stream *st)
{
    ncfwd_wr w = {0};
    const char *name = below(2) ? "f.nc" : "sub/g.nc";
    ncfwd_wr_i32(&w, 0), ncfwd_wr_i32(&w, 0), ncfwd_wr_str(&w, name, strlen(name));
    put_frame(st, below(3) ? NCFWD_CREATE : NCFWD_OPEN, &w);
    w = (ncfwd_wr){0};
    ncfwd_wr_i32(&w, 0), ncfwd_wr_str(&w, "x", 1), ncfwd_wr_i64(&w, 8);
    put_frame(st, NCFWD_DEF_DIM, &w);
    w = (ncfwd_wr){0};
    ncfwd_wr_i32(&w, 0), ncfwd_wr_str(&w, "data", 4), ncfwd_wr_i32(&w, NC_INT);
    ncfwd_wr_u32(&w, 1), ncfwd_wr_i32(&w, 0);
    put_frame(st, NCFWD_DEF_VAR, &w);
    w = (ncfwd_wr){0};
    ncfwd_wr_i32(&w, 0);
    put_frame(st, NCFWD_ENDDEF, &w);
    for (uint32_t i = 1 + below(12); i > 0; i--)
        put_request(st);
    if (below(2))
        put_frame(st, NCFWD_BYE, &(ncfwd_wr){0});
}

/* Mutations of the whole stream: bits, cuts, insertions, frame headers rewritten. */
static void mutate(stream *st)
{
    for (uint32_t m = below(4); m > 0 && st->len > 0; m--) {
        size_t at = below((uint32_t)st->len);
        switch (below(5)) {
        case 0:
            st->p[at] ^= (unsigned char)(1u << below(8));
            break;
        case 1:
            st->p[at] = (unsigned char)rnd();
            break;
        case 2: /* cut the rest */
            st->len = at;
            break;
        case 3: { /* a random frame spliced in */
            stream tail = {0};
            put_bytes(&tail, st->p + at, st->len - at);
            st->len = at;
            ncfwd_wr w = {0};
            for (uint32_t i = below(40); i > 0; i--)
                ncfwd_wr_u8(&w, (uint8_t)rnd());
            unsigned char h[NCFWD_HEADER];
            ncfwd_make_header(h, below(4) ? (int)below(120) : (int)rnd(),
                              below(4) ? (uint32_t)w.len : (uint32_t)rnd());
            put_bytes(st, h, sizeof h), put_bytes(st, w.buf, w.len), st->frames++;
            put_bytes(st, tail.p, tail.len);
            free(tail.p);
            break;
        }
        default: /* a length field somewhere made wrong */
            if (at + 4 <= st->len) {
                uint32_t v = below(2) ? (uint32_t)rnd() : (uint32_t)below(70000);
                memcpy(st->p + at, &v, 4);
            }
        }
    }
}

/* ------------------------------------------------------------ running one session */

typedef struct {
    int fd;
    const stream *st;
} feed;

static void *writer(void *arg)
{
    feed *f = arg;
    size_t off = 0;
    while (off < f->st->len) {
        ssize_t n = write(f->fd, f->st->p + off, f->st->len - off);
        if (n <= 0)
            break; /* the server ended the session: the rest is not read */
        off += (size_t)n;
    }
    shutdown(f->fd, SHUT_WR);
    return NULL;
}

static void *drainer(void *arg)
{
    feed *f = arg;
    char buf[65536];
    while (read(f->fd, buf, sizeof buf) > 0)
        ;
    return NULL;
}

/* The number of open file descriptors; with show, each one's target on stdout. */
static int open_fds(int show)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char link[PATH_MAX + 300], target[PATH_MAX] = "";
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(link, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        if (show)
            printf("  fd %s -> %s\n", e->d_name, target);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* What a client could have changed outside the export: the directory's entries (its mtime,
 * size and link count move with any entry made or removed) and the file in it. */
static void outside_state(const char *dir, char *out, size_t outlen)
{
    struct stat d, f;
    char file[PATH_MAX + 16];
    snprintf(file, sizeof file, "%s/precious", dir);
    memset(&d, 0, sizeof d), memset(&f, 0, sizeof f);
    stat(dir, &d), stat(file, &f);
    snprintf(out, outlen, "%lld.%09ld %lld %lld | %lld.%09ld %lld %llu", (long long)d.st_mtim.tv_sec,
             d.st_mtim.tv_nsec, (long long)d.st_size, (long long)d.st_nlink,
             (long long)f.st_mtim.tv_sec, f.st_mtim.tv_nsec, (long long)f.st_size,
             (unsigned long long)f.st_ino);
}

/* Whether a temporary (.ct-partial-, .ct-replace-) is left in a directory. */
static int temporaries_in(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)))
        found |= strstr(e->d_name, PARTIAL) != NULL || strstr(e->d_name, REPLACE) != NULL;
    if (d)
        closedir(d);
    return found;
}

static long findings;

static void finding(long iteration, const char *what)
{
    findings++;
    printf("finding: session %ld (seed state %llu): %s\n", iteration,
           (unsigned long long)rng_state, what);
    fflush(stdout);
}

/* The grid-mapfile parser on a mutated line: it must say 1, 0 or -1 and nothing else. */
static void fuzz_gridmap_line(void)
{
    static const char *const lines[] = {"\"CN=a,O=b\" . rw\n", "\"CN=a\" sub ro", "# x\n", "\"\" . rw",
                                        "\"CN=a\" ../x rw", "\"CN=a\" .", "\"CN=a\" . wr extra"};
    char line[GRIDMAP_LINE];
    snprintf(line, sizeof line, "%s", lines[below(sizeof lines / sizeof lines[0])]);
    size_t n = strlen(line);
    for (uint32_t m = below(4); m > 0 && n > 0; m--)
        line[below((uint32_t)n)] = (char)(below(2) ? rnd() : ' ');
    char *subject, *area, why[300];
    int ro;
    int r = gridmap_line(line, &subject, &area, &ro, why, sizeof why);
    if (r < -1 || r > 1)
        finding(-1, "gridmap_line returned something else than -1, 0 or 1");
}

static void fuzz_usage(void) { printf("usage: ct-io-fuzz --frames N [--seed S] [--seconds T]\n"); }

int main(int argc, char **argv)
{
    long frames_wanted = 100000, seconds = 0, seed = 1;
    int help = 0;
    const ct_opt table[] = {
        {"--frames", CT_OPT_LONG, .dest = &frames_wanted, .min = 0, .max = LONG_MAX},
        {"--seed", CT_OPT_LONG, .dest = &seed, .min = 0, .max = LONG_MAX},
        {"--seconds", CT_OPT_LONG, .dest = &seconds, .min = 0, .max = LONG_MAX},
        {"--help", CT_OPT_FLAG, .dest = &help},
        {.type = CT_OPT_END},
    };
    char err[512];
    int bad = ct_opt_parse(table, argc, argv, err, sizeof err) != 0, rank, size;
    ct_mpi_start_args start = {.parse_failed = bad, .help = help, .usage = fuzz_usage,
                               .err = err, .errlen = sizeof err};
    int status = ct_mpi_start(&start, &argc, &argv, &rank, &size);
    if (status != CT_MPI_RUN)
        return status;
    rng_state ^= (unsigned long long)seed * 0x9e3779b97f4a7c15ULL;
    signal(SIGPIPE, SIG_IGN);

    /* the export, a directory outside it, and the way out a client must never take */
    char base[] = "/tmp/ct-io-fuzz-XXXXXX", exp[PATH_MAX], outside[PATH_MAX], path[PATH_MAX + 32];
    if (!mkdtemp(base))
        ct_mpi_fail("mkdtemp: %s", strerror(errno));
    snprintf(exp, sizeof exp, "%s/export", base);
    snprintf(outside, sizeof outside, "%s/outside", base);
    mkdir(exp, 0755), mkdir(outside, 0755);
    snprintf(path, sizeof path, "%s/sub", exp), mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/escape", exp);
    if (symlink(outside, path))
        ct_mpi_fail("symlink: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/sub/link.nc", exp);
    if (symlink("../../outside/precious", path))
        ct_mpi_fail("symlink: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/precious", outside);
    FILE *pf = fopen(path, "w");
    fputs("not the server's", pf), fclose(pf);
    char before[256], after[256], sub[PATH_MAX + 8];
    outside_state(outside, before, sizeof before);
    snprintf(sub, sizeof sub, "%s/sub", exp);

    static server s;
    s.rank = 0, s.size = 1;
    s.o = (options){.idle = 5, .handshake = 5, .max_request = 1 << 20, .round = 0,
                    .max_memory = 1 << 20};
    if (!realpath(exp, s.export_real))
        ct_mpi_fail("realpath: %s", strerror(errno));
    s.export_fd = open(s.export_real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    s.replaced_dir = -1;

    long frames = 0, sessions = 0;
    double end = seconds > 0 ? ct_now() + (double)seconds : 1e300;
    int fds = -1;
    while (frames < frames_wanted && ct_now() < end) {
        stream st = {0};
        put_session(&st);
        if (below(4))
            mutate(&st);
        fuzz_gridmap_line();
        /* the session as open_session leaves it */
        s.token = rnd(), s.clients = 1, s.read_only = below(4) == 0;
        s.o.round = below(2) ? 0 : 4 + below(64);
        snprintf(s.subject, sizeof s.subject, "CN=fuzz,O=clustertune");
        snprintf(s.area, sizeof s.area, "%s", below(3) ? "." : "sub");
        memset(s.files, 0, sizeof s.files);
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
            ct_mpi_fail("socketpair: %s", strerror(errno));
        feed f = {sv[0], &st};
        pthread_t tw, td;
        pthread_create(&tw, NULL, writer, &f);
        pthread_create(&td, NULL, drainer, &f);
        s.conn[0] = (ncfwd_conn){.ssl = NULL, .fd = sv[1]};
        s.conn_rank[0] = 0, s.nconn = 1;
        serve(&s); /* ends the session (and closes sv[1]) at BYE or the first fault */
        pthread_join(tw, NULL);
        pthread_join(td, NULL);
        close(sv[0]);
        frames += st.frames, sessions++;
        free(st.p);

        for (int i = 0; i < MAX_FILES; i++)
            if (s.files[i].used)
                finding(sessions, "a file slot still in use after the session ended");
        outside_state(outside, after, sizeof after);
        if (strcmp(before, after) != 0)
            finding(sessions, "the directory outside the export changed");
        if (temporaries_in(exp) || temporaries_in(sub)) {
            /* a replaced file is removed on a thread after the reply: give it a moment */
            nanosleep(&(struct timespec){0, 300000000}, NULL);
            if (temporaries_in(exp) || temporaries_in(sub))
                finding(sessions, "a temporary file left in the export");
        }
        int now = open_fds(0);
        if (fds >= 0 && now > fds) { /* a replaced file's directory is closed on a thread */
            nanosleep(&(struct timespec){0, 300000000}, NULL);
            now = open_fds(0);
        }
        if (fds >= 0 && now > fds) {
            finding(sessions, "file descriptors leaked");
            open_fds(1);
        }
        fds = now;
        if (sessions % 2000 == 0) {
            printf("progress: frames %ld sessions %ld findings %ld\n", frames, sessions, findings);
            fflush(stdout);
        }
    }
    printf("frames %ld sessions %ld findings %ld\n", frames, sessions, findings);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        fprintf(stderr, "ct-io-fuzz: could not remove %s\n", base);
    MPI_Finalize();
    return findings ? 1 : 0;
}
