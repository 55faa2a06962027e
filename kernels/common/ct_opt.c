/* ct_opt.c - the table-driven command-line parser (see ct_opt.h). */
#define _POSIX_C_SOURCE 200809L
#include "ct_opt.h"
#include "ct.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What an entry accepts, in words. */
static void describe(const ct_opt *o, char *out, size_t len)
{
    switch (o->type) {
    case CT_OPT_INT:
    case CT_OPT_LONG:
        if (o->max >= INT_MAX && (o->min == 0 || o->min == 1))
            snprintf(out, len, "a %s integer", o->min == 0 ? "non-negative" : "positive");
        else if (o->max >= INT_MAX)
            snprintf(out, len, "an integer >= %.0f", o->min);
        else
            snprintf(out, len, "an integer from %.0f to %.0f", o->min, o->max);
        break;
    case CT_OPT_BYTES:
        snprintf(out, len, "a byte count such as 4096, 64K or 8M");
        if (o->max > 0)
            snprintf(out + strlen(out), len - strlen(out), " (at most %.0f)", o->max);
        break;
    case CT_OPT_NUMBER: snprintf(out, len, "a number"); break;
    case CT_OPT_SECONDS: snprintf(out, len, "a number of seconds > 0 and <= %g", o->max); break;
    case CT_OPT_CHOICE:
        snprintf(out, len, "one of");
        for (int i = 0; o->choices[i]; i++)
            snprintf(out + strlen(out), len - strlen(out), "%s %s", i ? "," : "", o->choices[i]);
        break;
    default: out[0] = '\0'; break;
    }
}

/* Stores text as the entry's value; returns 0, or -1 after writing what was expected. */
static int store(const ct_opt *o, const char *text, char *expected, size_t len)
{
    char *end;
    errno = 0;
    switch (o->type) {
    case CT_OPT_INT:
    case CT_OPT_LONG: {
        long v = strtol(text, &end, 10);
        if (errno || end == text || *end || (double)v < o->min || (double)v > o->max)
            break;
        if (o->type == CT_OPT_INT)
            *(int *)o->dest = (int)v;
        else
            *(long *)o->dest = v;
        return 0;
    }
    case CT_OPT_BYTES: {
        uint64_t v;
        if (ct_parse_bytes(text, &v) || (o->max > 0 && (double)v > o->max))
            break;
        *(uint64_t *)o->dest = v;
        return 0;
    }
    case CT_OPT_NUMBER:
    case CT_OPT_SECONDS: {
        double v = strtod(text, &end);
        if (end == text || *end || !isfinite(v) ||
            (o->type == CT_OPT_SECONDS && !(v > 0 && v <= o->max)))
            break;
        *(double *)o->dest = v;
        return 0;
    }
    case CT_OPT_STRING: *(const char **)o->dest = text; return 0;
    case CT_OPT_CHOICE:
        for (int i = 0; o->choices[i]; i++)
            if (strcmp(text, o->choices[i]) == 0) {
                *(int *)o->dest = i;
                return 0;
            }
        break;
    case CT_OPT_CUSTOM: return o->parse(o, text, expected, len);
    default: break;
    }
    describe(o, expected, len);
    return -1;
}

static const ct_opt *find_flag(const ct_opt *t, const char *name)
{
    for (; t->type != CT_OPT_END; t++) {
        const ct_opt *f = t->type == CT_OPT_TABLE ? find_flag(t->table, name)
                          : t->name[0] == '-' && strcmp(t->name, name) == 0 ? t
                                                                             : NULL;
        if (f)
            return f;
    }
    return NULL;
}

/* The positional entry number *n (counting from 0), or NULL when there are fewer. */
static const ct_opt *find_positional(const ct_opt *t, int *n)
{
    for (; t->type != CT_OPT_END; t++) {
        if (t->type == CT_OPT_TABLE) {
            const ct_opt *f = find_positional(t->table, n);
            if (f)
                return f;
        } else if (t->name[0] != '-' && (*n)-- == 0) {
            return t;
        }
    }
    return NULL;
}

/* Keeps the first error only. */
static void fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int ct_opt_parse(const ct_opt *table, int argc, char **argv, char *err, size_t errlen)
{
    const char *prog = ct_basename(argv[0]);
    int npos = 0;
    err[0] = '\0';
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int k = npos, flag = arg[0] == '-' && arg[1];
        const ct_opt *o = flag ? find_flag(table, arg) : find_positional(table, &k);
        if (!o) {
            fail(err, errlen, "%s: %s '%s' (see --help)", prog,
                 flag ? "unknown option" : "unexpected argument", arg);
            continue;
        }
        if (o->seen)
            *o->seen = 1;
        if (o->type == CT_OPT_FLAG) {
            *(int *)o->dest = 1;
            continue;
        }
        const char *text = arg;
        if (o->name[0] != '-')
            npos++;
        else if (i + 1 < argc)
            text = argv[++i];
        else {
            fail(err, errlen, "%s: %s needs a value (see --help)", prog, o->name);
            continue;
        }
        char expected[200] = "";
        if (store(o, text, expected, sizeof expected))
            fail(err, errlen, "%s: %s: expected %s, got '%s'", prog, o->name, expected, text);
    }
    const ct_opt *missing = find_positional(table, &npos);
    if (missing)
        fail(err, errlen, "%s: missing %s (see --help)", prog, missing->name);
    return err[0] ? -1 : 0;
}

int ct_parse_int_list(const char *text, char sep, const char *const *choices, long min, long max,
                      int *v, int max_count)
{
    const char seps[2] = {sep, '\0'};
    int count = 0;
    for (const char *p = text;; p++) {
        size_t n = strcspn(p, seps);
        long x = -1;
        for (int i = 0; choices && choices[i]; i++)
            if (strlen(choices[i]) == n && strncasecmp(p, choices[i], n) == 0)
                x = i;
        if (x < 0) {
            char *end;
            errno = 0;
            x = strtol(p, &end, 10);
            if (n == 0 || end != p + n || errno || x < min || x > max)
                return -1;
        }
        if (count == max_count)
            return -1;
        v[count++] = (int)x;
        p += n;
        if (*p == '\0')
            return count;
    }
}

void ct_check_only_options(ct_check_only *c, ct_opt table[CT_CHECK_ONLY_NOPTS])
{
    const ct_opt t[CT_CHECK_ONLY_NOPTS] = {
        {"--check-only", CT_OPT_FLAG, .dest = &c->on},
        {"--np", CT_OPT_INT, .dest = &c->np, .min = 1, .max = INT_MAX},
        {.type = CT_OPT_END},
    };
    memcpy(table, t, sizeof t);
}

int ct_check_only_validate(const ct_check_only *c, const char *prog, char *err, size_t errlen)
{
    if (c->on == (c->np > 0))
        return 0;
    snprintf(err, errlen, "%s: %s", prog,
             c->on ? "--check-only needs --np N, the number of ranks the run will have"
                   : "--np: only with --check-only (a run has the ranks the launcher gives it)");
    return -1;
}

int ct_check_only_exit(const char *problem)
{
    if (!problem)
        return 0;
    fprintf(stderr, "%s\n", problem);
    return CT_EXIT_USAGE;
}
