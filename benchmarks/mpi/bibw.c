/* ibrepro_bibw: bi-directional MPI bandwidth with a window of W messages (002 Sec. 3.3, Fig. 5).
 *
 * Each iteration both ranks post W MPI_Irecv and W MPI_Isend back-to-back, then wait for all
 * 2W (the bandwidth test of 002 Sec. 3.1 run in both directions at once; W = 16 as in 002).
 * bw = 2 * size * W * iterations / time: the aggregate of both directions, in MB/s = 10^6 B/s
 * (002 prints 2^20). Reported from rank 0's clock after a barrier. */
#include "mpi_common.h"

#include <stdlib.h>

static long window = 16;

static void help(void)
{
    printf("Usage: mpiexec -n 2 %s [options]\n\n"
           "Bi-directional MPI bandwidth (paper 002 Sec. 3.3): both ranks post W Irecv and W\n"
           "Isend, then Waitall; bw = aggregate of both directions in MB/s (10^6 B/s).\n"
           "Needs exactly 2 processes; placement comes from the launcher.\n\n"
           "  -W, --window W               messages in flight per direction (default 16)\n",
           bench_prog);
}

static int option(int c, const char *name, const char *arg)
{
    if (c != 'W')
        return 0;
    window = parse_long(name, arg, 1, 65536);
    return 1;
}

int main(int argc, char **argv)
{
    struct common_opts co = {.min_size = 1, .max_size = 4194304, .iters = 100, .warmup = 10,
                              .same_counts = 1};
    static const struct option longopts[] = {
        COMMON_LONG, {"window", required_argument, 0, 'W'}, {0, 0, 0, 0}};

    mpi_bench_init(&argc, &argv);
    parse_options(argc, argv, COMMON_SHORT "W:", longopts, &co, option, help);
    require_ranks(2);

    char *sbuf = xalloc(co.max_size), *rbuf = xalloc(co.max_size);
    MPI_Request *req = malloc(2 * (size_t)window * sizeof *req);
    if (!req)
        fatal("out of memory");

    print_header("bibw", "bi-directional bandwidth: both ranks post W Irecv + W Isend, then "
                 "Waitall; bw is the sum of both directions (002 Sec. 3.3)", &co, 1);
    if (rank == 0)
        print_kv("window", "%ld", window);
    if (rank == 0)
        print_kv("units", "MB/s = 10^6 B/s and msg/s, both directions summed");
    print_table("bibw", "bytes bw[MB/s] msgrate[msg/s]");

    for (size_t size = first_size(co.min_size); size <= co.max_size; size = next_size(size)) {
        long n = iterations_for(&co, size), skip = warmup_for(&co, size);
        int peer = 1 - rank;
        double t0 = 0;
        for (long i = 0; i < skip + n; i++) {
            if (i == skip) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            for (long w = 0; w < window; w++)
                MPI_Irecv(rbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &req[w]);
            for (long w = 0; w < window; w++)
                MPI_Isend(sbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &req[window + w]);
            MPI_Waitall((int)(2 * window), req, MPI_STATUSES_IGNORE);
        }
        double t = MPI_Wtime() - t0;
        if (rank == 0) {
            double msgs = 2.0 * (double)window * (double)n;
            printf("%-10zu %12.3f %14.0f\n", size, msgs * (double)size / t / 1e6, msgs / t);
            fflush(stdout);
        }
    }

    free(req);
    free(sbuf);
    free(rbuf);
    finish();
    return 0;
}
