/* ct_opt.h - the command-line parser of every kernel.
 *
 * A kernel describes its options in a table, one entry per flag or positional argument,
 * naming where the value goes and what it accepts; the parser does the rest, so every
 * kernel rejects bad input the same way: one message
 *     <kernel>: <flag>: expected <what it accepts>, got '<text>'
 * and exit status CT_EXIT_USAGE. A flag takes its value from the next argument, whatever
 * it looks like ("-N -5" gives -N the value "-5").
 */
#ifndef CT_OPT_H
#define CT_OPT_H

#include <stddef.h>

#define CT_EXIT_USAGE 2 /* exit status of a kernel given bad arguments */

typedef enum {
    CT_OPT_END,     /* ends a table */
    CT_OPT_FLAG,    /* int: set to 1; takes no value */
    CT_OPT_INT,     /* int in [min, max] */
    CT_OPT_LONG,    /* long in [min, max] */
    CT_OPT_BYTES,   /* uint64_t, K/M/G suffixes (ct_parse_bytes), at most max if max > 0 */
    CT_OPT_NUMBER,  /* double, any finite value */
    CT_OPT_SECONDS, /* double in (0, max] */
    CT_OPT_STRING,  /* const char *: the argument itself */
    CT_OPT_CHOICE,  /* int: index of the value in choices (NULL-terminated) */
    CT_OPT_CUSTOM,  /* parse() decides */
    CT_OPT_TABLE,   /* the entries of another table (e.g. the sweep's), at this place */
} ct_opt_type;

typedef struct ct_opt {
    const char *name; /* "--nb", "-N"; a name without a leading '-' is positional, in order */
    ct_opt_type type;
    void *dest;
    double min, max;
    const char *const *choices;
    /* CT_OPT_CUSTOM: stores the value at opt->dest and returns 0, or returns -1 after
     * writing what it expected ("a list of ...") into expected. */
    int (*parse)(const struct ct_opt *opt, const char *text, char *expected, size_t len);
    const struct ct_opt *table; /* CT_OPT_TABLE */
    int *seen;                  /* optional: set to 1 when the option is given */
} ct_opt;

/* Parses argv[1..argc-1] against the table. Every argument is looked at, so flags after
 * a bad one (--help, --check-only) still take effect; the first error is the one
 * reported. Returns 0, or -1 with "<kernel>: ..." (one line) in err. */
int ct_opt_parse(const ct_opt *table, int argc, char **argv, char *err, size_t errlen);

/* The one parser of integer lists ("4000,8000", "8x8x8x16"): items separated by sep, each
 * an integer in [min, max] or one of choices (any case; choices may be NULL), which stands
 * for its index. Writes the values to v; returns how many, or -1 when the text is empty,
 * an item is empty ("1,,2", "1,"), malformed or out of range, or there are more than
 * max_count. For a CT_OPT_CUSTOM parser, which says what it expected in its own words. */
int ct_parse_int_list(const char *text, char sep, const char *const *choices, long min, long max,
                      int *v, int max_count);

/* --check-only --np N, for kernels that the launcher asks, before it starts MPI, whether
 * a run with these arguments on N ranks could go ahead. Such a kernel parses and checks
 * its arguments exactly as a run would, without MPI_Init, and ends with
 * ct_check_only_exit. */
typedef struct {
    int on, np;
} ct_check_only;
#define CT_CHECK_ONLY_NOPTS 3 /* entries, the end marker included */
void ct_check_only_options(ct_check_only *c, ct_opt table[CT_CHECK_ONLY_NOPTS]);
/* After parsing: -1 with "<kernel>: ..." in err when one flag comes without the other. */
int ct_check_only_validate(const ct_check_only *c, const char *prog, char *err, size_t errlen);
/* Prints problem (NULL: none) as the one line on stderr; returns the exit status, 0 or
 * CT_EXIT_USAGE. */
int ct_check_only_exit(const char *problem);

#endif
