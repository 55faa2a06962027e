/* ct.c - implementation of the common kernel harness (see ct.h). */
#define _POSIX_C_SOURCE 200809L
#include "ct.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static void separator(ct_json *j, const char *key)
{
    if (j->has_items[j->depth])
        fputc(',', j->out);
    j->has_items[j->depth] = 1;
    if (key) {
        fputc('"', j->out);
        fputs(key, j->out); /* keys are literals chosen by kernels: never need escaping */
        fputs("\":", j->out);
    }
}

static void push(ct_json *j, char bracket)
{
    fputc(bracket, j->out);
    if (j->depth + 1 < CT_JSON_MAX_DEPTH)
        j->depth++;
    j->has_items[j->depth] = 0;
}

static void pop(ct_json *j, char bracket)
{
    fputc(bracket, j->out);
    if (j->depth > 0)
        j->depth--;
}

void ct_json_start(ct_json *j, FILE *out, const char *type)
{
    j->out = out;
    j->depth = 0;
    j->has_items[0] = 0;
    push(j, '{');
    ct_json_string(j, "type", type);
}

void ct_json_end(ct_json *j)
{
    while (j->depth > 0)
        pop(j, '}');
    fputc('\n', j->out);
    fflush(j->out);
}

void ct_json_open_object(ct_json *j, const char *key)
{
    separator(j, key);
    push(j, '{');
}

void ct_json_close_object(ct_json *j) { pop(j, '}'); }

void ct_json_open_array(ct_json *j, const char *key)
{
    separator(j, key);
    push(j, '[');
}

void ct_json_close_array(ct_json *j) { pop(j, ']'); }

void ct_json_string(ct_json *j, const char *key, const char *value)
{
    separator(j, key);
    fputc('"', j->out);
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(j->out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(j->out, "\\u%04x", *p);
        else
            fputc(*p, j->out);
    }
    fputc('"', j->out);
}

void ct_json_number(ct_json *j, const char *key, double value)
{
    separator(j, key);
    if (isfinite(value))
        fprintf(j->out, "%.17g", value);
    else
        fputs("null", j->out);
}

void ct_json_integer(ct_json *j, const char *key, long long value)
{
    separator(j, key);
    fprintf(j->out, "%lld", value);
}

void ct_json_bool(ct_json *j, const char *key, int value)
{
    separator(j, key);
    fputs(value ? "true" : "false", j->out);
}

void ct_report_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ct_report_errorv("", fmt, ap);
    va_end(ap);
}

void ct_report_errorv(const char *prefix, const char *fmt, va_list ap)
{
    char message[1024];
    int used = snprintf(message, sizeof message, "%s", prefix);
    if (used >= 0 && (size_t)used < sizeof message)
        vsnprintf(message + used, sizeof message - (size_t)used, fmt, ap);
    fprintf(stderr, "error: %s\n", message);
    ct_json j;
    ct_json_start(&j, stdout, "error");
    ct_json_string(&j, "message", message);
    ct_json_end(&j);
}

double ct_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ct_cpu_times(double *user_s, double *system_s)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec;
    *system_s = (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

int ct_parse_bytes(const char *text, uint64_t *bytes)
{
    char *end;
    errno = 0;
    if (text[0] == '-')
        return -1;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'B')
        end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
    if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *bytes = (uint64_t)v << shift;
    return 0;
}

const char *ct_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

double ct_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0.0;
    char line[256];
    double kib = 0.0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1)
            break;
    fclose(f);
    return kib * 1024.0;
}
