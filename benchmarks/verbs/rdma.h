/* ibrepro_rdma: RDMA write/read latency and RDMA write bandwidth over one or several ports,
 * with striping or binding, for one or several concurrent pairs of processes.
 * rdma.c: options, processes, output; conn.c: RDMA CM connections and verbs resources;
 * tests.c: the measurement loops. See README.md for the method and the output. */
#ifndef IBREPRO_RDMA_H
#define IBREPRO_RDMA_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../common/algo.h"
#include "../common/bench.h"

#define MAX_CHAN 8       /* ports (server addresses) */
#define MAX_PAIRS 64     /* concurrent pairs of processes */
#define MAX_SIZES 40
#define INBOX 8          /* command messages a channel can hold (a few are ever in flight) */
#define PROTO_MAGIC 0x49425242u  /* "IBRB" */
#define PROTO_VERSION 1u

enum test { TEST_BW, TEST_LAT };
enum op { OP_WRITE, OP_READ };

struct config {
    int is_server;
    enum test test;
    enum op op;
    int bidir, striping;
    int nchan, pairs;
    size_t min_size, max_size, threshold;
    long iters, warmup, iters_large, warmup_large, window;
    int inline_size;                     /* requested max inline data */
    const char *servers[MAX_CHAN];       /* client: one server address per channel */
    const char *sources[MAX_CHAN];       /* client: optional local address per channel */
    const char *bind_addr;               /* server: listen address (NULL: all) */
    int port;                            /* pair i uses port + i */
    double timeout;                      /* seconds without an answer from the peer */
};

/* Connection request private data (client -> server): what the server needs to size its QPs. */
struct conn_req {
    uint32_t magic, version, pair, pairs, chan, nchan, test, window, inline_size;
};

enum msg_type { MSG_PARAMS = 1, MSG_BUF, MSG_START, MSG_READY, MSG_DONE, MSG_ACK, MSG_FINISH };

/* Control message (send/recv), host byte order: both ends are checked to agree via magic. */
struct ctrl_msg {
    uint32_t magic, type;
    uint64_t addr;                       /* MSG_BUF: data region of this channel */
    uint32_t rkey, chan;
    uint64_t size, iters, warmup;        /* MSG_START */
    uint64_t max_size, threshold;        /* MSG_PARAMS */
    uint32_t op, bidir, striping, pairs;
};

enum { SLOT_DONE, SLOT_ACK, SLOT_CMD, SEND_SLOTS };

struct channel {
    struct rdma_cm_id *id;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *ctrl_mr, *data_mr;
    struct ctrl_msg *ctrl;               /* recv slots [0, nrecv), then SEND_SLOTS send slots */
    int nrecv, sq_depth;
    int connected;
    long outstanding;                    /* signaled sends not yet completed */
    uint64_t remote_addr;                /* peer's data region on this channel */
    uint32_t remote_rkey;
    struct ctrl_msg inbox[INBOX];        /* command messages received, not yet taken */
    int inbox_head, inbox_count;
    char device[64];
    int port_num;
};

struct pair {
    struct config *cfg;
    int index;
    struct rdma_event_channel *ec;
    struct rdma_cm_id *listen_id;
    struct channel ch[MAX_CHAN];
    int nchan;
    char *data;                          /* send buffer [0, max), receive buffer [max, 2 max) */
    uint64_t done_recv, ack_recv;        /* DONE and ACK messages received so far */
    uint64_t done_base, ack_base;        /* their values when the current size started */
    int inline_used;
};

/* What the pair processes share with the parent (an anonymous shared mapping). */
struct shared {
    atomic_int arrived, generation;      /* barrier of the client pairs */
    atomic_int failed;                   /* set by the parent when a pair process failed */
    atomic_int setup[MAX_PAIRS];         /* pair connected and parameters exchanged */
    atomic_int sizes_done[MAX_PAIRS];
    double value[MAX_PAIRS][MAX_SIZES];  /* latency (us) or bytes per second */
    char devices[MAX_CHAN][80];          /* pair 0: "<device>:<port>" per channel */
    int inline_used;
};

/* conn.c */
void pair_fail(struct pair *p, int code, const char *kind, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));
void client_connect(struct pair *p);
void server_accept(struct pair *p);
void register_data(struct pair *p);
void pair_close(struct pair *p);
void progress(struct pair *p);
void post_write(struct pair *p, int c, size_t local_off, size_t remote_off, size_t len,
                int signaled);
void post_read(struct pair *p, int c, size_t local_off, size_t remote_off, size_t len);
/* Send slot's message; msg (SLOT_CMD only) is copied into the slot first. */
void post_ctrl(struct pair *p, int c, int slot, const struct ctrl_msg *msg);
struct ctrl_msg next_msg(struct pair *p, int c, const char *what);  /* waits for one */
struct ctrl_msg expect_msg(struct pair *p, int c, enum msg_type type, const char *what);

/* Spin until cond holds, polling the completion queues; time out after cfg->timeout. */
#define WAIT_UNTIL(p, cond, what)                                                            \
    do {                                                                                     \
        double wait_deadline_ = now_s() + (p)->cfg->timeout;                                 \
        unsigned wait_spins_ = 0;                                                            \
        while (!(cond)) {                                                                    \
            progress(p);                                                                     \
            if ((++wait_spins_ & 1023u) == 0 && now_s() > wait_deadline_)                    \
                pair_fail(p, EXIT_TIMEOUT, "timeout",                                        \
                          "no answer from the peer within %g s (%s)", (p)->cfg->timeout,     \
                          what);                                                             \
        }                                                                                    \
    } while (0)

/* tests.c */
void client_sizes(struct pair *p, struct shared *sh);
void server_loop(struct pair *p);

#endif
