/* ncfwd_proto.h - the wire protocol of netCDF forwarding (ct-io-server <-> libct_ncfwd),
 * and the TLS connections it runs over. Shared by the client library and the server.
 *
 * Every message is a frame: a 12-byte header, all integers little-endian,
 *     "CTIO"  u16 version  u16 op  u32 length
 * then `length` bytes of payload. A receiver refuses (and drops the connection of) a frame
 * with a wrong magic or version, an unknown op, or a length above the limit of its op
 * (NCFWD_MAX_CONTROL for requests and replies, NCFWD_MAX_DATA for data); payload fields are
 * read with bounds checks (ncfwd_rd), so a short or long payload is an error too.
 *
 * Requests carry their arguments; every request gets exactly one REPLY (i32 status = a
 * netCDF error code, then results), in order, so a client may send several requests before
 * reading their replies (metadata batched at enddef). Bulk data follow a PUT request (from
 * the client) or a GET's reply (from the server) as DATA frames of at most NCFWD_CHUNK bytes,
 * exactly as many bytes as start/count say: streamed, never one round trip per chunk.
 */
#ifndef NCFWD_PROTO_H
#define NCFWD_PROTO_H

#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>

#define NCFWD_MAGIC "CTIO"
#define NCFWD_VERSION 1
#define NCFWD_HEADER 12
#define NCFWD_MAX_CONTROL (64 * 1024)
#define NCFWD_CHUNK (1024 * 1024)
#define NCFWD_MAX_DATA NCFWD_CHUNK
#define NCFWD_MAX_NAME 1024 /* path, names, attribute text */
#define NCFWD_MAX_DIMS 8
#define NCFWD_MAX_SERVERS 256
#define NCFWD_MAX_SUBJECT 1024 /* a certificate subject in RFC 2253 form; longer ones refused */

enum ncfwd_op {
    NCFWD_HELLO = 1,   /* u32 rank, u32 size, u64 token -> u32 servers, u16 port x servers */
    NCFWD_CREATE,      /* i32 cmode, str path -> i32 ncid */
    NCFWD_OPEN,        /* i32 omode, str path -> i32 ncid, u32 ndims {str, i64}, u32 nvars {str, i32 ndims} */
    NCFWD_PUT_ATT_TEXT,/* i32 ncid, i32 varid, str name, str text */
    NCFWD_DEF_DIM,     /* i32 ncid, str name, i64 len -> i32 dimid */
    NCFWD_DEF_VAR,     /* i32 ncid, str name, i32 type, u32 ndims, i32 dimid x ndims -> i32 varid */
    NCFWD_ENDDEF,      /* i32 ncid */
    NCFWD_INQ_DIMID,   /* i32 ncid, str name -> i32 dimid */
    NCFWD_INQ_DIMLEN,  /* i32 ncid, i32 dimid -> i64 len */
    NCFWD_INQ_VARID,   /* i32 ncid, str name -> i32 varid */
    NCFWD_BEGIN_INDEP, /* i32 ncid */
    NCFWD_END_INDEP,   /* i32 ncid */
    NCFWD_PUT,         /* i32 ncid, i32 varid, u8 collective, u32 ndims, i64 start, i64 count x ndims; DATA */
    NCFWD_GET,         /* same -> status; DATA */
    NCFWD_DATA,        /* raw bytes */
    NCFWD_CLOSE,       /* i32 ncid */
    NCFWD_BYE,         /* end of the session */
    NCFWD_OP_LAST = NCFWD_BYE,
    NCFWD_REPLY = 100, /* i32 status, results */
};

const char *ncfwd_op_name(int op);

/* ------------------------------------------------------------ payload building */

typedef struct {
    unsigned char buf[NCFWD_MAX_CONTROL];
    size_t len;
    int overflow;
} ncfwd_wr;

void ncfwd_wr_u8(ncfwd_wr *w, uint8_t v);
void ncfwd_wr_u16(ncfwd_wr *w, uint16_t v);
void ncfwd_wr_u32(ncfwd_wr *w, uint32_t v);
void ncfwd_wr_u64(ncfwd_wr *w, uint64_t v);
void ncfwd_wr_i32(ncfwd_wr *w, int32_t v);
void ncfwd_wr_i64(ncfwd_wr *w, int64_t v);
void ncfwd_wr_str(ncfwd_wr *w, const char *s, size_t len); /* u32 length + bytes */

/* Reading: every getter returns 0, or -1 (and sets bad) past the end or on a bad value. */
typedef struct {
    const unsigned char *p;
    size_t len, at;
    int bad;
} ncfwd_rd;

void ncfwd_rd_init(ncfwd_rd *r, const void *p, size_t len);
int ncfwd_rd_u8(ncfwd_rd *r, uint8_t *v);
int ncfwd_rd_u16(ncfwd_rd *r, uint16_t *v);
int ncfwd_rd_u32(ncfwd_rd *r, uint32_t *v);
int ncfwd_rd_u64(ncfwd_rd *r, uint64_t *v);
int ncfwd_rd_i32(ncfwd_rd *r, int32_t *v);
int ncfwd_rd_i64(ncfwd_rd *r, int64_t *v);
/* a string of at most NCFWD_MAX_NAME - 1 bytes without NUL, copied NUL-terminated */
int ncfwd_rd_str(ncfwd_rd *r, char *out, size_t outlen);
/* 0 when every byte was read and nothing was bad: a payload with trailing bytes is bad */
int ncfwd_rd_done(const ncfwd_rd *r);

/* ------------------------------------------------------------ frames */

/* Parses a header: 0, or -1 with the reason in why (wrong magic, version, op, length). */
int ncfwd_parse_header(const unsigned char h[NCFWD_HEADER], int *op, uint32_t *length, char *why,
                       size_t whylen);
void ncfwd_make_header(unsigned char h[NCFWD_HEADER], int op, uint32_t length);

/* A TLS connection (or, for tests of the parser, plain fds: ssl == NULL). */
typedef struct {
    SSL *ssl;
    int fd;
    int want;                      /* ncfwd_tls_step: POLLIN or POLLOUT to wait for */
    char peer[NCFWD_MAX_SUBJECT];  /* the peer certificate's subject, RFC 2253, never cut */
    char error[NCFWD_MAX_SUBJECT]; /* what went wrong last */
} ncfwd_conn;

/* Sends one frame; 0 or -1 (error in c->error). */
int ncfwd_send(ncfwd_conn *c, int op, const void *payload, size_t len);
int ncfwd_send_wr(ncfwd_conn *c, int op, const ncfwd_wr *w);
/* Receives one frame's header and payload into buf (cap bytes); 0 or -1 (c->error says why:
 * closed, timed out, malformed, too long). */
int ncfwd_recv(ncfwd_conn *c, int *op, void *buf, size_t cap, uint32_t *len);
/* Streams `bytes` from buf as DATA frames; receives exactly `bytes` of DATA frames into buf. */
int ncfwd_send_data(ncfwd_conn *c, const void *buf, uint64_t bytes);
int ncfwd_recv_data(ncfwd_conn *c, void *buf, uint64_t bytes);
/* Receives the next `want` bytes of a stream of DATA frames that has `total_left` bytes
 * still due (frames may straddle calls: *frame_left, 0 at the start, carries the rest of the
 * current frame), so a receiver can act on a transfer's first part while the rest travels. */
int ncfwd_recv_data_part(ncfwd_conn *c, void *buf, uint64_t want, uint64_t *frame_left,
                         uint64_t total_left);
void ncfwd_close(ncfwd_conn *c);

/* ------------------------------------------------------------ TLS (OpenSSL, TLS 1.3) */

/* A context that presents cert/key and accepts only peers whose certificate chains to the
 * CA file; the server also requires a client certificate. NULL with why on error. */
SSL_CTX *ncfwd_tls_context(int server, const char *cert, const char *key, const char *ca,
                           char *why, size_t whylen);
/* The CA file and a CRL (PEM) as the context's trust store: every peer certificate is then
 * checked against the CRL, and one it revokes is refused (so is every peer when the CRL has
 * expired). Replaces the store in use, so a re-read CRL applies to the next handshakes.
 * 0, or -1 with why (the context is then left refusing every peer: fail closed). */
int ncfwd_tls_set_crl(SSL_CTX *ctx, const char *ca, const char *crl, char *why, size_t whylen);
/* Sets up a handshake on a connected socket: as the client, `host` (not NULL) is the name or
 * address the certificate of the server must carry (subjectAltName). 0 or -1 (c->error). */
int ncfwd_tls_begin(ncfwd_conn *c, SSL_CTX *ctx, int fd, int server, const char *host);
/* One step of the handshake (a non-blocking socket returns between steps): 1 done (c->peer
 * filled), 0 to be called again when c->want is ready, -1 refused (c->error, and c->peer
 * names the refused certificate when there was one). */
int ncfwd_tls_step(ncfwd_conn *c, int server);
/* The whole handshake on a blocking socket (begin and step). 0 or -1 with c->error. */
int ncfwd_tls_start(ncfwd_conn *c, SSL_CTX *ctx, int fd, int server, const char *host);
/* Idle timeout of a socket's reads and writes (seconds). */
void ncfwd_set_timeout(int fd, double seconds);

#endif
