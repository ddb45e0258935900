/* The measurement loops (003 Sec. IV.B) and the per-size protocol of one pair.
 *
 * Per size the client sends START (size, iterations) on channel 0, the server clears its
 * buffers and answers READY, then both run the test; FINISH ends the session.
 *   write latency: ping-pong of RDMA writes; each side polls the last byte of its receive
 *                  buffer for the iteration's mark (003: "the receiver polls on the last byte")
 *   read latency:  the client issues RDMA reads of the server's buffer and polls the CQ
 *   write bw:      per iteration the sender posts W messages, each as one RDMA write per
 *                  stripe followed by a send/recv control message (DONE) on that stripe's
 *                  port; the receiver polls its CQ until it has every DONE of the window, then
 *                  replies with a small ACK (003: W = 64, 10 warm-up + 100 timed iterations).
 *                  Bi-directional: both sides send and receive at once. */
#include "rdma.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Spin on memory (no CQ polling in the fast path); check CQ errors and the deadline now and
 * then. */
#define SPIN_UNTIL(p, cond, what)                                                            \
    do {                                                                                     \
        double spin_deadline_ = now_s() + (p)->cfg->timeout;                                 \
        unsigned spin_count_ = 0;                                                            \
        while (!(cond)) {                                                                    \
            if ((++spin_count_ & 0xffffu) == 0) {                                            \
                progress(p);                                                                 \
                if (now_s() > spin_deadline_)                                                \
                    pair_fail(p, EXIT_TIMEOUT, "timeout",                                    \
                              "no answer from the peer within %g s (%s)", (p)->cfg->timeout, \
                              what);                                                         \
            }                                                                                \
        }                                                                                    \
    } while (0)

static int idle(const struct pair *p)
{
    for (int c = 0; c < p->nchan; c++)
        if (p->ch[c].outstanding)
            return 0;
    return 1;
}

/* Send a command and wait until the send buffer is free again. */
static void send_cmd(struct pair *p, int c, struct ctrl_msg msg)
{
    post_ctrl(p, c, SLOT_CMD, &msg);
    WAIT_UNTIL(p, p->ch[c].outstanding == 0, "sending a control message");
}

static void exchange_buffers(struct pair *p, int server)
{
    for (int pass = 0; pass < 2; pass++) {
        if (pass == server) {  /* the client sends first, the server answers */
            for (int c = 0; c < p->nchan; c++)
                send_cmd(p, c, (struct ctrl_msg){.type = MSG_BUF, .chan = (uint32_t)c,
                                                 .addr = (uintptr_t)p->data,
                                                 .rkey = p->ch[c].data_mr->rkey});
        } else {
            for (int c = 0; c < p->nchan; c++) {
                struct ctrl_msg m = expect_msg(p, c, MSG_BUF, "exchanging buffer addresses");
                p->ch[c].remote_addr = m.addr;
                p->ch[c].remote_rkey = m.rkey;
            }
        }
    }
}

static void write_lat(struct pair *p, size_t size, long total, long skip, int server,
                      double *t0)
{
    size_t max = p->cfg->max_size;
    volatile uint8_t *in = (volatile uint8_t *)p->data + max + size - 1;
    uint8_t *out = (uint8_t *)p->data + size - 1;
    for (long i = 0; i < total; i++) {
        uint8_t mark = (uint8_t)(i % 255 + 1);
        if (i == skip)
            *t0 = now_s();
        if (server)
            SPIN_UNTIL(p, *in == mark, "RDMA write ping-pong");
        *out = mark;
        post_write(p, 0, 0, max, size, 1);
        if (!server)
            SPIN_UNTIL(p, *in == mark, "RDMA write ping-pong");
        WAIT_UNTIL(p, p->ch[0].outstanding == 0, "RDMA write completion");
    }
}

static void read_lat(struct pair *p, size_t size, long total, long skip, double *t0)
{
    for (long i = 0; i < total; i++) {
        if (i == skip)
            *t0 = now_s();
        post_read(p, 0, p->cfg->max_size, 0, size);
        WAIT_UNTIL(p, p->ch[0].outstanding == 0, "RDMA read completion");
    }
}

static void write_bw(struct pair *p, size_t size, long total, long skip, int server, double *t0)
{
    const struct config *cfg = p->cfg;
    int sender = !server || cfg->bidir, receiver = server || cfg->bidir;
    int my_chan = cfg->striping ? 0 : bind_channel(p->index, p->nchan, server);
    int peer_chan = cfg->striping ? 0 : bind_channel(p->index, p->nchan, !server);
    struct stripe plan[MAX_CHAN], peer_plan[MAX_CHAN];
    int nst = stripe_plan(size, cfg->threshold, p->nchan, cfg->striping, my_chan, plan);
    int peer_nst = stripe_plan(size, cfg->threshold, p->nchan, cfg->striping, peer_chan,
                               peer_plan);
    /* counted from the start of the size: the peer's first messages may have been polled
     * already while this side waited for START or READY to complete */
    uint64_t done_target = p->done_base, ack_target = p->ack_base;

    for (long it = 0; it < total; it++) {
        if (it == skip)
            *t0 = now_s();
        if (sender)
            for (long w = 0; w < cfg->window; w++)
                for (int s = 0; s < nst; s++) {
                    post_write(p, plan[s].chan, plan[s].offset, cfg->max_size + plan[s].offset,
                               plan[s].length, 0);
                    post_ctrl(p, plan[s].chan, SLOT_DONE, NULL);
                }
        if (receiver) {
            done_target += (uint64_t)(cfg->window * peer_nst);
            WAIT_UNTIL(p, p->done_recv >= done_target, "receiving a window of messages");
        }
        WAIT_UNTIL(p, idle(p), "completing the sends");
        if (receiver)
            post_ctrl(p, my_chan, SLOT_ACK, NULL);
        if (sender) {
            ack_target++;
            WAIT_UNTIL(p, p->ack_recv >= ack_target, "waiting for the reply to a window");
        }
    }
    WAIT_UNTIL(p, idle(p), "completing the sends");
}

/* One size on either side; returns the elapsed time of the timed iterations (client). */
static double run_size(struct pair *p, size_t size, long iters, long skip, int server)
{
    double t0 = 0;
    long total = iters + skip;
    if (p->cfg->test == TEST_LAT && p->cfg->op == OP_WRITE)
        write_lat(p, size, total, skip, server, &t0);
    else if (p->cfg->test == TEST_LAT && !server)
        read_lat(p, size, total, skip, &t0);
    else if (p->cfg->test == TEST_BW)
        write_bw(p, size, total, skip, server, &t0);
    return now_s() - t0;
}

static void clear(struct pair *p, size_t size)
{
    memset(p->data, 0, size);
    memset(p->data + p->cfg->max_size, 0, size);
}

/* Client pairs start every size together. */
static void barrier(struct pair *p, struct shared *sh)
{
    int n = p->cfg->pairs;
    if (n == 1)
        return;
    int gen = atomic_load(&sh->generation);
    if (atomic_fetch_add(&sh->arrived, 1) + 1 == n) {
        atomic_store(&sh->arrived, 0);
        atomic_fetch_add(&sh->generation, 1);
        return;
    }
    double deadline = now_s() + p->cfg->timeout;
    while (atomic_load(&sh->generation) == gen) {
        if (atomic_load(&sh->failed))
            exit(EXIT_ERROR);  /* the parent reports the pair that failed */
        if (now_s() > deadline)
            pair_fail(p, EXIT_TIMEOUT, "timeout", "the other pairs did not start the next size "
                      "within %g s", p->cfg->timeout);
        usleep(50);
    }
}

void client_sizes(struct pair *p, struct shared *sh)
{
    const struct config *cfg = p->cfg;
    register_data(p);
    send_cmd(p, 0, (struct ctrl_msg){.type = MSG_PARAMS, .max_size = cfg->max_size,
                                     .threshold = cfg->threshold, .op = (uint32_t)cfg->op,
                                     .bidir = (uint32_t)cfg->bidir,
                                     .striping = (uint32_t)cfg->striping,
                                     .pairs = (uint32_t)cfg->pairs});
    exchange_buffers(p, 0);
    if (p->index == 0) {
        for (int c = 0; c < p->nchan; c++)
            snprintf(sh->devices[c], sizeof sh->devices[c], "%s:%d", p->ch[c].device,
                     p->ch[c].port_num);
        sh->inline_used = p->inline_used;
    }
    atomic_store(&sh->setup[p->index], 1);

    int k = 0;
    for (size_t size = first_size(cfg->min_size); size <= cfg->max_size; size = next_size(size)) {
        long iters = size > LARGE_MESSAGE ? cfg->iters_large : cfg->iters;
        long skip = size > LARGE_MESSAGE ? cfg->warmup_large : cfg->warmup;
        barrier(p, sh);
        clear(p, size);
        p->done_base = p->done_recv;
        p->ack_base = p->ack_recv;
        send_cmd(p, 0, (struct ctrl_msg){.type = MSG_START, .size = size,
                                         .iters = (uint64_t)iters, .warmup = (uint64_t)skip});
        expect_msg(p, 0, MSG_READY, "waiting for the server to start a size");
        double elapsed = run_size(p, size, iters, skip, 0);
        sh->value[p->index][k] = cfg->test == TEST_LAT
            ? elapsed / (double)iters * 1e6 / (cfg->op == OP_WRITE ? 2.0 : 1.0)
            : elapsed;
        atomic_store(&sh->sizes_done[p->index], ++k);
    }
    send_cmd(p, 0, (struct ctrl_msg){.type = MSG_FINISH});
}

void server_loop(struct pair *p)
{
    struct config *cfg = p->cfg;
    struct ctrl_msg m = expect_msg(p, 0, MSG_PARAMS, "waiting for the client's parameters");
    if ((int)m.pairs != cfg->pairs)
        pair_fail(p, EXIT_USAGE, "invalid option", "the client runs %u pairs, this server %d: "
                  "give both the same --pairs", m.pairs, cfg->pairs);
    cfg->max_size = m.max_size;
    cfg->threshold = m.threshold;
    cfg->op = (enum op)m.op;
    cfg->bidir = (int)m.bidir;
    cfg->striping = (int)m.striping;
    register_data(p);
    exchange_buffers(p, 1);

    for (;;) {
        m = next_msg(p, 0, "waiting for the client's next size");
        if (m.type == MSG_FINISH)
            return;
        if (m.type != MSG_START || m.size < 1 || m.size > cfg->max_size)
            pair_fail(p, EXIT_ERROR, "error", "protocol: unexpected message %u", m.type);
        clear(p, m.size);
        p->done_base = p->done_recv;
        p->ack_base = p->ack_recv;
        send_cmd(p, 0, (struct ctrl_msg){.type = MSG_READY});
        run_size(p, m.size, (long)m.iters, (long)m.warmup, 1);
    }
}
