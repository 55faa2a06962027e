/* lp_dat.c - HPL.dat reader.
 *
 * Reads the file the way xhpl does, so a file that works with HPL works here and means
 * the same thing:
 *   - each line's value is its first whitespace-separated token converted with atoi /
 *     atof, so trailing comments are free text and a token such as "5=LnM)" reads as 5;
 *   - a list line is read token after token where, after each token, the read position
 *     advances by the token's length plus one character (not past the following blanks),
 *     so with several blanks between values a value can be read twice. Whenever that
 *     gives a different list than a plain whitespace split, a warning names the line;
 *   - an out-of-range value HPL rejects (N < 0, NB < 1, P or Q < 1, NBMIN < 1,
 *     NDIV < 2, DEPTH < 0, a list count outside 1..20) and a list line with fewer values
 *     than its count (HPL would read stale memory there) are errors naming file and line.
 * Two layouts exist: HPL 2.x has a PMAP line (line 9) that HPL 1.x lacks. The layout is
 * detected from line 9's text ("PMAP"/"mapping" -> 2.x, "grids" -> 1.x; else 2.x) unless
 * forced. Both files printed in seeds/000 figures 11-12 are 1.x files. */
#define _POSIX_C_SOURCE 200809L
#include "lp.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LINE_MAX_LEN 1024

typedef struct {
    FILE *f;
    const char *path;
    int lineno;
    char line[LINE_MAX_LEN];
    char *err;
    size_t errlen;
    lp_params *prm;
} reader;

static void warn(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(reader *r, const char *fmt, ...)
{
    if (r->prm->nwarn >= LP_MAX_WARN)
        return;
    char *w = r->prm->warn[r->prm->nwarn++];
    int used = snprintf(w, 256, "%s:%d: ", r->path, r->lineno);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w + used, (size_t)(256 - used), fmt, ap);
    va_end(ap);
}

static int fail(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(reader *r, const char *fmt, ...)
{
    int used = snprintf(r->err, r->errlen, "%s:%d: ", r->path, r->lineno);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + used, r->errlen - (size_t)used, fmt, ap);
    va_end(ap);
    return -1;
}

/* Label words that the comment of each line normally contains; a line without its word
 * is still read (HPL ignores comments) but flagged, since it usually means the file is
 * shifted by a missing or an extra line. */
static const struct {
    const char *what, *word;
} labels[] = {
    {"number of problem sizes", "problem"}, {"Ns", "ns"}, {"number of NBs", "nbs"},
    {"NBs", "nbs"}, {"PMAP", "pmap"}, {"number of process grids", "grid"}, {"Ps", "ps"},
    {"Qs", "qs"}, {"threshold", "threshold"}, {"number of panel factorisations", "panel fact"},
    {"PFACTs", "pfact"}, {"number of recursive stopping criteria", "stopping"},
    {"NBMINs", "nbmin"}, {"number of panels in recursion", "recursion"}, {"NDIVs", "ndiv"},
    {"number of recursive panel factorisations", "recursive panel"}, {"RFACTs", "rfact"},
    {"number of broadcasts", "broadcast"}, {"BCASTs", "bcast"},
    {"number of look-ahead depths", "lookahead"}, {"DEPTHs", "depth"}, {"SWAP", "swap"},
    {"swapping threshold", "threshold"}, {"L1 form", "l1"}, {"U form", "u "},
    {"equilibration", "equilibration"}, {"memory alignment", "alignment"},
};

static void check_label(reader *r, const char *what)
{
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++) {
        if (strcmp(labels[i].what, what))
            continue;
        char lower[LINE_MAX_LEN];
        size_t n = 0;
        for (; r->line[n] && n < sizeof lower - 1; n++)
            lower[n] = (char)tolower((unsigned char)r->line[n]);
        lower[n] = '\0';
        if (!strstr(lower, labels[i].word)) {
            char shown[64];
            snprintf(shown, sizeof shown, "%.*s", (int)strcspn(r->line, "\r\n"), r->line);
            warn(r, "read as %s, but the line reads '%s': is the file shifted by a line?",
                 what, shown);
        }
        return;
    }
}

static int next_line(reader *r, const char *what)
{
    r->lineno++;
    if (!fgets(r->line, sizeof r->line, r->f))
        return fail(r, "unexpected end of file, expected %s", what);
    check_label(r, what);
    return 0;
}

static int is_integer(const char *t)
{
    if (*t == '+' || *t == '-')
        t++;
    if (!isdigit((unsigned char)*t))
        return 0;
    while (isdigit((unsigned char)*t))
        t++;
    return *t == '\0';
}

/* atoi with a warning when the token is not a plain integer. */
static int token_int(reader *r, const char *tok, const char *what)
{
    int v = atoi(tok);
    if (!is_integer(tok))
        warn(r, "%s token '%s' is not a plain integer; read as %d (as HPL's atoi does)", what,
             tok, v);
    return v;
}

static int first_token(reader *r, const char *what, char *tok)
{
    if (next_line(r, what))
        return -1;
    if (sscanf(r->line, "%255s", tok) != 1)
        return fail(r, "empty line, expected %s", what);
    return 0;
}

static int read_int(reader *r, const char *what, int *v)
{
    char tok[256];
    if (first_token(r, what, tok))
        return -1;
    *v = token_int(r, tok, what);
    return 0;
}

static int read_count(reader *r, const char *what, int *count)
{
    if (read_int(r, what, count))
        return -1;
    if (*count < 1 || *count > LP_MAX_PARAM)
        return fail(r, "%s is %d, must be between 1 and %d", what, *count, LP_MAX_PARAM);
    return 0;
}

/* A list line of l->count values, read as xhpl reads it (see the file comment). */
static int read_list(reader *r, const char *what, lp_list *l)
{
    int count = l->count, *vals = l->v;
    if (next_line(r, what))
        return -1;
    const char *p = r->line;
    const char *end = r->line + strlen(r->line);
    char tok[256];
    int differs = 0, plain = 0;
    char copy[LINE_MAX_LEN];
    memcpy(copy, r->line, sizeof copy);
    char *save = NULL;
    int plain_vals[LP_MAX_PARAM];
    for (char *t = strtok_r(copy, " \t\r\n", &save); t && plain < count;
         t = strtok_r(NULL, " \t\r\n", &save))
        plain_vals[plain++] = atoi(t);
    for (int i = 0; i < count; i++) {
        if (p > end || sscanf(p, "%255s", tok) != 1)
            return fail(r, "%s: %d value%s expected, only %d found", what, count,
                        count > 1 ? "s" : "", i);
        p += strlen(tok) + 1;
        vals[i] = atoi(tok);
        if (!is_integer(tok))
            warn(r, "%s value %d token '%s' is not a plain integer; read as %d", what, i + 1,
                 tok, vals[i]);
        if (i >= plain || plain_vals[i] != vals[i])
            differs = 1;
    }
    if (differs) {
        char got[160] = "";
        for (int i = 0, used = 0; i < count && used < 150; i++)
            used += snprintf(got + used, sizeof got - (size_t)used, "%s%d", i ? " " : "", vals[i]);
        warn(r, "%s read as [%s] by HPL's tokenizer (it steps one character past each "
                "value); separate values by single blanks to avoid surprises",
             what, got);
    }
    return 0;
}

/* A count line, then its list line. */
static int read_counted(reader *r, const char *count_what, const char *what, lp_list *l)
{
    return read_count(r, count_what, &l->count) || read_list(r, what, l) ? -1 : 0;
}

static int read_fact_list(reader *r, const char *count_what, const char *what, lp_list *l)
{
    if (read_counted(r, count_what, what, l))
        return -1;
    for (int i = 0; i < l->count; i++)
        if (l->v[i] < 0 || l->v[i] > 2) {
            warn(r, "%s value %d is not 0, 1 or 2; HPL uses Right (2)", what, l->v[i]);
            l->v[i] = LP_RIGHT;
        }
    return 0;
}

static int check_min(reader *r, const char *what, const lp_list *l, int lo)
{
    for (int i = 0; i < l->count; i++)
        if (l->v[i] < lo)
            return fail(r, "value of %s is %d, must be at least %d", what, l->v[i], lo);
    return 0;
}

void lp_params_defaults(lp_params *prm)
{
    memset(prm, 0, sizeof *prm);
    prm->n = (lp_list){1, {1000}};
    prm->nb = (lp_list){1, {192}};
    prm->p = prm->q = (lp_list){1, {1}};
    snprintf(prm->pq_from, sizeof prm->pq_from, "-P/-Q");
    prm->threshold = 16.0;
    prm->pfact = (lp_list){1, {LP_RIGHT}};
    prm->nbmin = (lp_list){1, {4}};
    prm->ndiv = (lp_list){1, {2}};
    prm->rfact = (lp_list){1, {LP_CROUT}};
    prm->bcast = (lp_list){1, {LP_1RINGM}};
    prm->depth = (lp_list){1, {1}};
    prm->swap = LP_SWAP_MIX;
    prm->swap_threshold = 64;
    prm->equil = 1;
    prm->align = 8;
    prm->device = 7;
    prm->format = 2;
    snprintf(prm->out_name, sizeof prm->out_name, "HPL.out");
}

int lp_dat_read(const char *path, int format, lp_params *prm, char *err, size_t errlen)
{
    reader rd = {.path = path, .err = err, .errlen = errlen, .prm = prm};
    reader *r = &rd;
    lp_params_defaults(prm);
    r->f = fopen(path, "r");
    if (!r->f) {
        snprintf(err, errlen, "%s: cannot open", path);
        return -1;
    }
    char tok[256];
    int rc = -1;
    if (next_line(r, "title line 1") || next_line(r, "title line 2"))
        goto out;
    if (first_token(r, "output file name", tok))
        goto out;
    snprintf(prm->out_name, sizeof prm->out_name, "%s", tok);
    if (read_int(r, "device out", &prm->device))
        goto out;
    if (read_counted(r, "number of problem sizes", "Ns", &prm->n) ||
        check_min(r, "N", &prm->n, 0))
        goto out;
    if (read_counted(r, "number of NBs", "NBs", &prm->nb) || check_min(r, "NB", &prm->nb, 1))
        goto out;
    if (next_line(r, "PMAP or number of process grids"))
        goto out;
    if (format == 0) {
        char lower[LINE_MAX_LEN];
        size_t i = 0;
        for (; r->line[i] && i < sizeof lower - 1; i++)
            lower[i] = (char)tolower((unsigned char)r->line[i]);
        lower[i] = '\0';
        format = (strstr(lower, "pmap") || strstr(lower, "mapping")) ? 2
                 : strstr(lower, "grid")                             ? 1
                                                                     : 2;
        if (format == 1)
            warn(r, "HPL 1.x layout (no PMAP line): this line is the number of process "
                    "grids; row-major process mapping");
    }
    prm->format = format;
    if (sscanf(r->line, "%255s", tok) != 1) {
        fail(r, "empty line, expected %s", format == 2 ? "PMAP" : "number of process grids");
        goto out;
    }
    if (format == 2) {
        prm->colmajor = token_int(r, tok, "PMAP") == 1;
        if (read_count(r, "number of process grids", &prm->p.count))
            goto out;
    } else {
        prm->p.count = token_int(r, tok, "number of process grids");
        if (prm->p.count < 1 || prm->p.count > LP_MAX_PARAM) {
            fail(r, "number of process grids is %d, must be between 1 and %d", prm->p.count,
                 LP_MAX_PARAM);
            goto out;
        }
    }
    prm->q.count = prm->p.count;
    if (read_list(r, "Ps", &prm->p) || check_min(r, "P", &prm->p, 1) ||
        read_list(r, "Qs", &prm->q) || check_min(r, "Q", &prm->q, 1))
        goto out;
    snprintf(prm->pq_from, sizeof prm->pq_from, "%s:%d-%d", path, r->lineno - 1, r->lineno);
    if (first_token(r, "threshold", tok))
        goto out;
    prm->threshold = atof(tok);
    if (read_fact_list(r, "number of panel factorisations", "PFACTs", &prm->pfact))
        goto out;
    if (read_counted(r, "number of recursive stopping criteria", "NBMINs", &prm->nbmin) ||
        check_min(r, "NBMIN", &prm->nbmin, 1))
        goto out;
    if (read_counted(r, "number of panels in recursion", "NDIVs", &prm->ndiv) ||
        check_min(r, "NDIV", &prm->ndiv, 2))
        goto out;
    if (read_fact_list(r, "number of recursive panel factorisations", "RFACTs", &prm->rfact))
        goto out;
    if (read_counted(r, "number of broadcasts", "BCASTs", &prm->bcast))
        goto out;
    for (int i = 0; i < prm->bcast.count; i++)
        if (prm->bcast.v[i] < 0 || prm->bcast.v[i] > 5) {
            warn(r, "BCAST value %d is not 0..5; HPL uses 1ringM (1)", prm->bcast.v[i]);
            prm->bcast.v[i] = LP_1RINGM;
        }
    if (read_counted(r, "number of look-ahead depths", "DEPTHs", &prm->depth) ||
        check_min(r, "DEPTH", &prm->depth, 0))
        goto out;
    if (read_int(r, "SWAP", &prm->swap))
        goto out;
    if (prm->swap < 0 || prm->swap > 2) {
        warn(r, "SWAP value %d is not 0..2; HPL uses long (1)", prm->swap);
        prm->swap = LP_SWAP_LONG;
    }
    if (read_int(r, "swapping threshold", &prm->swap_threshold))
        goto out;
    if (prm->swap_threshold < 0)
        prm->swap_threshold = 0;
    if (read_int(r, "L1 form", &prm->l1_notrans) || read_int(r, "U form", &prm->u_notrans) ||
        read_int(r, "equilibration", &prm->equil) || read_int(r, "memory alignment", &prm->align))
        goto out;
    if (prm->l1_notrans != 0 && prm->l1_notrans != 1)
        prm->l1_notrans = 0;
    if (prm->u_notrans != 0 && prm->u_notrans != 1)
        prm->u_notrans = 0;
    if (prm->equil != 0 && prm->equil != 1)
        prm->equil = 1;
    if (prm->align <= 0)
        prm->align = 4;
    rc = 0;
out:
    fclose(r->f);
    return rc;
}

int lp_opt_list(const ct_opt *opt, const char *text, char *expected, size_t len)
{
    lp_list l = {0};
    l.count = ct_parse_int_list(text, ',', opt->choices, (long)opt->min, (long)opt->max, l.v,
                                LP_MAX_PARAM);
    if (l.count >= 0) {
        *(lp_list *)opt->dest = l;
        return 0;
    }
    snprintf(expected, len, "a comma-separated list of up to %d ", LP_MAX_PARAM);
    for (int i = 0; opt->choices && opt->choices[i]; i++) /* "of L, C, R or integers ..." */
        snprintf(expected + strlen(expected), len - strlen(expected), "%s%s%s", i ? "" : "of ",
                 opt->choices[i], opt->choices[i + 1] ? ", " : " or ");
    if (opt->max >= INT_MAX)
        snprintf(expected + strlen(expected), len - strlen(expected), "integers >= %.0f",
                 opt->min);
    else
        snprintf(expected + strlen(expected), len - strlen(expected),
                 "integers from %.0f to %.0f", opt->min, opt->max);
    return -1;
}
