/* ibrepro_control: the nightly's control measurement, run on a node's CPUs just before each round of a benchmark.
 *
 * It measures the machine, not the MPI stack: no MPI, no network, nothing the injector or an MPI or fabric
 * regression can touch. Two threads pinned to the CPUs the ranks run on:
 *
 *   pingpong_ns   median round trip of one cache line between the two CPUs (core-to-core latency)
 *   copy_gbs      median memcpy bandwidth of 64 MiB on the first CPU (memory bandwidth, GB/s = 1e9 B/s)
 *   steal_pct     share of CPU time the hypervisor stole while it ran (/proc/stat "cpu" steal)
 *   psi_some_pct  share of its wall time some task of the node waited for a CPU (/proc/pressure/cpu "some")
 *   wall_s        its own wall time
 *
 * and the node's hardware, which a frozen baseline describes (a night on other hardware is not judged against it):
 *
 *   hardware cpu NAME        /proc/cpuinfo "model name" of the first CPU
 *   hardware cpu_model N     its "model"
 *   hardware cache SIZE      its "cache size"
 *   hardware hca:DEV BOARD   each RDMA device's board id (/sys/class/infiniband/DEV/board_id: the HCA's model)
 *
 * When the machine itself is slow (another job, a noisy neighbour, a throttled CPU) these move; when only the
 * benchmark's software path is slow they do not: the verdict excludes a round only on this evidence, never on the
 * benchmark's own spread. Output: "name value" lines; "-" where a value cannot be measured (one CPU, no PSI).
 *
 *   ibrepro_control [-c CPU_A,CPU_B] [-n REPEATS]
 *
 * Default CPUs: the first two of the process's affinity mask (what Slurm or the cgroup granted). Exit 0, or 1 with
 * a message on stderr (a bad option, a peer thread that never answered within 10 s).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUND_TRIPS 100000
#define COPY_BYTES (64u << 20)
#define MAX_REPEATS 50
#define PEER_TIMEOUT_S 10.0

/* 2k + 1: the peer's turn, 2k + 2: ours; -1: stop. On a cache line of its own. */
static _Alignas(64) _Atomic int ball;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *peer(void *arg)
{
    int cpu = *(int *)arg, seen = 0;
    if (pin(cpu) != 0)
        fprintf(stderr, "ibrepro_control: cannot pin the peer thread to CPU %d\n", cpu);
    double started = now();
    for (long spins = 0;; spins++) {
        int b = atomic_load_explicit(&ball, memory_order_acquire);
        if (b < 0)
            return NULL;
        if (b % 2 == 1 && b != seen) {
            seen = b + 1;
            atomic_store_explicit(&ball, b + 1, memory_order_release);
            started = now();
        } else if ((spins & 0xffff) == 0 && now() - started > PEER_TIMEOUT_S) {
            return NULL;    /* the main thread reports the time-out */
        }
    }
}

/* One batch of round trips: ns per round trip, or -1 when the peer did not answer in time. */
static double pingpong_once(void)
{
    int b = atomic_load(&ball);
    double t0 = now();
    for (int i = 0; i < ROUND_TRIPS; i++) {
        atomic_store_explicit(&ball, b + 1, memory_order_release);
        long spins = 0;
        while (atomic_load_explicit(&ball, memory_order_acquire) != b + 2) {
            if ((++spins & 0xffff) == 0 && now() - t0 > PEER_TIMEOUT_S)
                return -1;
        }
        b += 2;
    }
    return (now() - t0) / ROUND_TRIPS * 1e9;
}

static double copy_once(char *dst, const char *src)
{
    double t0 = now();
    memcpy(dst, src, COPY_BYTES);
    __asm__ __volatile__("" : : "r"(dst) : "memory");   /* the copy is not optimised away */
    return COPY_BYTES / (now() - t0) / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* /proc/stat "cpu" line: steal and the sum of all fields (jiffies); 0 when unreadable. */
static int read_stat(unsigned long long *steal, unsigned long long *total)
{
    unsigned long long f[10] = {0};
    FILE *fp = fopen("/proc/stat", "r");
    if (!fp)
        return 0;
    int n = fscanf(fp, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &f[0], &f[1], &f[2], &f[3], &f[4],
                   &f[5], &f[6], &f[7], &f[8], &f[9]);
    fclose(fp);
    if (n < 8)
        return 0;
    *steal = f[7];
    *total = 0;
    for (int i = 0; i < 8; i++)    /* guest time is already counted in user */
        *total += f[i];
    return 1;
}

/* /proc/pressure/cpu "some ... total=US"; 0 when the kernel has no PSI. */
static int read_psi(unsigned long long *us)
{
    char line[256];
    FILE *fp = fopen("/proc/pressure/cpu", "r");
    if (!fp)
        return 0;
    int ok = 0;
    while (fgets(line, sizeof line, fp)) {
        char *t = strstr(line, "total=");
        if (strncmp(line, "some", 4) == 0 && t && sscanf(t, "total=%llu", us) == 1)
            ok = 1;
    }
    fclose(fp);
    return ok;
}

/* One "hardware NAME VALUE" line; the value (read from the node: any bytes) printable ASCII only, at most 100. */
static void print_hardware(const char *name, const char *value)
{
    char clean[101];
    int n = 0;
    while (*value == ' ' || *value == '\t')
        value++;
    for (; *value && *value != '\n' && n < 100; value++)
        clean[n++] = (*value >= 0x20 && *value < 0x7f) ? *value : '?';
    while (n > 0 && clean[n - 1] == ' ')
        n--;
    clean[n] = 0;
    if (n > 0)
        printf("hardware %s %s\n", name, clean);
}

static void print_cpuinfo(void)
{
    static const char *keys[][2] = {{"model name", "cpu"}, {"model", "cpu_model"}, {"cache size", "cache"}};
    int seen[3] = {0};
    char line[512];
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp)
        return;
    while (fgets(line, sizeof line, fp)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        size_t len = colon - line;
        while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t'))
            len--;
        for (int k = 0; k < 3; k++)
            if (!seen[k] && strlen(keys[k][0]) == len && !strncmp(line, keys[k][0], len)) {
                print_hardware(keys[k][1], colon + 1);
                seen[k] = 1;
            }
    }
    fclose(fp);
}

static void print_hcas(void)
{
    DIR *dir = opendir("/sys/class/infiniband");
    struct dirent *e;
    if (!dir)
        return;
    while ((e = readdir(dir))) {
        char path[512], board[128], name[160];
        if (e->d_name[0] == '.' || strlen(e->d_name) > 64)
            continue;
        snprintf(path, sizeof path, "/sys/class/infiniband/%s/board_id", e->d_name);
        FILE *fp = fopen(path, "r");
        if (!fp)
            continue;
        if (fgets(board, sizeof board, fp)) {
            snprintf(name, sizeof name, "hca:%s", e->d_name);
            for (char *c = name; *c; c++)
                if (*c <= 0x20 || *c >= 0x7f)
                    *c = '?';
            print_hardware(name, board);
        }
        fclose(fp);
    }
    closedir(dir);
}

static int first_cpus(int *a, int *b)
{
    cpu_set_t set;
    int found = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
        if (CPU_ISSET(c, &set))
            *(found++ ? b : a) = c;
    return found;
}

int main(int argc, char **argv)
{
    int cpu_a = -1, cpu_b = -1, repeats = 9, ncpus;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d,%d", &cpu_a, &cpu_b) != 2 || cpu_a < 0 || cpu_b < 0 || cpu_a >= CPU_SETSIZE
                || cpu_b >= CPU_SETSIZE) {
                fprintf(stderr, "ibrepro_control: -c takes two CPU numbers, e.g. -c 0,1\n");
                return 1;
            }
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            repeats = atoi(argv[++i]);
            if (repeats < 1 || repeats > MAX_REPEATS) {
                fprintf(stderr, "ibrepro_control: -n takes 1 to %d repeats\n", MAX_REPEATS);
                return 1;
            }
        } else {
            fprintf(stderr, "usage: ibrepro_control [-c CPU_A,CPU_B] [-n REPEATS]\n");
            return 1;
        }
    }
    ncpus = cpu_a >= 0 ? 2 : first_cpus(&cpu_a, &cpu_b);
    if (ncpus == 0) {
        fprintf(stderr, "ibrepro_control: cannot read this process's CPUs\n");
        return 1;
    }

    unsigned long long steal0 = 0, total0 = 0, steal1 = 0, total1 = 0, psi0 = 0, psi1 = 0;
    int have_stat = read_stat(&steal0, &total0), have_psi = read_psi(&psi0);
    double started = now();

    if (pin(cpu_a) != 0) {
        fprintf(stderr, "ibrepro_control: cannot pin to CPU %d\n", cpu_a);
        return 1;
    }
    double pp[MAX_REPEATS], bw[MAX_REPEATS];
    int have_pp = ncpus == 2 && cpu_a != cpu_b;
    if (have_pp) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, peer, &cpu_b) != 0) {
            fprintf(stderr, "ibrepro_control: cannot start the peer thread\n");
            return 1;
        }
        pingpong_once();    /* warm-up: both threads running, the line in both caches */
        for (int r = 0; r < repeats; r++) {
            pp[r] = pingpong_once();
            if (pp[r] < 0) {
                fprintf(stderr, "ibrepro_control: the thread on CPU %d did not answer within %.0f s\n", cpu_b,
                        PEER_TIMEOUT_S);
                return 1;
            }
        }
        atomic_store(&ball, -1);
        pthread_join(thread, NULL);
    }

    char *src = malloc(COPY_BYTES), *dst = malloc(COPY_BYTES);
    if (!src || !dst) {
        fprintf(stderr, "ibrepro_control: out of memory\n");
        return 1;
    }
    memset(src, 1, COPY_BYTES);
    memset(dst, 2, COPY_BYTES);
    copy_once(dst, src);    /* warm-up: pages faulted in */
    for (int r = 0; r < repeats; r++)
        bw[r] = copy_once(dst, src);

    double wall = now() - started;
    have_stat = have_stat && read_stat(&steal1, &total1) && total1 > total0;
    have_psi = have_psi && read_psi(&psi1);

    printf("# ibrepro_control 1: cpus %d,%d, %d repeats\n", cpu_a, have_pp ? cpu_b : cpu_a, repeats);
    if (have_pp)
        printf("pingpong_ns %.2f\n", median(pp, repeats));
    else
        printf("pingpong_ns -\n");
    printf("copy_gbs %.3f\n", median(bw, repeats));
    if (have_stat)
        printf("steal_pct %.3f\n", 100.0 * (steal1 - steal0) / (total1 - total0));
    else
        printf("steal_pct -\n");
    if (have_psi)
        printf("psi_some_pct %.3f\n", 100.0 * (psi1 - psi0) / (wall * 1e6));
    else
        printf("psi_some_pct -\n");
    printf("wall_s %.4f\n", wall);
    print_cpuinfo();
    print_hcas();
    free(src);
    free(dst);
    return 0;
}
