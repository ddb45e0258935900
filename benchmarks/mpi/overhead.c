/* ibrepro_overhead: host overhead in the MPI latency test (paper 002 Sec. 3.2, Fig. 3).
 *
 * 002 reports "the time spent in communication" on the sender plus the receiver side of the
 * ping-pong latency test. In a plain ping-pong the blocking receive also waits for the message,
 * so the overhead is measured in a second ping-pong in which the waiting is kept out:
 *   rank 0: time MPI_Send; spin (no MPI call) for D = 2 x round trip + 5 us, by then the reply
 *           has arrived; time MPI_Recv (copy-out and bookkeeping only)
 *   rank 1: MPI_Recv (untimed, it waits), time MPI_Send
 * send = median time in MPI_Send (mean of the two ranks' medians), recv = median time in
 * rank 0's MPI_Recv, overhead = send + recv. Medians, not means: one descheduling of the peer
 * (milliseconds, on a shared node) would dominate a mean of sub-microsecond calls. The cost
 * of reading the clock is measured and subtracted.
 * Above the MPI library's eager limit the send waits for the receiver's handshake, and the
 * figure includes that wait: 002 shows small messages only (default sizes up to 4 KiB).
 * late = the share of timed receives that took longer than a whole round trip: the reply had
 * not arrived (the peer was descheduled longer than the delay); a high share makes recv invalid.
 * lat is the plain ping-pong latency (round trip / 2), measured first. */
#include "mpi_common.h"

#include <stdlib.h>

static void help(void)
{
    printf("Usage: mpiexec -n 2 %s [options]\n\n"
           "Host overhead in the MPI latency test (paper 002 Sec. 3.2): time spent inside\n"
           "MPI_Send plus MPI_Recv for a message that has already arrived, per message size.\n"
           "Columns: lat (ping-pong latency, round trip / 2), send and recv (median time per\n"
           "call), overhead = send + recv, all in microseconds; late = %% of receives that\n"
           "took longer than a round trip (invalid if high). Needs exactly 2 processes;\n"
           "placement (same node or two nodes) comes from the launcher.\n", bench_prog);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

static void spin(double seconds)
{
    double end = now_s() + seconds;
    while (now_s() < end)
        ;
}

int main(int argc, char **argv)
{
    struct common_opts co = {.min_size = 0, .max_size = 4096, .iters = 10000, .warmup = 1000,
                              .iters_large = 1000, .warmup_large = 100};
    static const struct option longopts[] = {COMMON_LONG, {0, 0, 0, 0}};

    mpi_bench_init(&argc, &argv);
    parse_options(argc, argv, COMMON_SHORT, longopts, &co, NULL, help);
    require_ranks(2);

    char *buf = xalloc(co.max_size);
    double tcost = timer_cost_s();
    MPI_Bcast(&tcost, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

    print_header("overhead", "host overhead in the ping-pong latency test: time inside MPI_Send "
                 "plus MPI_Recv of an already arrived message (002 Sec. 3.2)", &co, 1);
    if (rank == 0) {
        print_kv("units", "us = 10^-6 s; lat = round trip / 2 (mean); send, recv = median time "
                 "per call; overhead = send + recv; late = %% of receives longer than a round trip "
                 "(the reply was not there yet)");
        print_kv("delay", "2 x round trip + 5 us before each timed MPI_Recv");
        print_kv("timer_cost_us", "%.4f (subtracted from each timed call)", tcost * 1e6);
        print_kv("statistic", "send, recv: median over the timed iterations; lat: mean");
    }
    print_table("overhead", "bytes lat[us] send[us] recv[us] overhead[us] late[%]");

    for (size_t size = first_size(co.min_size); size <= co.max_size; size = next_size(size)) {
        long n = iterations_for(&co, size), skip = warmup_for(&co, size);
        int peer = 1 - rank;

        /* 1. plain ping-pong latency */
        double t0 = 0;
        for (long i = 0; i < skip + n; i++) {
            if (i == skip) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            if (rank == 0) {
                MPI_Send(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            }
        }
        double rtt = (MPI_Wtime() - t0) / (double)n;
        MPI_Bcast(&rtt, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        double delay = 2.0 * rtt + 5e-6;

        /* 2. the same exchange with the waiting kept out of the timed calls */
        double *in_send = malloc((size_t)n * sizeof *in_send);
        double *in_recv = malloc((size_t)n * sizeof *in_recv);
        if (!in_send || !in_recv)
            fatal("out of memory");
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < skip + n; i++) {
            long k = i < skip ? 0 : i - skip;  /* warm-up samples are overwritten */
            if (rank == 0) {
                double t = now_s();
                MPI_Send(buf, (int)size, MPI_CHAR, peer, 2, MPI_COMM_WORLD);
                in_send[k] = now_s() - t - tcost;
                spin(delay);
                t = now_s();
                MPI_Recv(buf, (int)size, MPI_CHAR, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                in_recv[k] = now_s() - t - tcost;
            } else {
                MPI_Recv(buf, (int)size, MPI_CHAR, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double t = now_s();
                MPI_Send(buf, (int)size, MPI_CHAR, peer, 2, MPI_COMM_WORLD);
                in_send[k] = now_s() - t - tcost;
            }
        }
        long late = 0;
        for (long k = 0; rank == 0 && k < n; k++)
            late += in_recv[k] > rtt;
        double send_med = median(in_send, n), send_sum = 0;
        MPI_Reduce(&send_med, &send_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

        if (rank == 0) {
            double send_us = send_sum / 2.0 * 1e6;
            double recv_us = median(in_recv, n) * 1e6;
            printf("%-10zu %10.2f %10.3f %10.3f %12.3f %8.1f\n", size, rtt / 2.0 * 1e6, send_us,
                   recv_us, send_us + recv_us, 100.0 * (double)late / (double)n);
            fflush(stdout);
        }
        free(in_send);
        free(in_recv);
    }

    free(buf);
    finish();
    return 0;
}
