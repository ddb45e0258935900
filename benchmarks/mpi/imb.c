/* ibrepro_imb: the papers' Pallas/IMB benchmarks, timed as IMB-MPI1 times them, where IMB is not built.
 *
 * The papers ran Pallas PMB (IMB's predecessor): PingPong, Uniband, Biband and the collectives
 * Alltoall, Bcast, Allgather, Allreduce (000 Sec. IV.C, 002 Sec. 3.7). IMB is on no package
 * registry; this program follows IMB-MPI1's method (src_c of IMB 2021) for exactly these seven so
 * that the families run wherever an MPI C compiler is, SimGrid's smpicc included:
 *
 *   iterations  n = max(1, min(ITER, VOLUME / size)) per size (IMB: ITER 1000, OVERALL_VOL 40 MiB),
 *               warm-up max(n / 10, min(10, n)) untimed iterations first (IMB_warm_up);
 *   PingPong    ranks 0 and 1: MPI_Send / MPI_Recv round trips; lat = time / (2 n) (one way),
 *               bw = size / lat;
 *   Uniband     rank 0 posts W MPI_Isend (IMB's MAX_WIN = 64), MPI_Waitall, then receives a
 *               1-byte ack; rank 1 posts W MPI_Irecv, MPI_Waitall, sends the ack; bw = W n size / time;
 *   Biband      both ranks post W MPI_Irecv and W MPI_Isend, MPI_Waitall, then exchange acks;
 *               bw counts both directions;
 *   collectives each call is timed on its own (MPI_Wtime before and after), then (IMB -sync 1, the
 *               default) every rank enters MPI_Barrier outside the timing; per rank the mean time per
 *               call; t_min, t_max and lat = t_avg over the ranks (IMB's t_avg). Alltoall sends size
 *               bytes to every rank, Allgather contributes size bytes, Bcast sends size bytes from
 *               rank 0 (IMB's root_shift 0), Allreduce sums size / 4 floats (sizes below 4 other
 *               than 0 are skipped, as IMB does). --sync 0: one timed loop of n calls without
 *               barriers, as PMB timed them.
 *
 * Times: MPI_Wtime. MB/s = 10^6 B/s. */
#include "mpi_common.h"

#include <stdlib.h>
#include <string.h>

enum kind { PINGPONG, UNIBAND, BIBAND, ALLTOALL, BCAST, ALLGATHER, ALLREDUCE };

static const char *const NAMES[] = {"PingPong", "Uniband", "Biband", "Alltoall", "Bcast",
                                    "Allgather", "Allreduce"};
#define NKINDS ((int)(sizeof NAMES / sizeof *NAMES))

static int kind = -1;
static long window = 64;                 /* IMB MAX_WIN */
static long volume_mib = 40;             /* IMB OVERALL_VOL, MiB */
static int sync_barrier = 1;             /* IMB -sync 1 */

static void help(void)
{
    printf("Usage: mpiexec -n N %s -b BENCHMARK [options]\n\n"
           "IMB-MPI1's timing method for the benchmarks the papers ran with Pallas PMB:\n"
           "PingPong, Uniband, Biband (exactly 2 processes) and Alltoall, Bcast, Allgather,\n"
           "Allreduce (any count). Collectives report t_min, t_max and lat = t_avg over ranks.\n\n"
           "  -b, --benchmark NAME         PingPong | Uniband | Biband | Alltoall | Bcast |\n"
           "                               Allgather | Allreduce (required)\n"
           "  -W, --window W               Uniband/Biband messages in flight (default 64, IMB)\n"
           "      --volume MIB             at most this many MiB per size and rank: iterations\n"
           "                               = max(1, min(-i, MIB * 2^20 / size)) (default 40, IMB)\n"
           "  -x, --warmup N               untimed iterations first (default -1: IMB's rule,\n"
           "                               max(n / 10, min(10, n)) for n timed iterations)\n"
           "      --sync 0|1               collectives: barrier after every timed call (1, IMB's\n"
           "                               default) or one timed loop (0, PMB)\n",
           bench_prog);
}

static int option(int c, const char *name, const char *arg)
{
    switch (c) {
    case 'b':
        for (int k = 0; k < NKINDS; k++)
            if (strcmp(arg, NAMES[k]) == 0)
                kind = k;
        if (kind < 0)
            usage_error("%s must be one of PingPong, Uniband, Biband, Alltoall, Bcast, Allgather, "
                        "Allreduce, got '%s'", name, arg);
        return 1;
    case 'W': window = parse_long(name, arg, 1, 65536); return 1;
    case 'v': volume_mib = parse_long(name, arg, 1, 1L << 20); return 1;
    case 's': sync_barrier = (int)parse_long(name, arg, 0, 1); return 1;
    default: return 0;
    }
}

static long iterations(const struct common_opts *co, size_t size)
{
    if (size == 0)
        return co->iters;
    long by_volume = (long)((size_t)volume_mib * 1048576 / size);
    long n = by_volume < co->iters ? by_volume : co->iters;
    return n < 1 ? 1 : n;
}

/* IMB_warm_up: a tenth of the iterations, at least min(10, n); -x N overrides it. */
static long warmup(const struct common_opts *co, long n)
{
    if (co->warmup >= 0)
        return co->warmup;
    long w = n / 10, floor = n < 10 ? n : 10;
    return w > floor ? w : floor;
}

/* One timed pass of a point-to-point benchmark: seconds for n repetitions (rank 0's clock). */
static double pt2pt(size_t size, long n, char *sbuf, char *rbuf, MPI_Request *req)
{
    int peer = 1 - rank;
    char ack = 0, ack_in;
    int count = (int)size;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);     /* IMB: N_BARR = 2 */
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) {
        if (kind == PINGPONG) {
            if (rank == 0) {
                MPI_Send(sbuf, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(rbuf, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(rbuf, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
        } else if (kind == UNIBAND) {
            for (long w = 0; w < window; w++) {
                if (rank == 0)
                    MPI_Isend(sbuf, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req[w]);
                else
                    MPI_Irecv(rbuf, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req[w]);
            }
            MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
            if (rank == 0)
                MPI_Recv(&ack_in, 1, MPI_CHAR, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else
                MPI_Send(&ack, 1, MPI_CHAR, peer, 2, MPI_COMM_WORLD);
        } else {   /* BIBAND */
            for (long w = 0; w < window; w++)
                MPI_Irecv(rbuf, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req[w]);
            for (long w = 0; w < window; w++)
                MPI_Isend(sbuf, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req[window + w]);
            MPI_Waitall((int)(2 * window), req, MPI_STATUSES_IGNORE);
            MPI_Sendrecv(&ack, 1, MPI_CHAR, peer, 2, &ack_in, 1, MPI_CHAR, peer, 2, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
        }
    }
    return MPI_Wtime() - t0;
}

static void collective(size_t size, char *sbuf, char *rbuf)
{
    int count = (int)size;
    switch (kind) {
    case ALLTOALL:
        MPI_Alltoall(sbuf, count, MPI_BYTE, rbuf, count, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case BCAST:
        MPI_Bcast(rank == 0 ? sbuf : rbuf, count, MPI_BYTE, 0, MPI_COMM_WORLD);
        break;
    case ALLGATHER:
        MPI_Allgather(sbuf, count, MPI_BYTE, rbuf, count, MPI_BYTE, MPI_COMM_WORLD);
        break;
    default:   /* ALLREDUCE */
        MPI_Allreduce(sbuf, rbuf, count / (int)sizeof(float), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    }
}

/* Mean seconds per call of this rank over n calls. */
static double time_collective(size_t size, long n, char *sbuf, char *rbuf)
{
    double total = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (!sync_barrier) {
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; i++)
            collective(size, sbuf, rbuf);
        return (MPI_Wtime() - t0) / (double)n;
    }
    for (long i = 0; i < n; i++) {
        double t0 = MPI_Wtime();
        collective(size, sbuf, rbuf);
        total += MPI_Wtime() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return total / (double)n;
}

int main(int argc, char **argv)
{
    struct common_opts co = {.min_size = 0, .max_size = 4194304, .iters = 1000, .warmup = -1,
                              .same_counts = 1};
    static const struct option longopts[] = {
        COMMON_LONG,
        {"benchmark", required_argument, 0, 'b'},
        {"window", required_argument, 0, 'W'},
        {"volume", required_argument, 0, 'v'},
        {"sync", required_argument, 0, 's'},
        {0, 0, 0, 0}};

    mpi_bench_init(&argc, &argv);
    parse_options(argc, argv, COMMON_SHORT "b:W:", longopts, &co, option, help);
    if (kind < 0)
        usage_error("-b/--benchmark is required (PingPong, Uniband, Biband, Alltoall, Bcast, "
                    "Allgather, Allreduce)");
    int pt = kind <= BIBAND;
    if (pt)
        require_ranks(2);

    size_t per_rank = pt ? co.max_size : co.max_size * (size_t)nranks;
    char *sbuf = xalloc(per_rank ? per_rank : 1), *rbuf = xalloc(per_rank ? per_rank : 1);
    MPI_Request *req = malloc(2 * (size_t)window * sizeof *req);
    if (!req)
        fatal("out of memory");

    char description[160];
    snprintf(description, sizeof description, "%s timed as IMB-MPI1 times it (IMB_%s)", NAMES[kind],
             pt ? "pingpong, IMB_bandwidth" : "<collective>, -sync");
    print_header("imb", description, NULL, 0);
    if (rank == 0) {
        print_kv("imb_benchmark", "%s", NAMES[kind]);
        print_kv("sizes", "%zu:%zu", co.min_size, co.max_size);
        print_kv("iterations", "%ld", co.iters);
        print_kv("volume_mib", "%ld", volume_mib);
        if (kind == UNIBAND || kind == BIBAND)
            print_kv("window", "%ld", window);
        if (!pt)
            print_kv("sync", "%d", sync_barrier);
        print_kv("units", "us = 10^-6 s, MB/s = 10^6 B/s%s",
                 kind == BIBAND ? " (both directions summed)" : "");
    }
    print_table(NAMES[kind], kind == PINGPONG ? "bytes iterations lat[us] bw[MB/s]"
                             : pt ? "bytes iterations bw[MB/s] msgrate[msg/s]"
                                  : "bytes iterations t_min[us] t_max[us] lat[us]");

    for (size_t size = first_size(co.min_size); size <= co.max_size; size = next_size(size)) {
        if (kind == ALLREDUCE && size % sizeof(float))
            continue;
        long n = iterations(&co, size);
        if (pt) {
            pt2pt(size, warmup(&co, n), sbuf, rbuf, req);
            double t = pt2pt(size, n, sbuf, rbuf, req);
            if (rank == 0) {
                if (kind == PINGPONG) {
                    double lat = t / (2.0 * (double)n);
                    printf("%-10zu %10ld %12.2f %12.6g\n", size, n, lat * 1e6,   /* bw: 1 B is ~0.001 MB/s */
                           lat > 0 ? (double)size / lat / 1e6 : 0.0);
                } else {
                    double msgs = (double)window * (double)n * (kind == BIBAND ? 2.0 : 1.0);
                    printf("%-10zu %10ld %12.2f %14.0f\n", size, n, msgs * (double)size / t / 1e6,
                           msgs / t);
                }
                fflush(stdout);
            }
            continue;
        }
        for (long i = 0; i < warmup(&co, n); i++)
            collective(size, sbuf, rbuf);
        double mine = time_collective(size, n, sbuf, rbuf), lo, hi, sum;
        MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%-10zu %10ld %12.2f %12.2f %12.2f\n", size, n, lo * 1e6, hi * 1e6,
                   sum / nranks * 1e6);
            fflush(stdout);
        }
    }

    free(req);
    free(sbuf);
    free(rbuf);
    finish();
    return 0;
}
