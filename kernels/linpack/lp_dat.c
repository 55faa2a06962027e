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

/* A list line, read as xhpl reads it (see the file comment). */
static int read_list(reader *r, const char *what, int count, int *vals)
{
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

static int read_fact_list(reader *r, const char *what, int count, int *vals)
{
    if (read_list(r, what, count, vals))
        return -1;
    for (int i = 0; i < count; i++)
        if (vals[i] < 0 || vals[i] > 2) {
            warn(r, "%s value %d is not 0, 1 or 2; HPL uses Right (2)", what, vals[i]);
            vals[i] = LP_RIGHT;
        }
    return 0;
}

static int check_min(reader *r, const char *what, int count, const int *vals, int lo)
{
    for (int i = 0; i < count; i++)
        if (vals[i] < lo)
            return fail(r, "value of %s is %d, must be at least %d", what, vals[i], lo);
    return 0;
}

void lp_params_defaults(lp_params *prm)
{
    memset(prm, 0, sizeof *prm);
    prm->nn = 1;
    prm->n[0] = 1000;
    prm->nnb = 1;
    prm->nb[0] = 192;
    prm->npq = 1;
    prm->p[0] = prm->q[0] = 1;
    prm->threshold = 16.0;
    prm->npfact = 1;
    prm->pfact[0] = LP_RIGHT;
    prm->nnbmin = 1;
    prm->nbmin[0] = 4;
    prm->nndiv = 1;
    prm->ndiv[0] = 2;
    prm->nrfact = 1;
    prm->rfact[0] = LP_CROUT;
    prm->nbcast = 1;
    prm->bcast[0] = LP_1RINGM;
    prm->ndepth = 1;
    prm->depth[0] = 1;
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
    if (read_count(r, "number of problem sizes", &prm->nn) ||
        read_list(r, "Ns", prm->nn, prm->n) || check_min(r, "N", prm->nn, prm->n, 0))
        goto out;
    if (read_count(r, "number of NBs", &prm->nnb) || read_list(r, "NBs", prm->nnb, prm->nb) ||
        check_min(r, "NB", prm->nnb, prm->nb, 1))
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
        if (read_count(r, "number of process grids", &prm->npq))
            goto out;
    } else {
        prm->npq = token_int(r, tok, "number of process grids");
        if (prm->npq < 1 || prm->npq > LP_MAX_PARAM) {
            fail(r, "number of process grids is %d, must be between 1 and %d", prm->npq,
                 LP_MAX_PARAM);
            goto out;
        }
    }
    if (read_list(r, "Ps", prm->npq, prm->p) || check_min(r, "P", prm->npq, prm->p, 1) ||
        read_list(r, "Qs", prm->npq, prm->q) || check_min(r, "Q", prm->npq, prm->q, 1))
        goto out;
    if (first_token(r, "threshold", tok))
        goto out;
    prm->threshold = atof(tok);
    if (read_count(r, "number of panel factorisations", &prm->npfact) ||
        read_fact_list(r, "PFACTs", prm->npfact, prm->pfact))
        goto out;
    if (read_count(r, "number of recursive stopping criteria", &prm->nnbmin) ||
        read_list(r, "NBMINs", prm->nnbmin, prm->nbmin) ||
        check_min(r, "NBMIN", prm->nnbmin, prm->nbmin, 1))
        goto out;
    if (read_count(r, "number of panels in recursion", &prm->nndiv) ||
        read_list(r, "NDIVs", prm->nndiv, prm->ndiv) ||
        check_min(r, "NDIV", prm->nndiv, prm->ndiv, 2))
        goto out;
    if (read_count(r, "number of recursive panel factorisations", &prm->nrfact) ||
        read_fact_list(r, "RFACTs", prm->nrfact, prm->rfact))
        goto out;
    if (read_count(r, "number of broadcasts", &prm->nbcast) ||
        read_list(r, "BCASTs", prm->nbcast, prm->bcast))
        goto out;
    for (int i = 0; i < prm->nbcast; i++)
        if (prm->bcast[i] < 0 || prm->bcast[i] > 5) {
            warn(r, "BCAST value %d is not 0..5; HPL uses 1ringM (1)", prm->bcast[i]);
            prm->bcast[i] = LP_1RINGM;
        }
    if (read_count(r, "number of look-ahead depths", &prm->ndepth) ||
        read_list(r, "DEPTHs", prm->ndepth, prm->depth) ||
        check_min(r, "DEPTH", prm->ndepth, prm->depth, 0))
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

int lp_parse_list(const char *text, int letters, int *vals, int *count, char *err, size_t errlen)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        if (n >= LP_MAX_PARAM) {
            snprintf(err, errlen, "'%s': more than %d values", text, LP_MAX_PARAM);
            return -1;
        }
        char *end;
        if (letters && strchr("LlCcRr", *p) && (p[1] == ',' || p[1] == '\0')) {
            vals[n++] = (*p == 'L' || *p == 'l') ? LP_LEFT : (*p == 'C' || *p == 'c') ? LP_CROUT
                                                                                      : LP_RIGHT;
            end = (char *)p + 1;
        } else {
            long v = strtol(p, &end, 10);
            if (end == p || (*end != ',' && *end != '\0')) {
                snprintf(err, errlen, "'%s': not a comma-separated list of %s", text,
                         letters ? "L, C, R or 0..2" : "integers");
                return -1;
            }
            vals[n++] = (int)v;
        }
        p = *end == ',' ? end + 1 : end;
    }
    if (n == 0) {
        snprintf(err, errlen, "empty list");
        return -1;
    }
    *count = n;
    return 0;
}
