#include "bench.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *bench_prog = "ibrepro-bench";
int bench_quiet = 0;
void (*bench_exit_hook)(int) = NULL;

void bench_die(int code, const char *kind, const char *fmt, ...)
{
    if (!bench_quiet) {
        va_list ap;
        fflush(stdout);
        fprintf(stderr, "%s: %s: ", bench_prog, kind);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        if (code == EXIT_USAGE && strcmp(kind, "invalid option") == 0)
            fprintf(stderr, " (see %s --help)", bench_prog);
        fputc('\n', stderr);
    }
    if (bench_exit_hook)
        bench_exit_hook(code);
    exit(code);
}

long parse_long(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        usage_error("%s needs an integer, got '%s'", opt, s);
    if (v < min || v > max)
        usage_error("%s must be between %ld and %ld, got %ld", opt, min, max, v);
    return v;
}

double parse_double(const char *opt, const char *s, double min, double max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        usage_error("%s needs a number, got '%s'", opt, s);
    if (!(v >= min && v <= max))
        usage_error("%s must be between %g and %g, got %g", opt, min, max, v);
    return v;
}

size_t parse_size(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        usage_error("%s needs a size in bytes (e.g. 8192, 64K, 4M), got '%s'", opt, s);
    unsigned shift = 0;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        default: usage_error("%s: unknown size suffix in '%s' (use K, M or G)", opt, s);
        }
        if (end[1])
            usage_error("%s: trailing characters in '%s'", opt, s);
    }
    if (v > (1ULL << 30) >> shift)
        usage_error("%s must be at most 1G, got '%s'", opt, s);
    return (size_t)(v << shift);
}

void parse_size_range(const char *opt, const char *s, size_t *min, size_t *max)
{
    const char *colon = strchr(s, ':');
    if (!colon)
        usage_error("%s needs MIN:MAX (e.g. 0:4M), got '%s'", opt, s);
    char lo[64];
    size_t n = (size_t)(colon - s);
    if (n == 0 || n >= sizeof lo)
        usage_error("%s needs MIN:MAX (e.g. 0:4M), got '%s'", opt, s);
    memcpy(lo, s, n);
    lo[n] = '\0';
    *min = parse_size(opt, lo);
    *max = parse_size(opt, colon + 1);
    if (*min > *max)
        usage_error("%s: MIN (%zu) is larger than MAX (%zu)", opt, *min, *max);
}

size_t first_size(size_t min)
{
    if (min == 0)
        return 0;
    size_t s = 1;
    while (s < min)
        s <<= 1;
    return s;
}

size_t next_size(size_t size)
{
    return size == 0 ? 1 : size << 1;
}

const char *option_name(int c, const struct option *longopts, int longindex)
{
    static char name[64];
    if (longindex >= 0)
        snprintf(name, sizeof name, "--%s", longopts[longindex].name);
    else
        snprintf(name, sizeof name, "-%c", c);
    return name;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void utc_date(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void print_kv(const char *key, const char *fmt, ...)
{
    va_list ap;
    printf("# %s: ", key);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

void *xalloc(size_t size)
{
    void *p = NULL;
    long page = sysconf(_SC_PAGESIZE);
    if (posix_memalign(&p, (size_t)page, size ? size : 1))
        fatal("cannot allocate %zu bytes", size);
    memset(p, 0, size);
    return p;
}
