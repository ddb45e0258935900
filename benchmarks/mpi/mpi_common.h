/* What the MPI benchmarks share: start-up, rank checks, the output header, option handling. */
#ifndef IBREPRO_MPI_COMMON_H
#define IBREPRO_MPI_COMMON_H

#include <getopt.h>
#include <mpi.h>

#include "../common/algo.h"
#include "../common/bench.h"

extern int rank, nranks;

/* Options every MPI benchmark takes. Defaults are set by each program before parsing. */
struct common_opts {
    size_t min_size, max_size;
    long iters, warmup;              /* messages up to LARGE_MESSAGE bytes */
    long iters_large, warmup_large;  /* larger messages */
    int same_counts;                 /* bandwidth tests: -I/-X follow -i/-x unless given */
};

#define COMMON_SHORT "m:i:x:I:X:hV"
#define COMMON_LONG                                      \
    {"sizes", required_argument, 0, 'm'},                \
    {"iterations", required_argument, 0, 'i'},           \
    {"warmup", required_argument, 0, 'x'},               \
    {"iterations-large", required_argument, 0, 'I'},     \
    {"warmup-large", required_argument, 0, 'X'},         \
    {"help", no_argument, 0, 'h'},                       \
    {"version", no_argument, 0, 'V'}

/* MPI_Init, rank and size, program name; messages only from rank 0. */
void mpi_bench_init(int *argc, char ***argv);
/* Parse argv with the program's options; returns each option the common set does not know
 * through handle(). help() prints the program's own usage (the common part follows). */
void parse_options(int argc, char **argv, const char *shortopts, const struct option *longopts,
                   struct common_opts *co, int (*handle)(int c, const char *name, const char *arg),
                   void (*help)(void));
/* Dies with "invalid rank count" unless exactly n processes run. */
void require_ranks(int n);
/* The header: banner, description, MPI library, ranks, hosts, placement, date, common options
 * (collective: every rank calls it). */
void print_header(const char *benchmark, const char *description, const struct common_opts *co,
                  int show_iterations);
void print_table(const char *name, const char *columns);
void finish(void);  /* "# done", MPI_Finalize */

long iterations_for(const struct common_opts *co, size_t size);
long warmup_for(const struct common_opts *co, size_t size);
/* Time of one now_s() call, subtracted from short intervals. */
double timer_cost_s(void);

#endif
