/* ibrepro_reuse: MPI latency or bandwidth versus buffer reuse (paper 002 Sec. 3.5, Figs. 7-8).
 *
 * 002: "Our buffer reuse benchmark consists of N iterations of communication. We define a
 * buffer reuse percentage R. For the N iterations of the test, N*R iterations will use the same
 * buffer, while all other iterations will use completely different buffers."
 * Per R and message size, each rank maps (mmap) one buffer per non-reused message, each on
 * pages of its own and never used for communication before, so a registration (pin-down) cache
 * or an address-translation cache cannot hit; the reused messages use one buffer that the
 * warm-up has used too. The buffers are written once when mapped (outside the timing) so that
 * the timing shows registration and translation, not first-touch page faults. They are
 * unmapped after the size. The number of fresh buffers is capped by --max-memory per rank:
 * when N would need more, N is lowered for that size and the row says so (iterations column).
 * Reused messages are spread evenly (R = 50: fresh, reused, fresh, ...).
 *   lat: ping-pong, rank 0 and rank 1 both use the iteration's buffer; lat = round trip / 2
 *   bw:  rank 0 sends W messages (one buffer each), rank 1 receives them, then replies with
 *        4 bytes; bw = size * W * N / time in MB/s = 10^6 B/s */
#include "mpi_common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_REUSE 16

static int reuse[MAX_REUSE] = {0, 50, 100}, nreuse = 3;
static int bw_mode = 0;
static long window = 16;
static long max_memory_mib = 1024;

static void help(void)
{
    printf("Usage: mpiexec -n 2 %s [options]\n\n"
           "MPI latency or bandwidth versus buffer reuse (paper 002 Sec. 3.5): of N iterations,\n"
           "R%% use one buffer and the others each a buffer never used before. One table per R.\n"
           "Needs exactly 2 processes; placement comes from the launcher.\n\n"
           "  -i, --iterations N           N, timed iterations per size (lat 1000, bw 100)\n"
           "  -x, --warmup N               untimed iterations on the reused buffer (100, 10)\n"
           "  -R, --reuse LIST             reuse percentages, comma separated (default 0,50,100)\n"
           "  -M, --mode lat|bw            ping-pong latency or windowed bandwidth (default lat)\n"
           "  -W, --window W               bw: messages per iteration (default 16)\n"
           "      --max-memory MIB         fresh buffers per rank and size (default 1024)\n"
           "\nA size whose fresh buffers would exceed --max-memory runs fewer iterations (the\n"
           "iterations column).\n", bench_prog);
}

static int option(int c, const char *name, const char *arg)
{
    switch (c) {
    case 'R': {
        char copy[256], *save = NULL;
        if (strlen(arg) >= sizeof copy)
            usage_error("%s: list too long", name);
        strcpy(copy, arg);
        nreuse = 0;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (nreuse == MAX_REUSE)
                usage_error("%s: at most %d values", name, MAX_REUSE);
            reuse[nreuse++] = (int)parse_long(name, tok, 0, 100);
        }
        if (nreuse == 0)
            usage_error("%s needs at least one percentage", name);
        return 1;
    }
    case 'M':
        if (strcmp(arg, "lat") == 0)
            bw_mode = 0;
        else if (strcmp(arg, "bw") == 0)
            bw_mode = 1;
        else
            usage_error("%s must be lat or bw, got '%s'", name, arg);
        return 1;
    case 'W': window = parse_long(name, arg, 1, 65536); return 1;
    case 'G': max_memory_mib = parse_long(name, arg, 1, 1 << 20); return 1;
    }
    return 0;
}

static char *map_buffer(size_t bytes)
{
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        fatal("mmap of %zu bytes failed", bytes);
    memset(p, 'a', bytes);
    return p;
}

/* One size at one reuse percentage; returns the figure (lat us or bw MB/s). */
static double run(size_t size, int pct, long n, long skip, char **bufs, char *ack)
{
    int peer = 1 - rank;
    long per_iter = bw_mode ? window : 1;
    MPI_Request *req = malloc((size_t)window * sizeof *req);
    if (!req)
        fatal("out of memory");

    double t0 = 0;
    for (long i = 0; i < skip + n; i++) {
        if (i == skip) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        for (long w = 0; w < per_iter; w++) {
            /* warm-up uses the reused buffer; timed message m follows the schedule */
            long m = (i - skip) * per_iter + w;
            char *buf = bufs[i < skip ? 0 : reuse_buffer(m, pct)];
            if (!bw_mode) {
                if (rank == 0) {
                    MPI_Send(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                }
            } else if (rank == 0) {
                MPI_Isend(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &req[w]);
            } else {
                MPI_Irecv(buf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &req[w]);
            }
        }
        if (bw_mode) {
            MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
            if (rank == 0)
                MPI_Recv(ack, 4, MPI_CHAR, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else
                MPI_Send(ack, 4, MPI_CHAR, peer, 2, MPI_COMM_WORLD);
        }
    }
    double t = MPI_Wtime() - t0;
    free(req);
    return bw_mode ? (double)size * (double)window * (double)n / t / 1e6
                   : t / (2.0 * (double)n) * 1e6;
}

int main(int argc, char **argv)
{
    /* iters 0 and warmup -1: not given, the defaults depend on --mode */
    struct common_opts co = {.min_size = 0, .max_size = 4194304, .warmup = -1,
                             .warmup_large = -1};
    static const struct option longopts[] = {
        COMMON_LONG,
        {"reuse", required_argument, 0, 'R'},
        {"mode", required_argument, 0, 'M'},
        {"window", required_argument, 0, 'W'},
        {"max-memory", required_argument, 0, 'G'},
        {0, 0, 0, 0}};

    mpi_bench_init(&argc, &argv);
    parse_options(argc, argv, COMMON_SHORT "R:M:W:", longopts, &co, option, help);
    if (co.iters_large != 0 || co.warmup_large != -1)
        usage_error("-I and -X do not apply: the reuse test runs N = -i iterations at every size");
    require_ranks(2);
    if (co.iters == 0)  /* not given: the default of the mode */
        co.iters = bw_mode ? 100 : 1000;
    if (co.warmup < 0)
        co.warmup = bw_mode ? 10 : 100;
    if (bw_mode && co.min_size == 0)
        co.min_size = 1;

    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t cap = (size_t)max_memory_mib << 20;
    size_t buf_bytes_max = (co.max_size + page - 1) / page * page;
    if (buf_bytes_max > cap)
        usage_error("--max-memory %ld MiB is smaller than one buffer of %zu bytes",
                    max_memory_mib, co.max_size);
    char ack[4] = {0};

    print_header(bw_mode ? "reuse_bw" : "reuse_lat",
                 bw_mode ? "bandwidth (window W, then a 4-byte reply) versus buffer reuse "
                           "percentage R (002 Sec. 3.5)"
                         : "ping-pong latency versus buffer reuse percentage R (002 Sec. 3.5)",
                 &co, 0);
    if (rank == 0) {
        print_kv("mode", "%s", bw_mode ? "bw" : "lat");
        print_kv("units", "%s", bw_mode ? "MB/s = 10^6 B/s; fresh = buffers never used before, "
                                          "per rank"
                                        : "us = 10^-6 s, lat = round trip / 2; fresh = buffers "
                                          "never used before, per rank");
        print_kv("iterations", "%ld", co.iters);
        print_kv("warmup", "%ld", co.warmup);
        if (bw_mode)
            print_kv("window", "%ld", window);
        print_kv("max_memory_mib", "%ld", max_memory_mib);
        print_kv("buffers", "one mmap per fresh buffer, whole pages, written once before timing");
    }

    for (int r = 0; r < nreuse; r++) {
        if (rank == 0) {
            print_kv("table", "%s", bw_mode ? "reuse_bw" : "reuse_lat");
            print_kv("reuse", "%d", reuse[r]);
            printf("bytes %s iterations fresh\n", bw_mode ? "bw[MB/s]" : "lat[us]");
            fflush(stdout);
        }
        for (size_t size = first_size(co.min_size); size <= co.max_size; size = next_size(size)) {
            size_t bytes = size ? (size + page - 1) / page * page : page;
            long per_iter = bw_mode ? window : 1;
            long n = reuse_fit_iterations(co.iters, (int)per_iter, reuse[r], bytes, cap);
            long fresh = reuse_fresh_count(n * per_iter, reuse[r]);

            char **bufs = malloc((size_t)(fresh + 1) * sizeof *bufs);
            if (!bufs)
                fatal("out of memory");
            for (long b = 0; b <= fresh; b++)
                bufs[b] = map_buffer(bytes);

            double v = run(size, reuse[r], n, co.warmup, bufs, ack);
            for (long b = 0; b <= fresh; b++)
                munmap(bufs[b], bytes);
            free(bufs);

            if (rank == 0) {
                if (bw_mode)
                    printf("%-10zu %12.3f %10ld %8ld\n", size, v, n, fresh);
                else
                    printf("%-10zu %12.2f %10ld %8ld\n", size, v, n, fresh);
                fflush(stdout);
            }
        }
    }
    finish();
    return 0;
}
