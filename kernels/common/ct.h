/* ct.h - the common harness every clustertune kernel links against.
 *
 * Output contract (read by clustertune.kernels on the Python side): a kernel writes
 * JSON Lines on stdout, one object per line, each with a "type":
 *   {"type":"sample", ...}   one measurement, written as soon as it is taken, so a
 *                            run that dies half-way still leaves its samples behind;
 *   {"type":"result", "verification":"passed|failed|not-verified", ...}
 *                            exactly one, last, written only by a kernel that finished;
 *   {"type":"error", "message":"..."}   a fault the kernel detected itself.
 * Anything else on stdout (MPI library chatter) is ignored by the reader.
 */
#ifndef CT_H
#define CT_H

#include <stdio.h>
#include <stdint.h>

#define CT_JSON_MAX_DEPTH 32

/* Streaming JSON writer: no allocation, keeps only the comma state per nesting level.
 * A key is given inside objects and must be NULL inside arrays. */
typedef struct {
    FILE *out;
    int depth;
    int has_items[CT_JSON_MAX_DEPTH];
} ct_json;

void ct_json_start(ct_json *j, FILE *out, const char *type); /* opens {"type":TYPE */
void ct_json_end(ct_json *j);                                /* closes, newline, flush */
void ct_json_open_object(ct_json *j, const char *key);
void ct_json_close_object(ct_json *j);
void ct_json_open_array(ct_json *j, const char *key);
void ct_json_close_array(ct_json *j);
void ct_json_string(ct_json *j, const char *key, const char *value);
void ct_json_number(ct_json *j, const char *key, double value); /* NaN/Inf -> null */
void ct_json_integer(ct_json *j, const char *key, long long value);
void ct_json_bool(ct_json *j, const char *key, int value);

/* One-line error record on stdout plus a message on stderr. */
void ct_report_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Monotonic wall clock in seconds. */
double ct_now(void);

/* Parse a byte count such as "4096", "64K", "8M", "1G" (binary multiples).
 * Returns 0 on success, -1 on a malformed or negative value. */
int ct_parse_bytes(const char *text, uint64_t *bytes);

/* Parse a non-negative integer; returns 0 on success, -1 otherwise. */
int ct_parse_long(const char *text, long *value);

#endif
