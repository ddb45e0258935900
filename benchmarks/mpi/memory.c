/* ibrepro_memory: memory use of an MPI barrier program versus process count (002 Sec. 3.8).
 *
 * 002: "We ran a simple MPI barrier program and measured the amount of memory it consumes.
 * The memory usage data was obtained through the proc file systems in Linux."
 * Every rank reads VmRSS and VmHWM (KiB) from /proc/self/status right after MPI_Init and again
 * after the barrier(s); rank 0 gathers them and prints one row per rank and a summary.
 * mem = the largest VmRSS after the barrier (KiB): the memory of one process, the quantity
 * that 002 says grows with the node count for MPI over InfiniBand (per-connection buffers).
 * VmRSS counts shared pages (libraries, shared-memory segments) in every process that maps
 * them, so rss_total overstates the node's real use. Any number of processes. */
#include "mpi_common.h"

#include <stdlib.h>
#include <string.h>

static long barriers = 1;

static void help(void)
{
    printf("Usage: mpiexec -n N %s [options]\n\n"
           "Memory use of an MPI barrier program (paper 002 Sec. 3.8): VmRSS and VmHWM from\n"
           "/proc/self/status after MPI_Init and after the barrier, per rank (table\n"
           "memory_per_rank) and summed up (table memory; mem = largest VmRSS after the\n"
           "barrier, KiB). Any number of processes (N >= 1).\n\n"
           "  -b, --barriers N             barriers before the second reading (default 1)\n",
           bench_prog);
}

static int option(int c, const char *name, const char *arg)
{
    if (c != 'b')
        return 0;
    barriers = parse_long(name, arg, 1, 1000000);
    return 1;
}

/* VmRSS and VmHWM of this process in kB */
static void read_status(long *rss, long *hwm)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        fatal("cannot read /proc/self/status (not Linux?)");
    char line[256];
    *rss = *hwm = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmRSS:", 6) == 0)
            *rss = strtol(line + 6, NULL, 10);
        else if (strncmp(line, "VmHWM:", 6) == 0)
            *hwm = strtol(line + 6, NULL, 10);
    }
    fclose(f);
    if (*rss < 0 || *hwm < 0)
        fatal("no VmRSS/VmHWM in /proc/self/status");
}

int main(int argc, char **argv)
{
    long mine[4];  /* VmRSS, VmHWM after MPI_Init; VmRSS, VmHWM after the barrier(s) */
    mpi_bench_init(&argc, &argv);
    read_status(&mine[0], &mine[1]);

    struct common_opts co = {0};
    static const struct option longopts[] = {
        {"barriers", required_argument, 0, 'b'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    parse_options(argc, argv, "b:hV", longopts, &co, option, help);

    for (long i = 0; i < barriers; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    read_status(&mine[2], &mine[3]);

    long *all = rank == 0 ? malloc(4 * (size_t)nranks * sizeof *all) : NULL;
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    char *names = rank == 0 ? malloc((size_t)nranks * MPI_MAX_PROCESSOR_NAME) : NULL;
    int len;
    if (rank == 0 && (!all || !names))
        fatal("out of memory");
    MPI_Get_processor_name(name, &len);
    MPI_Gather(mine, 4, MPI_LONG, all, 4, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);

    print_header("memory", "memory use of an MPI barrier program: VmRSS/VmHWM from "
                 "/proc/self/status after MPI_Init and after the barrier (002 Sec. 3.8)", NULL, 0);
    if (rank == 0) {
        print_kv("barriers", "%ld", barriers);
        print_kv("units", "KiB = 1024 bytes (/proc/self/status calls them kB)");
        print_kv("table", "memory_per_rank");
        printf("rank host rss_init[KiB] hwm_init[KiB] rss[KiB] hwm[KiB]\n");
        long rss_max = 0, rss_total = 0, hwm_max = 0, hwm_total = 0, init_total = 0;
        for (int r = 0; r < nranks; r++) {
            long *v = all + 4 * r;
            printf("%-5d %s %10ld %10ld %10ld %10ld\n", r,
                   names + (size_t)r * MPI_MAX_PROCESSOR_NAME, v[0], v[1], v[2], v[3]);
            rss_max = v[2] > rss_max ? v[2] : rss_max;
            hwm_max = v[3] > hwm_max ? v[3] : hwm_max;
            rss_total += v[2];
            hwm_total += v[3];
            init_total += v[0];
        }
        print_kv("table", "memory");
        printf("ranks mem[KiB] rss_total[KiB] hwm_max[KiB] hwm_total[KiB] rss_init_total[KiB]\n");
        printf("%-5d %10ld %12ld %10ld %12ld %12ld\n", nranks, rss_max, rss_total, hwm_max,
               hwm_total, init_total);
        fflush(stdout);
    }
    free(all);
    free(names);
    finish();
    return 0;
}
