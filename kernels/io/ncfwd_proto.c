/* ncfwd_proto.c - frames, bounded payload reading and TLS connections (ncfwd_proto.h). */
#define _POSIX_C_SOURCE 200809L
#include "ncfwd_proto.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static const char *const op_names[] = {
    "?", "HELLO", "CREATE", "OPEN", "PUT_ATT_TEXT", "DEF_DIM", "DEF_VAR", "ENDDEF", "INQ_DIMID",
    "INQ_DIMLEN", "INQ_VARID", "BEGIN_INDEP", "END_INDEP", "PUT", "GET", "DATA", "CLOSE", "BYE"};

const char *ncfwd_op_name(int op)
{
    if (op == NCFWD_REPLY)
        return "REPLY";
    return op >= 1 && op <= NCFWD_OP_LAST ? op_names[op] : "unknown";
}

/* ------------------------------------------------------------ payloads */

static void put_le(ncfwd_wr *w, uint64_t v, size_t n)
{
    if (w->len + n > sizeof w->buf) {
        w->overflow = 1;
        return;
    }
    for (size_t i = 0; i < n; i++)
        w->buf[w->len++] = (unsigned char)(v >> (8 * i));
}

void ncfwd_wr_u8(ncfwd_wr *w, uint8_t v) { put_le(w, v, 1); }
void ncfwd_wr_u16(ncfwd_wr *w, uint16_t v) { put_le(w, v, 2); }
void ncfwd_wr_u32(ncfwd_wr *w, uint32_t v) { put_le(w, v, 4); }
void ncfwd_wr_u64(ncfwd_wr *w, uint64_t v) { put_le(w, v, 8); }
void ncfwd_wr_i32(ncfwd_wr *w, int32_t v) { put_le(w, (uint32_t)v, 4); }
void ncfwd_wr_i64(ncfwd_wr *w, int64_t v) { put_le(w, (uint64_t)v, 8); }

void ncfwd_wr_str(ncfwd_wr *w, const char *s, size_t len)
{
    if (len >= NCFWD_MAX_NAME || w->len + 4 + len > sizeof w->buf) {
        w->overflow = 1;
        return;
    }
    put_le(w, len, 4);
    memcpy(w->buf + w->len, s, len);
    w->len += len;
}

void ncfwd_rd_init(ncfwd_rd *r, const void *p, size_t len)
{
    *r = (ncfwd_rd){.p = p, .len = len};
}

static int get_le(ncfwd_rd *r, uint64_t *v, size_t n)
{
    if (r->bad || r->len - r->at < n) {
        r->bad = 1;
        return -1;
    }
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++)
        x |= (uint64_t)r->p[r->at + i] << (8 * i);
    r->at += n;
    *v = x;
    return 0;
}

int ncfwd_rd_u8(ncfwd_rd *r, uint8_t *v)
{
    uint64_t x = 0;
    int rc = get_le(r, &x, 1);
    *v = (uint8_t)x;
    return rc;
}

int ncfwd_rd_u16(ncfwd_rd *r, uint16_t *v)
{
    uint64_t x = 0;
    int rc = get_le(r, &x, 2);
    *v = (uint16_t)x;
    return rc;
}

int ncfwd_rd_u32(ncfwd_rd *r, uint32_t *v)
{
    uint64_t x = 0;
    int rc = get_le(r, &x, 4);
    *v = (uint32_t)x;
    return rc;
}

int ncfwd_rd_u64(ncfwd_rd *r, uint64_t *v) { return get_le(r, v, 8); }

int ncfwd_rd_i32(ncfwd_rd *r, int32_t *v)
{
    uint32_t x = 0;
    int rc = ncfwd_rd_u32(r, &x);
    *v = (int32_t)x;
    return rc;
}

int ncfwd_rd_i64(ncfwd_rd *r, int64_t *v)
{
    uint64_t x = 0;
    int rc = get_le(r, &x, 8);
    *v = (int64_t)x;
    return rc;
}

int ncfwd_rd_str(ncfwd_rd *r, char *out, size_t outlen)
{
    uint32_t n;
    if (ncfwd_rd_u32(r, &n))
        return -1;
    if (n >= NCFWD_MAX_NAME || n >= outlen || r->len - r->at < n ||
        memchr(r->p + r->at, '\0', n)) {
        r->bad = 1;
        return -1;
    }
    memcpy(out, r->p + r->at, n);
    out[n] = '\0';
    r->at += n;
    return 0;
}

int ncfwd_rd_done(const ncfwd_rd *r) { return r->bad || r->at != r->len ? -1 : 0; }

/* ------------------------------------------------------------ frames */

void ncfwd_make_header(unsigned char h[NCFWD_HEADER], int op, uint32_t length)
{
    memcpy(h, NCFWD_MAGIC, 4);
    h[4] = NCFWD_VERSION & 0xff, h[5] = NCFWD_VERSION >> 8;
    h[6] = (unsigned char)(op & 0xff), h[7] = (unsigned char)(op >> 8);
    for (int i = 0; i < 4; i++)
        h[8 + i] = (unsigned char)(length >> (8 * i));
}

int ncfwd_parse_header(const unsigned char h[NCFWD_HEADER], int *op, uint32_t *length, char *why,
                       size_t whylen)
{
    unsigned version = h[4] | (unsigned)h[5] << 8;
    *op = h[6] | h[7] << 8;
    *length = (uint32_t)h[8] | (uint32_t)h[9] << 8 | (uint32_t)h[10] << 16 | (uint32_t)h[11] << 24;
    if (memcmp(h, NCFWD_MAGIC, 4) != 0) {
        snprintf(why, whylen, "not a clustertune I/O frame (bad magic)");
        return -1;
    }
    if (version != NCFWD_VERSION) {
        snprintf(why, whylen, "protocol version %u, this side speaks %d", version, NCFWD_VERSION);
        return -1;
    }
    if (!((*op >= 1 && *op <= NCFWD_OP_LAST) || *op == NCFWD_REPLY)) {
        snprintf(why, whylen, "unknown op %d", *op);
        return -1;
    }
    uint32_t limit = *op == NCFWD_DATA ? NCFWD_MAX_DATA : NCFWD_MAX_CONTROL;
    if (*length > limit) {
        snprintf(why, whylen, "%s frame of %u bytes exceeds the limit of %u", ncfwd_op_name(*op),
                 *length, limit);
        return -1;
    }
    return 0;
}

static int io_all(ncfwd_conn *c, void *buf, size_t len, int writing)
{
    unsigned char *p = buf;
    while (len > 0) {
        int chunk = len > (1u << 30) ? 1 << 30 : (int)len;
        int n;
        if (c->ssl) {
            n = writing ? SSL_write(c->ssl, p, chunk) : SSL_read(c->ssl, p, chunk);
            if (n <= 0) {
                int e = SSL_get_error(c->ssl, n);
                if (e == SSL_ERROR_ZERO_RETURN)
                    snprintf(c->error, sizeof c->error, "connection closed by the peer");
                else if (e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))
                    snprintf(c->error, sizeof c->error, "timed out");
                else if (e == SSL_ERROR_SYSCALL)
                    snprintf(c->error, sizeof c->error, "connection lost%s%s", errno ? ": " : "",
                             errno ? strerror(errno) : "");
                else
                    snprintf(c->error, sizeof c->error, "TLS: %s",
                             ERR_reason_error_string(ERR_peek_last_error()) ?: "error");
                ERR_clear_error();
                return -1;
            }
        } else {
            n = (int)(writing ? write(c->fd, p, (size_t)chunk) : read(c->fd, p, (size_t)chunk));
            if (n <= 0) {
                snprintf(c->error, sizeof c->error, "%s", n == 0 ? "connection closed by the peer"
                                                                 : strerror(errno));
                return -1;
            }
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int ncfwd_send(ncfwd_conn *c, int op, const void *payload, size_t len)
{
    unsigned char h[NCFWD_HEADER];
    ncfwd_make_header(h, op, (uint32_t)len);
    if (len <= 4096) { /* one record for small frames */
        unsigned char one[NCFWD_HEADER + 4096];
        memcpy(one, h, NCFWD_HEADER);
        if (len)
            memcpy(one + NCFWD_HEADER, payload, len);
        return io_all(c, one, NCFWD_HEADER + len, 1);
    }
    if (io_all(c, h, NCFWD_HEADER, 1))
        return -1;
    return io_all(c, (void *)payload, len, 1);
}

int ncfwd_send_wr(ncfwd_conn *c, int op, const ncfwd_wr *w)
{
    if (w->overflow) {
        snprintf(c->error, sizeof c->error, "%s request too large", ncfwd_op_name(op));
        return -1;
    }
    return ncfwd_send(c, op, w->buf, w->len);
}

int ncfwd_recv(ncfwd_conn *c, int *op, void *buf, size_t cap, uint32_t *len)
{
    unsigned char h[NCFWD_HEADER];
    if (io_all(c, h, NCFWD_HEADER, 0))
        return -1;
    char why[160];
    if (ncfwd_parse_header(h, op, len, why, sizeof why)) {
        snprintf(c->error, sizeof c->error, "malformed frame: %s", why);
        return -1;
    }
    if (*len > cap) {
        snprintf(c->error, sizeof c->error, "malformed frame: %s of %u bytes where at most %zu fit",
                 ncfwd_op_name(*op), *len, cap);
        return -1;
    }
    return io_all(c, buf, *len, 0);
}

int ncfwd_send_data(ncfwd_conn *c, const void *buf, uint64_t bytes)
{
    const unsigned char *p = buf;
    while (bytes > 0) {
        size_t n = bytes > NCFWD_CHUNK ? NCFWD_CHUNK : (size_t)bytes;
        if (ncfwd_send(c, NCFWD_DATA, p, n))
            return -1;
        p += n;
        bytes -= n;
    }
    return 0;
}

int ncfwd_recv_data_part(ncfwd_conn *c, void *buf, uint64_t want, uint64_t *frame_left,
                         uint64_t total_left)
{
    unsigned char *p = buf;
    while (want > 0) {
        if (*frame_left == 0) {
            unsigned char h[NCFWD_HEADER];
            int op;
            uint32_t len;
            char why[160];
            if (io_all(c, h, NCFWD_HEADER, 0))
                return -1;
            if (ncfwd_parse_header(h, &op, &len, why, sizeof why)) {
                snprintf(c->error, sizeof c->error, "malformed frame: %s", why);
                return -1;
            }
            if (op != NCFWD_DATA || len == 0 || len > total_left) {
                snprintf(c->error, sizeof c->error,
                         "malformed frame: %s of %u bytes where DATA of %llu more bytes was due",
                         ncfwd_op_name(op), len, (unsigned long long)total_left);
                return -1;
            }
            *frame_left = len;
        }
        size_t n = (size_t)(want < *frame_left ? want : *frame_left);
        if (io_all(c, p, n, 0))
            return -1;
        p += n;
        want -= n, total_left -= n, *frame_left -= n;
    }
    return 0;
}

int ncfwd_recv_data(ncfwd_conn *c, void *buf, uint64_t bytes)
{
    uint64_t frame_left = 0;
    return ncfwd_recv_data_part(c, buf, bytes, &frame_left, bytes);
}

void ncfwd_close(ncfwd_conn *c)
{
    if (c->ssl) {
        SSL_shutdown(c->ssl);
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* ------------------------------------------------------------ TLS */

static void tls_why(char *why, size_t whylen, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    snprintf(why, whylen, "%s%s%s", what, e ? ": " : "", buf);
    ERR_clear_error();
}

/* The subject of a certificate as a full RFC 2253 distinguished name (every special
 * character escaped, nothing cut): 0, or -1 when it does not fit out. */
static int subject_rfc2253(X509 *cert, char *out, size_t outlen)
{
    BIO *bio = BIO_new(BIO_s_mem());
    int n = bio ? X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) : -1;
    int rc = -1;
    if (n >= 0 && (size_t)n < outlen && BIO_read(bio, out, n) == n) {
        out[n] = '\0';
        rc = 0;
    }
    BIO_free(bio);
    return rc;
}

/* Verification callback: the subject of a certificate the chain check refused goes into
 * the connection's peer, so the refusal names whom it refused. */
static int note_refused(int ok, X509_STORE_CTX *store)
{
    if (!ok) {
        SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
        ncfwd_conn *c = ssl ? SSL_get_app_data(ssl) : NULL;
        X509 *cert = X509_STORE_CTX_get_current_cert(store);
        if (c && cert && subject_rfc2253(cert, c->peer, sizeof c->peer))
            snprintf(c->peer, sizeof c->peer, "(a subject too long to show)");
    }
    return ok;
}

SSL_CTX *ncfwd_tls_context(int server, const char *cert, const char *key, const char *ca,
                           char *why, size_t whylen)
{
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx) {
        tls_why(why, whylen, "SSL_CTX_new");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        tls_why(why, whylen, "certificate");
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
               SSL_CTX_check_private_key(ctx) != 1) {
        tls_why(why, whylen, "private key");
    } else if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
        tls_why(why, whylen, "CA file");
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, note_refused);
        return ctx;
    }
    SSL_CTX_free(ctx);
    return NULL;
}

int ncfwd_tls_set_crl(SSL_CTX *ctx, const char *ca, const char *crl, char *why, size_t whylen)
{
    X509_STORE *store = X509_STORE_new();
    int rc = -1;
    if (!store) {
        tls_why(why, whylen, "X509_STORE_new");
        return -1;
    }
    /* leaf only: the CA's own CRL covers the certificates it issued */
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
    if (X509_STORE_load_file(store, ca) != 1) {
        tls_why(why, whylen, "CA file");
    } else if (X509_STORE_load_file(store, crl) != 1) {
        tls_why(why, whylen, "CRL file");
    } else {
        STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(store);
        int crls = 0;
        for (int i = 0; i < sk_X509_OBJECT_num(objs); i++)
            crls += X509_OBJECT_get_type(sk_X509_OBJECT_value(objs, i)) == X509_LU_CRL;
        if (crls)
            rc = 0;
        else
            snprintf(why, whylen, "CRL file %s holds no CRL", crl);
    }
    if (rc) { /* fail closed: the CA without any CRL, under CRL_CHECK, verifies nobody */
        X509_STORE_free(store);
        store = X509_STORE_new();
        if (!store)
            return -1;
        X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
        X509_STORE_load_file(store, ca);
        ERR_clear_error();
    }
    SSL_CTX_set_cert_store(ctx, store);
    return rc;
}

/* Whether text is an IPv4 or IPv6 address (checked as an address, not as a DNS name). */
static int is_address(const char *text)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, text, buf) == 1 || inet_pton(AF_INET6, text, buf) == 1;
}

int ncfwd_tls_begin(ncfwd_conn *c, SSL_CTX *ctx, int fd, int server, const char *host)
{
    int one = 1; /* requests and replies are small: no Nagle delay on them */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd = fd;
    c->want = POLLIN;
    c->peer[0] = c->error[0] = '\0';
    c->ssl = SSL_new(ctx);
    if (!c->ssl || SSL_set_fd(c->ssl, fd) != 1) {
        tls_why(c->error, sizeof c->error, "SSL_new");
        return -1;
    }
    SSL_set_app_data(c->ssl, c);
    if (!server && host) {
        /* the server must be the one dialled: its name or address in its certificate's
         * subjectAltName (never the CN, which any certificate of the CA may carry) */
        X509_VERIFY_PARAM *param = SSL_get0_param(c->ssl);
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
        int ok = is_address(host) ? X509_VERIFY_PARAM_set1_ip_asc(param, host)
                                  : SSL_set1_host(c->ssl, host) && SSL_set_tlsext_host_name(c->ssl, host);
        if (ok != 1) {
            tls_why(c->error, sizeof c->error, "server name to check");
            return -1;
        }
    }
    return 0;
}

int ncfwd_tls_step(ncfwd_conn *c, int server)
{
    ERR_clear_error();
    SSL_set_app_data(c->ssl, c); /* c may have moved since the last step (note_refused) */
    int rc = server ? SSL_accept(c->ssl) : SSL_connect(c->ssl);
    if (rc != 1) {
        int e = SSL_get_error(c->ssl, rc);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            c->want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
            return 0;
        }
        long v = SSL_get_verify_result(c->ssl);
        if (v != X509_V_OK)
            snprintf(c->error, sizeof c->error, "TLS handshake: certificate refused: %s",
                     X509_verify_cert_error_string(v));
        else if (e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))
            snprintf(c->error, sizeof c->error, "TLS handshake: timed out");
        else
            tls_why(c->error, sizeof c->error, "TLS handshake");
        return -1;
    }
    X509 *peer = SSL_get1_peer_certificate(c->ssl);
    if (!peer) {
        snprintf(c->error, sizeof c->error, "TLS handshake: the peer sent no certificate");
        return -1;
    }
    rc = subject_rfc2253(peer, c->peer, sizeof c->peer);
    X509_free(peer);
    if (rc) {
        snprintf(c->peer, sizeof c->peer, "(a subject too long to show)");
        snprintf(c->error, sizeof c->error, "TLS handshake: subject longer than %d bytes",
                 NCFWD_MAX_SUBJECT - 1);
        return -1;
    }
    return 1;
}

int ncfwd_tls_start(ncfwd_conn *c, SSL_CTX *ctx, int fd, int server, const char *host)
{
    if (ncfwd_tls_begin(c, ctx, fd, server, host))
        return -1;
    int rc;
    while ((rc = ncfwd_tls_step(c, server)) == 0) {
        struct pollfd p = {.fd = fd, .events = (short)c->want};
        if (poll(&p, 1, -1) < 0 && errno != EINTR) { /* a blocking socket: rarely taken */
            snprintf(c->error, sizeof c->error, "poll: %s", strerror(errno));
            return -1;
        }
    }
    return rc == 1 ? 0 : -1;
}

void ncfwd_set_timeout(int fd, double seconds)
{
    struct timeval tv = {.tv_sec = (time_t)seconds,
                         .tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}
