/* ibrepro_bilat: bi-directional MPI latency (paper 002 Sec. 3.3, Fig. 4).
 *
 * "The tests are carried out in a way similar to the uni-directional ones. The difference is
 * that both sides send data simultaneously." Each iteration both ranks post MPI_Irecv and
 * MPI_Isend to each other and wait for both; lat is the time per iteration (one message each
 * way at the same time), comparable with the uni-directional ping-pong latency (round trip / 2).
 * Reported from rank 0's clock; the ranks are synchronised by a barrier before timing. */
#include "mpi_common.h"

#include <stdlib.h>

static void help(void)
{
    printf("Usage: mpiexec -n 2 %s [options]\n\n"
           "Bi-directional MPI latency (paper 002 Sec. 3.3): both ranks Isend and Irecv at the\n"
           "same time, then Waitall; lat = time per exchange in microseconds. Needs exactly 2\n"
           "processes; placement comes from the launcher.\n", bench_prog);
}

int main(int argc, char **argv)
{
    struct common_opts co = {.min_size = 0, .max_size = 4194304, .iters = 10000, .warmup = 1000,
                              .iters_large = 1000, .warmup_large = 100};
    static const struct option longopts[] = {COMMON_LONG, {0, 0, 0, 0}};

    mpi_bench_init(&argc, &argv);
    parse_options(argc, argv, COMMON_SHORT, longopts, &co, NULL, help);
    require_ranks(2);

    char *sbuf = xalloc(co.max_size), *rbuf = xalloc(co.max_size);
    print_header("bilat", "bi-directional latency: both ranks Isend+Irecv at once, then "
                 "Waitall; time per exchange (002 Sec. 3.3)", &co, 1);
    if (rank == 0)
        print_kv("units", "us = 10^-6 s; lat = time per exchange (one message each way at once), "
                 "mean");
    print_table("bilat", "bytes lat[us]");

    for (size_t size = first_size(co.min_size); size <= co.max_size; size = next_size(size)) {
        long n = iterations_for(&co, size), skip = warmup_for(&co, size);
        int peer = 1 - rank;
        MPI_Request req[2];
        double t0 = 0;
        for (long i = 0; i < skip + n; i++) {
            if (i == skip) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            MPI_Irecv(rbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &req[0]);
            MPI_Isend(sbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &req[1]);
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        }
        double lat = (MPI_Wtime() - t0) / (double)n * 1e6;
        if (rank == 0) {
            printf("%-10zu %10.2f\n", size, lat);
            fflush(stdout);
        }
    }

    free(sbuf);
    free(rbuf);
    finish();
    return 0;
}
