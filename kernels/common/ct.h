/* ct.h - the common harness every clustertune kernel links against.
 *
 * Output contract (read by clustertune.kernels on the Python side): a kernel writes
 * JSON Lines on stdout, one object per line, each with a "type":
 *   {"type":"sample", ...}   one measurement, written as soon as it is taken, so a
 *                            run that dies half-way still leaves its samples behind;
 *   {"type":"result", "verification":"passed|failed|not-verified", ...}
 *                            exactly one, last, written only by a kernel that finished;
 *   {"type":"error", "message":"..."}   a fault the kernel detected itself;
 *   {"type":"rank", ...}     MPI kernels: one per rank (all from rank 0) at MPI_Finalize,
 *                            its wall and CPU time since MPI_Init (ct_mpi.h).
 * Anything else on stdout (MPI library chatter) is ignored by the reader.
 */
#ifndef CT_H
#define CT_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

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
/* The same with a prefix before the formatted text (e.g. "<kernel>: rank 3: "). */
void ct_report_errorv(const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Monotonic wall clock in seconds. */
double ct_now(void);

/* CPU time this process has used so far (getrusage RUSAGE_SELF, every thread), seconds:
 * user and system apart. */
void ct_cpu_times(double *user_s, double *system_s);

/* Parse a byte count such as "4096", "64K", "8M", "1G" (binary multiples).
 * Returns 0 on success, -1 on a malformed or negative value. */
int ct_parse_bytes(const char *text, uint64_t *bytes);

/* A path without its directory: the kernel's name from argv[0], a file from __FILE__. */
const char *ct_basename(const char *path);

/* Memory the kernel could still get on this host without swapping (MemAvailable of
 * /proc/meminfo), in bytes; 0 when unknown. */
double ct_mem_available(void);

#endif
