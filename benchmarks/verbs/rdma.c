/* ibrepro_rdma: verbs-level benchmarks of papers 000/003 (Sec. IV.B) and 004 (multi-pair).
 * Options, the pair processes, and the output; see README.md. */
#include "rdma.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void help(void)
{
    printf(
        "Usage: %s [options]                       server: waits for one client session\n"
        "       %s [options] HOST[,HOST...]        client: one server address per port\n\n"
        "RDMA write/read latency and RDMA write bandwidth over RC queue pairs connected with\n"
        "RDMA CM (InfiniBand, RoCE, soft-RoCE), after papers 000/003 Sec. IV.B and 004:\n"
        "  --test lat: ping-pong of RDMA writes, each side polls the last byte of its buffer\n"
        "              (lat = round trip / 2); --op read: RDMA reads polled on the CQ\n"
        "  --test bw:  W RDMA writes, each followed by a send/recv control message, then a\n"
        "              small reply (bw = MB/s, 10^6 B/s, summed over directions and pairs)\n"
        "Several HOSTs give several channels (ports, devices): --mode stripe splits messages\n"
        "above --threshold evenly over all of them; --mode bind sends pair p's client data on\n"
        "channel p mod N and its server data on channel (p+1) mod N. --pairs N runs N client\n"
        "and N server processes (pair i on PORT+i) that start every size together.\n\n"
        "Client options (the server takes them from the client):\n"
        "  -t, --test bw|lat            (default bw)\n"
        "  -o, --op write|read          latency test operation (default write)\n"
        "  -b, --bidirectional          bw: both sides send at once\n"
        "  -M, --mode stripe|bind       use of several channels (default stripe)\n"
        "  -s, --threshold BYTES        messages above it are striped (default 8192)\n"
        "  -W, --window W               bw: messages per iteration (default 64)\n"
        "  -m, --sizes MIN:MAX          powers of two, K/M/G suffixes (default 2:8M)\n"
        "  -i, --iterations N           timed iterations up to %d B (lat 10000, bw 100)\n"
        "  -x, --warmup N               warm-up iterations up to %d B (lat 1000, bw 10)\n"
        "  -I, --iterations-large N     above %d B (lat 1000, bw: as -i)\n"
        "  -X, --warmup-large N         above %d B (lat 100, bw: as -x)\n"
        "      --inline BYTES           max inline data (lat write 220, else 0)\n"
        "      --source ADDR[,ADDR...]  local address per channel\n"
        "Client and server options:\n"
        "  -P, --pairs N                concurrent pairs of processes (default 1; same on both)\n"
        "  -p, --port PORT              RDMA CM port of pair 0 (default 18620)\n"
        "  -T, --timeout SEC            give up on a silent peer after SEC s (default 60)\n"
        "      --bind ADDR              server: listen on ADDR only (default all)\n"
        "  -h, --help                   this help\n"
        "  -V, --version                print the version\n\n"
        "Errors on stderr: '%s: <kind>: ...' with <kind> 'invalid option' (exit 2),\n"
        "'no RDMA device found' (exit 3), 'timeout' (exit 4), 'error' (exit 1).\n",
        bench_prog, bench_prog, LARGE_MESSAGE, LARGE_MESSAGE, LARGE_MESSAGE, LARGE_MESSAGE,
        bench_prog);
}

enum { OPT_INLINE = 1000, OPT_SOURCE, OPT_BIND };

static int split(char *list, const char **out, const char *opt)
{
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == MAX_CHAN)
            usage_error("%s: at most %d addresses", opt, MAX_CHAN);
        out[n++] = tok;
    }
    if (n == 0)
        usage_error("%s: no address given", opt);
    return n;
}

static void parse(int argc, char **argv, struct config *cfg)
{
    static const struct option longopts[] = {
        {"test", required_argument, 0, 't'}, {"op", required_argument, 0, 'o'},
        {"bidirectional", no_argument, 0, 'b'}, {"mode", required_argument, 0, 'M'},
        {"threshold", required_argument, 0, 's'}, {"window", required_argument, 0, 'W'},
        {"sizes", required_argument, 0, 'm'}, {"iterations", required_argument, 0, 'i'},
        {"warmup", required_argument, 0, 'x'}, {"iterations-large", required_argument, 0, 'I'},
        {"warmup-large", required_argument, 0, 'X'}, {"inline", required_argument, 0, OPT_INLINE},
        {"source", required_argument, 0, OPT_SOURCE}, {"pairs", required_argument, 0, 'P'},
        {"port", required_argument, 0, 'p'}, {"timeout", required_argument, 0, 'T'},
        {"bind", required_argument, 0, OPT_BIND}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    const char *client_only = NULL;
    int c, longindex = -1;
    long iters = -1, warmup = -1, iters_large = -1, warmup_large = -1, inl = -1;
    char *sources = NULL;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":t:o:bM:s:W:m:i:x:I:X:P:p:T:hV", longopts,
                            &longindex)) != -1) {
        const char *name = c == ':' || c == '?' ? argv[optind - 1]
                                                : option_name(c, longopts, longindex);
        longindex = -1;
        if (strchr("tobMsWmixIX", c) || c == OPT_INLINE || c == OPT_SOURCE)
            client_only = name;
        switch (c) {
        case 't':
            if (!strcmp(optarg, "bw")) cfg->test = TEST_BW;
            else if (!strcmp(optarg, "lat")) cfg->test = TEST_LAT;
            else usage_error("--test must be bw or lat, got '%s'", optarg);
            break;
        case 'o':
            if (!strcmp(optarg, "write")) cfg->op = OP_WRITE;
            else if (!strcmp(optarg, "read")) cfg->op = OP_READ;
            else usage_error("--op must be write or read, got '%s'", optarg);
            break;
        case 'b': cfg->bidir = 1; break;
        case 'M':
            if (!strcmp(optarg, "stripe")) cfg->striping = 1;
            else if (!strcmp(optarg, "bind")) cfg->striping = 0;
            else usage_error("--mode must be stripe or bind, got '%s'", optarg);
            break;
        case 's': cfg->threshold = parse_size(name, optarg); break;
        case 'W': cfg->window = parse_long(name, optarg, 1, 4096); break;
        case 'm': parse_size_range(name, optarg, &cfg->min_size, &cfg->max_size); break;
        case 'i': iters = parse_long(name, optarg, 1, 100000000); break;
        case 'x': warmup = parse_long(name, optarg, 0, 100000000); break;
        case 'I': iters_large = parse_long(name, optarg, 1, 100000000); break;
        case 'X': warmup_large = parse_long(name, optarg, 0, 100000000); break;
        case OPT_INLINE: inl = parse_long(name, optarg, 0, 1024); break;
        case OPT_SOURCE: sources = optarg; break;
        case 'P': cfg->pairs = (int)parse_long(name, optarg, 1, MAX_PAIRS); break;
        case 'p': cfg->port = (int)parse_long(name, optarg, 1, 65535); break;
        case 'T': cfg->timeout = parse_double(name, optarg, 1, 86400); break;
        case OPT_BIND: cfg->bind_addr = optarg; break;
        case 'h': help(); exit(0);
        case 'V': printf("%s (ibrepro-bench) %s\n", bench_prog, BENCH_VERSION); exit(0);
        case ':': usage_error("%s needs a value", name);
        default:
            if (optopt)
                usage_error("unknown option '-%c'", optopt);
            usage_error("unknown option '%s'", name);
        }
    }
    if (optind + 1 < argc)
        usage_error("unexpected argument '%s' (give the server addresses as one comma-separated "
                    "list)", argv[optind + 1]);

    cfg->is_server = optind == argc;
    if (cfg->is_server) {
        if (client_only)
            usage_error("%s is a client option: the server takes the test parameters from the "
                        "client", client_only);
        return;
    }
    if (cfg->bind_addr)
        usage_error("--bind is a server option");
    cfg->nchan = split(argv[optind], cfg->servers, "server list");
    if (sources && split(sources, cfg->sources, "--source") != cfg->nchan)
        usage_error("--source needs one address per server address (%d)", cfg->nchan);

    int lat = cfg->test == TEST_LAT;
    if (lat && cfg->nchan > 1)
        usage_error("--test lat uses one port: give one server address (striping and binding "
                    "apply to --test bw)");
    if (!lat && cfg->op == OP_READ)
        usage_error("--op read applies to --test lat only");
    if (lat && cfg->bidir)
        usage_error("--bidirectional applies to --test bw only");
    if (cfg->min_size < 1)
        usage_error("--sizes: messages have at least 1 byte");
    if (first_size(cfg->min_size) > cfg->max_size)
        usage_error("--sizes: no power of two between %zu and %zu", cfg->min_size, cfg->max_size);
    if (cfg->threshold < 1)
        usage_error("--threshold must be at least 1 byte");
    if (cfg->port + cfg->pairs - 1 > 65535)
        usage_error("--port %d + %d pairs is beyond port 65535", cfg->port, cfg->pairs);

    cfg->iters = iters > 0 ? iters : lat ? 10000 : 100;
    cfg->warmup = warmup >= 0 ? warmup : lat ? 1000 : 10;
    /* latency: fewer iterations above 8 KiB (as OSU); bandwidth: the same counts everywhere */
    cfg->iters_large = iters_large > 0 ? iters_large : lat ? 1000 : cfg->iters;
    cfg->warmup_large = warmup_large >= 0 ? warmup_large : lat ? 100 : cfg->warmup;
    cfg->inline_size = inl >= 0 ? (int)inl : lat && cfg->op == OP_WRITE ? 220 : 0;
}

static const char *benchmark_name(const struct config *cfg)
{
    if (cfg->test == TEST_BW)
        return "rdma_write_bw";
    return cfg->op == OP_READ ? "rdma_read_lat" : "rdma_write_lat";
}

static void print_header(const struct config *cfg)
{
    char date[32], host[256] = "";
    utc_date(date, sizeof date);
    gethostname(host, sizeof host - 1);
    const char *name = cfg->is_server ? "rdma_server" : benchmark_name(cfg);
    printf("# ibrepro-bench %s %s\n", name, BENCH_VERSION);
    print_kv("role", "%s", cfg->is_server ? "server" : "client");
    print_kv("host", "%s", host);
    print_kv("date", "%s", date);
    print_kv("port", "%d", cfg->port);
    print_kv("pairs", "%d", cfg->pairs);
    if (cfg->is_server) {
        print_kv("description", "RDMA benchmark server: the client prints the results");
        fflush(stdout);
        return;
    }
    print_kv("description", "%s", cfg->test == TEST_BW
             ? "RDMA write bandwidth: W writes, each followed by a send/recv control message, "
               "then a small reply (003 Sec. IV.B.2-3); bw summed over directions and pairs"
             : cfg->op == OP_READ
             ? "RDMA read latency: the initiator polls the CQ (003 Sec. IV.B.1); lat per read"
             : "RDMA write latency: ping-pong, polling the last byte (003 Sec. IV.B.1); "
               "lat = round trip / 2");
    print_kv("units", "%s", cfg->test == TEST_BW
             ? "MB/s = 10^6 B/s and msg/s, summed over directions and pairs (all pairs start "
               "each size together; time of the slowest)"
             : "us = 10^-6 s, mean of the pairs (lat) and the slowest pair (lat_max)");
    printf("# servers: ");
    for (int c = 0; c < cfg->nchan; c++)
        printf("%s%s", c ? "," : "", cfg->servers[c]);
    putchar('\n');
    print_kv("channels", "%d", cfg->nchan);
    if (cfg->test == TEST_BW) {
        print_kv("mode", "%s", cfg->nchan == 1 ? "single" : cfg->striping ? "stripe" : "bind");
        print_kv("threshold", "%zu", cfg->threshold);
        print_kv("direction", "%s", cfg->bidir ? "bi" : "uni");
        print_kv("window", "%ld", cfg->window);
    }
    print_kv("sizes", "%zu:%zu", cfg->min_size, cfg->max_size);
    print_kv("iterations", "%ld", cfg->iters);
    print_kv("warmup", "%ld", cfg->warmup);
    print_kv("large_message", "%d", LARGE_MESSAGE);
    print_kv("iterations_large", "%ld", cfg->iters_large);
    print_kv("warmup_large", "%ld", cfg->warmup_large);
    print_kv("timeout_s", "%g", cfg->timeout);
    fflush(stdout);
}

static void require_device(void)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n == 0) {
        if (list)
            ibv_free_device_list(list);
        bench_die(EXIT_NODEV, "no RDMA device found",
                  "libibverbs lists no device (no InfiniBand/RoCE adapter or soft-RoCE link; "
                  "see 'rdma link' and 'ibv_devices')");
    }
    ibv_free_device_list(list);
}

static void run_pair(struct config *cfg, struct shared *sh, int index)
{
    struct pair p = {.cfg = cfg, .index = index};
    prctl(PR_SET_PDEATHSIG, SIGTERM);  /* do not outlive a killed parent */
    if (cfg->is_server) {
        server_accept(&p);
        server_loop(&p);
    } else {
        client_connect(&p);
        client_sizes(&p, sh);
    }
    pair_close(&p);
    exit(0);
}

/* Client: one table row per size once every pair has measured it. */
static int print_rows(const struct config *cfg, struct shared *sh, int printed, int *header)
{
    if (!*header) {
        for (int i = 0; i < cfg->pairs; i++)
            if (!atomic_load(&sh->setup[i]))
                return printed;
        printf("# devices:");
        for (int c = 0; c < cfg->nchan; c++)
            printf(" %s", sh->devices[c]);
        printf("\n# inline: %d\n", sh->inline_used);
        print_kv("table", "%s", benchmark_name(cfg));
        printf(cfg->test == TEST_BW ? "bytes bw[MB/s] msgrate[msg/s]\n"
                                    : "bytes lat[us] lat_max[us]\n");
        *header = 1;
    }
    int ready = MAX_SIZES;
    for (int i = 0; i < cfg->pairs; i++) {
        int d = atomic_load(&sh->sizes_done[i]);
        ready = d < ready ? d : ready;
    }
    size_t size = first_size(cfg->min_size);
    for (int k = 0; k < printed; k++)
        size = next_size(size);
    for (; printed < ready; printed++, size = next_size(size)) {
        long iters = size > LARGE_MESSAGE ? cfg->iters_large : cfg->iters;
        double sum = 0, max = 0;
        for (int i = 0; i < cfg->pairs; i++) {
            double v = sh->value[i][printed];
            sum += v;
            max = v > max ? v : max;
        }
        if (cfg->test == TEST_BW) {
            /* all pairs start together: aggregate = all messages / the slowest pair's time */
            double msgs = (double)cfg->pairs * (double)cfg->window * (double)iters *
                          (cfg->bidir ? 2.0 : 1.0);
            printf("%-10zu %12.3f %14.0f\n", size, msgs * (double)size / max / 1e6, msgs / max);
        } else {
            printf("%-10zu %10.2f %10.2f\n", size, sum / cfg->pairs, max);
        }
    }
    fflush(stdout);
    return printed;
}

int main(int argc, char **argv)
{
    const char *slash = strrchr(argv[0], '/');
    bench_prog = slash ? slash + 1 : argv[0];
    struct config cfg = {.test = TEST_BW, .op = OP_WRITE, .striping = 1, .pairs = 1,
                         .min_size = 2, .max_size = 8u << 20, .threshold = 8192, .window = 64,
                         .port = 18620, .timeout = 60};
    parse(argc, argv, &cfg);
    require_device();

    size_t nsizes = 0;
    for (size_t s = first_size(cfg.min_size); s <= cfg.max_size; s = next_size(s))
        nsizes++;
    if (!cfg.is_server && nsizes > MAX_SIZES)
        usage_error("--sizes: at most %d sizes", MAX_SIZES);

    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        fatal("mmap of the shared results failed: %s", strerror(errno));
    memset(sh, 0, sizeof *sh);
    print_header(&cfg);

    pid_t pids[MAX_PAIRS];
    for (int i = 0; i < cfg.pairs; i++) {
        fflush(NULL);
        pids[i] = fork();
        if (pids[i] < 0)
            fatal("fork: %s", strerror(errno));
        if (pids[i] == 0)
            run_pair(&cfg, sh, i);
    }

    int running = cfg.pairs, status_code = 0, printed = 0, header = 0;
    while (running > 0) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid > 0) {
            running--;
            int code = WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_ERROR;
            if (!WIFEXITED(st))
                fprintf(stderr, "%s: error: a pair process was killed by signal %d\n",
                        bench_prog, WTERMSIG(st));
            if (code && !status_code) {
                status_code = code;  /* the first failure is the cause, later ones follow */
                atomic_store(&sh->failed, 1);
            }
            continue;
        }
        if (!cfg.is_server)
            printed = print_rows(&cfg, sh, printed, &header);
        usleep(2000);
    }
    if (!cfg.is_server)
        printed = print_rows(&cfg, sh, printed, &header);
    if (status_code == 0 && (cfg.is_server || printed == (int)nsizes))
        printf("# done\n");
    fflush(stdout);
    return status_code;
}
