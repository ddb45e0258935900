#include "mpi_common.h"

#include <stdlib.h>
#include <string.h>

int rank, nranks;

static void finalize_hook(int code)
{
    (void)code;
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down)
        MPI_Finalize();
}

void mpi_bench_init(int *argc, char ***argv)
{
    const char *slash = strrchr((*argv)[0], '/');
    bench_prog = slash ? slash + 1 : (*argv)[0];
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    bench_quiet = rank != 0;
    bench_exit_hook = finalize_hook;
}

static void common_help(const struct common_opts *co)
{
    printf("\nCommon options:\n");
    if (co->max_size > 0)
        printf("  -m, --sizes MIN:MAX          message sizes, powers of two (0 first if MIN = 0);\n"
               "                               K, M, G: 2^10, 2^20, 2^30 (default %zu:%zu)\n",
               co->min_size, co->max_size);
    if (co->iters > 0 && co->same_counts)
        printf("  -i, --iterations N           timed iterations, every size (default %ld)\n"
               "  -x, --warmup N               untimed warm-up iterations (default %ld)\n"
               "  -I, --iterations-large N     above %d B, if different (default: as -i)\n"
               "  -X, --warmup-large N         above %d B, if different (default: as -x)\n",
               co->iters, co->warmup, LARGE_MESSAGE, LARGE_MESSAGE);
    else if (co->iters > 0)
        printf("  -i, --iterations N           timed iterations up to %d B (default %ld)\n"
               "  -x, --warmup N               warm-up iterations up to %d B (default %ld)\n"
               "  -I, --iterations-large N     timed iterations above %d B (default %ld)\n"
               "  -X, --warmup-large N         warm-up iterations above %d B (default %ld)\n",
               LARGE_MESSAGE, co->iters, LARGE_MESSAGE, co->warmup, LARGE_MESSAGE,
               co->iters_large, LARGE_MESSAGE, co->warmup_large);
    printf("  -h, --help                   this help\n"
           "  -V, --version                print the ibrepro-bench version\n"
           "\nOutput: '# ibrepro-bench <benchmark> <version>', '# key: value' parameters, one\n"
           "table per '# table:' line (a header with units in brackets, one row per size), and\n"
           "'# done' at the end. Errors: '<program>: invalid option: ...' and\n"
           "'<program>: invalid rank count: ...' on stderr, exit status 2. MB = 10^6 bytes.\n");
}

void parse_options(int argc, char **argv, const char *shortopts, const struct option *longopts,
                   struct common_opts *co, int (*handle)(int c, const char *name, const char *arg),
                   void (*help)(void))
{
    char optstring[128];
    snprintf(optstring, sizeof optstring, ":%s", shortopts);
    opterr = 0;
    int c, longindex = -1, large_given = 0, warmup_large_given = 0;
    while ((c = getopt_long(argc, argv, optstring, longopts, &longindex)) != -1) {
        const char *name = c == ':' || c == '?' ? argv[optind - 1]
                                                : option_name(c, longopts, longindex);
        longindex = -1;
        switch (c) {
        case 'm': parse_size_range(name, optarg, &co->min_size, &co->max_size); break;
        case 'i': co->iters = parse_long(name, optarg, 1, 100000000); break;
        case 'x': co->warmup = parse_long(name, optarg, 0, 100000000); break;
        case 'I':
            co->iters_large = parse_long(name, optarg, 1, 100000000);
            large_given = 1;
            break;
        case 'X':
            co->warmup_large = parse_long(name, optarg, 0, 100000000);
            warmup_large_given = 1;
            break;
        case 'h':
            if (rank == 0) {
                help();
                common_help(co);
            }
            MPI_Finalize();
            exit(0);
        case 'V':
            if (rank == 0)
                printf("%s (ibrepro-bench) %s\n", bench_prog, BENCH_VERSION);
            MPI_Finalize();
            exit(0);
        case ':': usage_error("%s needs a value", name);
        case '?':
            if (optopt)
                usage_error("unknown option '-%c'", optopt);
            usage_error("unknown option '%s'", name);
        default:
            if (!handle || !handle(c, name, optarg))
                usage_error("unknown option '%s'", name);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (co->same_counts && !large_given)
        co->iters_large = co->iters;
    if (co->same_counts && !warmup_large_given)
        co->warmup_large = co->warmup;
}

void require_ranks(int n)
{
    if (nranks != n)
        bench_die(EXIT_USAGE, "invalid rank count",
                  "this benchmark needs exactly %d MPI processes, got %d", n, nranks);
}

void print_header(const char *benchmark, const char *description, const struct common_opts *co,
                  int show_iterations)
{
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len;
    MPI_Get_processor_name(name, &len);
    char *all = rank == 0 ? malloc((size_t)nranks * MPI_MAX_PROCESSOR_NAME) : NULL;
    if (rank == 0 && !all)
        fatal("out of memory");
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    if (rank != 0)
        return;

    char lib[MPI_MAX_LIBRARY_VERSION_STRING], date[32];
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\r\n")] = '\0';
    utc_date(date, sizeof date);

    int distinct = 0;
    for (int i = 0; i < nranks; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(all + (size_t)i * MPI_MAX_PROCESSOR_NAME,
                          all + (size_t)j * MPI_MAX_PROCESSOR_NAME) == 0;
        distinct += !seen;
    }

    printf("# ibrepro-bench %s %s\n", benchmark, BENCH_VERSION);
    print_kv("description", "%s", description);
    print_kv("mpi_library", "%s", lib);
    print_kv("ranks", "%d", nranks);
    printf("# hosts:");
    for (int i = 0; i < nranks; i++)
        printf(" %s", all + (size_t)i * MPI_MAX_PROCESSOR_NAME);
    putchar('\n');
    print_kv("placement", "%s", distinct == 1 ? "intra-node"
                                 : distinct == nranks ? "inter-node" : "mixed");
    print_kv("date", "%s", date);
    if (co) {
        print_kv("sizes", "%zu:%zu", co->min_size, co->max_size);
        if (show_iterations) {
            print_kv("iterations", "%ld", co->iters);
            print_kv("warmup", "%ld", co->warmup);
            print_kv("large_message", "%d", LARGE_MESSAGE);
            print_kv("iterations_large", "%ld", co->iters_large);
            print_kv("warmup_large", "%ld", co->warmup_large);
        }
    }
    free(all);
    fflush(stdout);
}

void print_table(const char *name, const char *columns)
{
    if (rank == 0) {
        print_kv("table", "%s", name);
        printf("%s\n", columns);
        fflush(stdout);
    }
}

void finish(void)
{
    if (rank == 0) {
        printf("# done\n");
        fflush(stdout);
    }
    MPI_Finalize();
}

long iterations_for(const struct common_opts *co, size_t size)
{
    return size > LARGE_MESSAGE ? co->iters_large : co->iters;
}

long warmup_for(const struct common_opts *co, size_t size)
{
    return size > LARGE_MESSAGE ? co->warmup_large : co->warmup;
}

double timer_cost_s(void)
{
    double best = 1.0;
    for (int rep = 0; rep < 5; rep++) {
        const int n = 10000;
        double t0 = now_s(), t = t0;
        for (int i = 0; i < n; i++)
            t = now_s();
        double per = (t - t0) / n;
        if (per < best)
            best = per;
    }
    return best;
}
