/* mpi_pingpong.c: where do the ranks run, and does data flow between the first two?
 *
 *   mpi_pingpong [SECONDS]
 *
 * Every rank reports its host name (rank 0 prints them in rank order), an allreduce sums the
 * ranks, then ranks 0 and 1 ping-pong 8 bytes (latency = half a round trip) and 1 MiB
 * (bandwidth, 10^6 B/s). With SECONDS > 0 the 1 MiB ping-pong keeps going that long, so
 * that a test can kill a rank in the middle of a run.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double pingpong(int rank, char *buf, int size, long iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(buf, size, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    const int big = 1 << 20;
    int rank, size, len, sum = 0;
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    double seconds = argc > 1 ? atof(argv[1]) : 0.0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(name, &len);

    char *names = rank == 0 ? malloc((size_t)size * MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++)
            printf("rank %d of %d on %s\n", r, size, names + (size_t)r * MPI_MAX_PROCESSOR_NAME);
        printf("allreduce sum of ranks %d (expected %d)\n", sum, size * (size - 1) / 2);
        fflush(stdout);
    }
    if (size < 2) {
        MPI_Finalize();
        return 0;
    }

    char *buf = calloc(big, 1);
    long lat_iters = 1000, bw_iters = 100;
    double t = pingpong(rank, buf, 8, lat_iters);
    if (rank == 0)
        printf("latency 8 bytes: %.2f us (%ld round trips)\n", t / lat_iters / 2 * 1e6, lat_iters);

    if (seconds > 0) {
        /* run in slices of bw_iters until SECONDS have passed; rank 0 decides when to stop */
        if (rank == 0) {
            printf("ping-pong for %.0f s\n", seconds);
            fflush(stdout);
        }
        int go = 1;
        double t0 = MPI_Wtime();
        while (go) {
            pingpong(rank, buf, big, bw_iters);
            go = MPI_Wtime() - t0 < seconds;
            MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
    }
    t = pingpong(rank, buf, big, bw_iters);
    if (rank == 0)
        printf("bandwidth %d bytes: %.1f MB/s (%ld round trips)\n", big, 2.0 * bw_iters * big / t / 1e6,
               bw_iters);
    free(buf);
    free(names);
    MPI_Finalize();
    return 0;
}
