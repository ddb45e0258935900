/* ibrepro-bench: what every benchmark program shares (options, time, messages, output header).
 *
 * Output contract (read by src/ibrepro/parsers/bench.py):
 *   # ibrepro-bench <benchmark> <version>      first line
 *   # <key>: <value>                            run parameters
 *   # table: <name>                             one per table, followed by
 *   <column> <column>[unit] ...                 a header line, then one row per message size
 *   # done                                      only when the run completed
 * Failures go to stderr as "<program>: <kind>: <detail>" with <kind> one of
 *   invalid option | invalid rank count | no RDMA device found | timeout | error
 * and the exit codes below. */
#ifndef IBREPRO_BENCH_H
#define IBREPRO_BENCH_H

#include <stddef.h>
#include <stdio.h>

#ifndef BENCH_VERSION
#define BENCH_VERSION "unknown"
#endif

enum {
    EXIT_ERROR = 1,    /* runtime failure (verbs call, peer protocol, allocation) */
    EXIT_USAGE = 2,    /* invalid option or invalid rank count */
    EXIT_NODEV = 3,    /* no RDMA device found */
    EXIT_TIMEOUT = 4,  /* the peer never answered within --timeout */
};

/* Messages larger than this use the "large" iteration counts (as OSU does). */
#define LARGE_MESSAGE 8192

extern const char *bench_prog;       /* program name used in messages */
extern int bench_quiet;              /* set on MPI ranks other than 0: print nothing */
extern void (*bench_exit_hook)(int); /* called before exit() (MPI_Finalize) */

/* Print "<prog>: <kind>: <detail>" on stderr (unless quiet) and exit with code. */
void bench_die(int code, const char *kind, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
#define usage_error(...) bench_die(EXIT_USAGE, "invalid option", __VA_ARGS__)
#define fatal(...) bench_die(EXIT_ERROR, "error", __VA_ARGS__)

/* Option values. Each dies with "invalid option" naming the option on bad input. */
long parse_long(const char *opt, const char *s, long min, long max);
size_t parse_size(const char *opt, const char *s);  /* bytes, with optional K/M/G (2^10...) */
void parse_size_range(const char *opt, const char *s, size_t *min, size_t *max);
double parse_double(const char *opt, const char *s, double min, double max);

/* Message sizes of a sweep: 0 (if min is 0), then powers of two from max(min,1) to max. */
size_t first_size(size_t min);
size_t next_size(size_t size);

/* "--name" or "-c" of the option getopt_long just returned (longindex: -1 if short). */
struct option;
const char *option_name(int c, const struct option *longopts, int longindex);

double now_s(void);                          /* monotonic clock, seconds */
void utc_date(char *buf, size_t len);        /* 2026-01-02T03:04:05Z */

/* "# key: value" */
void print_kv(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void *xalloc(size_t size);                   /* page-aligned, zeroed; dies on failure */

#endif
