/* ct_sweep.c - message-size schedule, repeat adaptation and statistics (see ct_sweep.h). */
#define _POSIX_C_SOURCE 200809L
#include "ct_sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first timed call at an unknown size grows its repetitions until it lasts this long;
 * shorter intervals are dominated by clock and call overhead. */
#define CALIBRATION_TIME 1e-3
#define MAX_REPEATS 100000000L

const char ct_sweep_usage[] =
    "  --min-size BYTES        smallest message (default 1)\n"
    "  --max-size BYTES        largest message, K/M/G suffixes (default 8M)\n"
    "  --perturbation P        also measure base-P and base+P bytes (default 3, 0 = off)\n"
    "  --points-per-octave N   base sizes per doubling (default 2)\n"
    "  --trials N              timed trials per point (default 5; at least 3)\n"
    "  --point-time SECONDS    target time of one point's trials (default 0.1)\n"
    "  --inject-fault          tests only: one bit of the first trial's payload flips\n";

void ct_sweep_defaults(ct_sweep_opts *o)
{
    o->min_size = 1;
    o->max_size = 8u << 20;
    o->perturbation = 3;
    o->points_per_octave = 2;
    o->trials = 5;
    o->min_trials = 3;
    o->point_time = 0.1;
    o->max_size_given = 0;
    o->inject_fault = 0;
    o->help = 0;
}

int ct_sweep_validate(const ct_sweep_opts *o, uint64_t limit, const char *prog, char *err,
                      size_t errlen)
{
    if (o->max_size < 1 || o->max_size > limit)
        snprintf(err, errlen, "%s: --max-size: must be between 1 and %llu bytes, got %llu", prog,
                 (unsigned long long)limit, (unsigned long long)o->max_size);
    else if (o->min_size > o->max_size)
        snprintf(err, errlen, "%s: --min-size: %llu is larger than --max-size %llu", prog,
                 (unsigned long long)o->min_size, (unsigned long long)o->max_size);
    else if (o->perturbation > limit)
        snprintf(err, errlen, "%s: --perturbation: must be at most %llu bytes", prog,
                 (unsigned long long)limit);
    else
        return 0;
    return -1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

size_t ct_sweep_sizes(const ct_sweep_opts *o, uint64_t **sizes)
{
    /* at most 64 octaves, each with its base points and two perturbations, plus ends */
    size_t cap = (size_t)o->points_per_octave * 64 * 3 + 4, n = 0;
    uint64_t *s = malloc(cap * sizeof *s);
    if (!s)
        return 0;
    uint64_t p = o->perturbation;
    s[n++] = o->min_size;
    s[n++] = o->max_size;
    for (int k = 0; n + 3 <= cap; k++) {
        double x = round(pow(2.0, (double)k / o->points_per_octave));
        if (x > (double)o->max_size)
            break;
        uint64_t base = (uint64_t)x;
        if (base >= o->min_size)
            s[n++] = base;
        /* perturb only where base-P stays well clear of the neighbouring base points */
        if (p > 0 && base > 4 * p) {
            if (base - p >= o->min_size)
                s[n++] = base - p;
            if (base + p >= o->min_size && base + p <= o->max_size)
                s[n++] = base + p;
        }
    }
    qsort(s, n, sizeof *s, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || s[i] != s[m - 1])
            s[m++] = s[i];
    *sizes = s;
    return m;
}

int ct_sweep_measure(const ct_sweep_opts *o, const ct_sweep_transport *t, uint64_t size,
                     uint32_t seed, double *est_per_rep, uint64_t *est_size,
                     ct_sweep_point *out)
{
    double est = *est_per_rep, elapsed;
    if (est <= 0) {
        /* Unknown cost: grow the repetitions until one call is long enough to time. The
         * calls double as the warm-up (connection set-up, first touch of the buffers). */
        for (long r = 1;; r *= 8) {
            if (t->trial(t->ctx, size, r, seed, &elapsed) != 0)
                return -1;
            if (elapsed >= CALIBRATION_TIME || r >= MAX_REPEATS / 8) {
                est = elapsed / (double)r;
                break;
            }
        }
    } else if (size > *est_size && *est_size > 0) {
        /* Scaling linearly from a smaller size over-estimates (latency does not grow), so
         * a trial is at most one size step shorter than the target, never longer. */
        est *= (double)size / (double)*est_size;
    }
    if (!(est > 0))
        est = 1e-9;

    double per_trial = o->point_time / o->trials;
    long repeats = 1;
    int trials = o->trials;
    if (est < per_trial) {
        double r = per_trial / est;
        repeats = r > (double)MAX_REPEATS ? MAX_REPEATS : (long)r;
    } else {
        /* one repetition is already long: fewer trials, but never fewer than min_trials */
        double n = floor(o->point_time / est);
        trials = n < o->min_trials ? o->min_trials : (n > o->trials ? o->trials : (int)n);
    }

    double times[CT_SWEEP_MAX_TRIALS];
    long fewest = repeats;
    for (int i = 0; i < trials; i++) {
        if (t->trial(t->ctx, size, repeats, seed, &elapsed) != 0)
            return -1;
        times[i] = elapsed / ((double)repeats * t->messages_per_repeat);
        /* A shared machine can slow down by 100x within a point (a busy-polling neighbour
         * costs a scheduler tick per message): re-size the remaining trials from this one
         * so one point cannot run for minutes. */
        if (elapsed > 4 * per_trial && repeats > 1) {
            double r = per_trial / (elapsed / (double)repeats);
            repeats = r < 1 ? 1 : (long)r;
            fewest = repeats < fewest ? repeats : fewest;
        }
    }
    qsort(times, (size_t)trials, sizeof times[0], cmp_double);
    out->size = size;
    out->repeats = fewest;
    out->trials = trials;
    out->t_min = times[0];
    out->t_max = times[trials - 1];
    out->t_med = trials % 2 ? times[trials / 2]
                            : 0.5 * (times[trials / 2 - 1] + times[trials / 2]);
    *est_per_rep = out->t_med * t->messages_per_repeat;
    *est_size = size;
    return 0;
}

int ct_sweep_run(const ct_sweep_opts *o, const ct_sweep_transport *t,
                 void (*emit)(void *arg, const ct_sweep_point *p), void *arg)
{
    uint64_t *sizes;
    size_t n = ct_sweep_sizes(o, &sizes);
    if (n == 0) {
        ct_report_error("out of memory for the size schedule");
        return -1;
    }
    double est = 0;
    uint64_t est_size = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        ct_sweep_point p;
        rc = ct_sweep_measure(o, t, sizes[i], (uint32_t)(i + 1) * 2654435761u, &est,
                              &est_size, &p);
        if (rc == 0)
            emit(arg, &p);
    }
    free(sizes);
    return rc;
}

void ct_sweep_json_point(ct_json *j, const ct_sweep_point *p)
{
    ct_json_integer(j, "size", (long long)p->size);
    ct_json_integer(j, "repeats", p->repeats);
    ct_json_integer(j, "trials", p->trials);
    ct_json_number(j, "t_min_s", p->t_min);
    ct_json_number(j, "t_med_s", p->t_med);
    ct_json_number(j, "t_max_s", p->t_max);
}

void ct_sweep_emit_sample(void *unused, const ct_sweep_point *p)
{
    (void)unused;
    ct_json j;
    ct_json_start(&j, stdout, "sample");
    ct_sweep_json_point(&j, p);
    ct_json_end(&j);
}

static inline unsigned char pattern_byte(uint64_t i, uint32_t seed)
{
    return (unsigned char)(seed + (uint32_t)i + (uint32_t)(i >> 8) * 7u + (uint32_t)(i >> 16));
}

void ct_pattern_fill(unsigned char *buf, uint64_t size, uint32_t seed)
{
    for (uint64_t i = 0; i < size; i++)
        buf[i] = pattern_byte(i, seed);
}

int ct_pattern_check(const unsigned char *buf, uint64_t size, uint32_t seed)
{
    unsigned char bad = 0;
    for (uint64_t i = 0; i < size; i++)
        bad |= (unsigned char)(buf[i] ^ pattern_byte(i, seed));
    return bad == 0;
}

void ct_pattern_corrupt_once(unsigned char *buf, uint64_t size, int *armed)
{
    if (*armed && size > 0) {
        buf[size - 1] ^= 1;
        *armed = 0;
    }
}

void ct_sweep_options(ct_sweep_opts *o, ct_opt table[CT_SWEEP_NOPTS])
{
    const ct_opt t[CT_SWEEP_NOPTS] = {
        {"--min-size", CT_OPT_BYTES, .dest = &o->min_size},
        {"--max-size", CT_OPT_BYTES, .dest = &o->max_size, .seen = &o->max_size_given},
        {"--perturbation", CT_OPT_BYTES, .dest = &o->perturbation},
        {"--trials", CT_OPT_INT, .dest = &o->trials, .min = o->min_trials,
         .max = CT_SWEEP_MAX_TRIALS},
        {"--points-per-octave", CT_OPT_INT, .dest = &o->points_per_octave, .min = 1, .max = 64},
        {"--point-time", CT_OPT_SECONDS, .dest = &o->point_time, .max = 3600},
        {"--inject-fault", CT_OPT_FLAG, .dest = &o->inject_fault},
        {"--help", CT_OPT_FLAG, .dest = &o->help},
        {.type = CT_OPT_END},
    };
    memcpy(table, t, sizeof t);
}
