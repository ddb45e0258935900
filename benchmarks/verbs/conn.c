/* RDMA CM connections, verbs resources, posting and completion handling of one pair. */
#include "rdma.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ADDR_TIMEOUT_MS 2000

void pair_fail(struct pair *p, int code, const char *kind, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* the kernel releases the verbs resources of a process that exits */
    bench_die(code, kind, "%s pair %d: %s", p->cfg->is_server ? "server" : "client", p->index,
              msg);
}

static int sq_depth(const struct config *cfg, long window)
{
    return cfg->test == TEST_BW ? (int)(2 * window + 4) : 4;
}

static int rq_depth(const struct config *cfg, long window)
{
    return cfg->test == TEST_BW ? (int)(2 * window + 8) : 8;
}

static struct rdma_cm_event *get_event(struct pair *p, double deadline, const char *what)
{
    struct pollfd pfd = {.fd = p->ec->fd, .events = POLLIN};
    for (;;) {
        int ms = (int)((deadline - now_s()) * 1000.0);
        if (ms <= 0)
            pair_fail(p, EXIT_TIMEOUT, "timeout", "no answer from the peer within %g s (%s)",
                      p->cfg->timeout, what);
        int r = poll(&pfd, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            pair_fail(p, EXIT_ERROR, "error", "poll on the RDMA CM channel: %s", strerror(errno));
        if (r == 0)
            continue;  /* the deadline check above reports it */
        struct rdma_cm_event *ev;
        if (rdma_get_cm_event(p->ec, &ev))
            pair_fail(p, EXIT_ERROR, "error", "rdma_get_cm_event: %s", strerror(errno));
        return ev;
    }
}

static void post_recv(struct pair *p, struct channel *ch, int slot)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)&ch->ctrl[slot],
        .length = sizeof(struct ctrl_msg),
        .lkey = ch->ctrl_mr->lkey,
    };
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1}, *bad;
    int ret = ibv_post_recv(ch->id->qp, &wr, &bad);
    if (ret)
        pair_fail(p, EXIT_ERROR, "error", "ibv_post_recv on %s: %s", ch->device, strerror(ret));
}

/* PD, CQ, QP and control buffers for a channel whose id is bound to a device. */
static void setup_channel(struct pair *p, struct channel *ch, struct rdma_cm_id *id, long window,
                          int inline_size)
{
    const struct config *cfg = p->cfg;
    struct ibv_device_attr attr;
    int ret;

    ch->id = id;
    snprintf(ch->device, sizeof ch->device, "%s", ibv_get_device_name(id->verbs->device));
    ch->port_num = id->port_num;
    ch->sq_depth = sq_depth(cfg, window);
    ch->nrecv = rq_depth(cfg, window);

    if ((ret = ibv_query_device(id->verbs, &attr)))
        pair_fail(p, EXIT_ERROR, "error", "ibv_query_device %s: %s", ch->device, strerror(ret));
    int cqe = ch->sq_depth + ch->nrecv + 8;
    if (ch->sq_depth > attr.max_qp_wr || ch->nrecv > attr.max_qp_wr || cqe > attr.max_cqe)
        pair_fail(p, EXIT_USAGE, "invalid option",
                  "--window %ld needs %d work requests and %d completions per queue; %s allows "
                  "%d and %d", window, ch->sq_depth > ch->nrecv ? ch->sq_depth : ch->nrecv, cqe,
                  ch->device, attr.max_qp_wr, attr.max_cqe);

    if (!(ch->pd = ibv_alloc_pd(id->verbs)))
        pair_fail(p, EXIT_ERROR, "error", "ibv_alloc_pd on %s: %s", ch->device, strerror(errno));
    if (!(ch->cq = ibv_create_cq(id->verbs, cqe, NULL, NULL, 0)))
        pair_fail(p, EXIT_ERROR, "error", "ibv_create_cq on %s: %s", ch->device, strerror(errno));

    struct ibv_qp_init_attr qpa = {
        .send_cq = ch->cq,
        .recv_cq = ch->cq,
        .cap = {.max_send_wr = (uint32_t)ch->sq_depth, .max_recv_wr = (uint32_t)ch->nrecv,
                .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = (uint32_t)inline_size},
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
    };
    if (rdma_create_qp(id, ch->pd, &qpa)) {
        if (inline_size == 0)
            pair_fail(p, EXIT_ERROR, "error", "rdma_create_qp on %s: %s", ch->device,
                      strerror(errno));
        qpa.cap.max_inline_data = 0;  /* the device refused inline data: go without */
        if (rdma_create_qp(id, ch->pd, &qpa))
            pair_fail(p, EXIT_ERROR, "error", "rdma_create_qp on %s: %s", ch->device,
                      strerror(errno));
    }
    p->inline_used = (int)qpa.cap.max_inline_data < inline_size ? (int)qpa.cap.max_inline_data
                                                                : inline_size;

    size_t len = (size_t)(ch->nrecv + SEND_SLOTS) * sizeof(struct ctrl_msg);
    ch->ctrl = xalloc(len);
    if (!(ch->ctrl_mr = ibv_reg_mr(ch->pd, ch->ctrl, len, IBV_ACCESS_LOCAL_WRITE)))
        pair_fail(p, EXIT_ERROR, "error", "ibv_reg_mr (control) on %s: %s", ch->device,
                  strerror(errno));
    ch->ctrl[ch->nrecv + SLOT_DONE] = (struct ctrl_msg){.magic = PROTO_MAGIC, .type = MSG_DONE};
    ch->ctrl[ch->nrecv + SLOT_ACK] = (struct ctrl_msg){.magic = PROTO_MAGIC, .type = MSG_ACK};
    for (int s = 0; s < ch->nrecv; s++)
        post_recv(p, ch, s);
}

static void conn_param(struct rdma_conn_param *cp, const void *priv, size_t len,
                       struct ibv_context *verbs)
{
    struct ibv_device_attr attr;
    memset(cp, 0, sizeof *cp);
    cp->private_data = priv;
    cp->private_data_len = (uint8_t)len;
    cp->responder_resources = 1;
    cp->initiator_depth = 1;
    if (ibv_query_device(verbs, &attr) == 0) {  /* checked in setup_channel already */
        cp->responder_resources = (uint8_t)(attr.max_qp_rd_atom < 16 ? attr.max_qp_rd_atom : 16);
        cp->initiator_depth = (uint8_t)(attr.max_qp_init_rd_atom < 16 ? attr.max_qp_init_rd_atom
                                                                       : 16);
    }
    cp->retry_count = 7;
    cp->rnr_retry_count = 7;  /* 7 = retry for ever: receives are reposted at once */
}

static void destroy_channel(struct channel *ch)
{
    /* teardown order: QP, memory regions, CQ, PD, id */
    if (ch->id && ch->id->qp)
        rdma_destroy_qp(ch->id);
    if (ch->data_mr && ibv_dereg_mr(ch->data_mr))
        fprintf(stderr, "%s: warning: ibv_dereg_mr (data) on %s failed\n", bench_prog, ch->device);
    if (ch->ctrl_mr && ibv_dereg_mr(ch->ctrl_mr))
        fprintf(stderr, "%s: warning: ibv_dereg_mr (control) on %s failed\n", bench_prog,
                ch->device);
    if (ch->cq && ibv_destroy_cq(ch->cq))
        fprintf(stderr, "%s: warning: ibv_destroy_cq on %s failed\n", bench_prog, ch->device);
    if (ch->pd && ibv_dealloc_pd(ch->pd))
        fprintf(stderr, "%s: warning: ibv_dealloc_pd on %s failed\n", bench_prog, ch->device);
    if (ch->id && rdma_destroy_id(ch->id))
        fprintf(stderr, "%s: warning: rdma_destroy_id failed\n", bench_prog);
    free(ch->ctrl);
    memset(ch, 0, sizeof *ch);
}

static struct addrinfo *lookup(struct pair *p, const char *host, int port)
{
    char service[16];
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    snprintf(service, sizeof service, "%d", port);
    int ret = getaddrinfo(host, service, &hints, &res);
    if (ret)
        pair_fail(p, EXIT_USAGE, "invalid option", "cannot resolve '%s': %s", host,
                  gai_strerror(ret));
    return res;
}

static void expect_event(struct pair *p, struct rdma_cm_id *id, enum rdma_cm_event_type want,
                         double deadline, const char *what)
{
    struct rdma_cm_event *ev = get_event(p, deadline, what);
    enum rdma_cm_event_type got = ev->event;
    int status = ev->status;
    struct rdma_cm_id *from = ev->id;
    if (rdma_ack_cm_event(ev))
        pair_fail(p, EXIT_ERROR, "error", "rdma_ack_cm_event: %s", strerror(errno));
    if (got != want || from != id)
        pair_fail(p, EXIT_ERROR, "error", "%s: got RDMA CM event %s (status %d)", what,
                  rdma_event_str(got), status);
}

/* One attempt to connect channel c; 0 on success, -1 if the server is not (yet) there. */
static int try_connect(struct pair *p, int c, double deadline)
{
    const struct config *cfg = p->cfg;
    struct channel *ch = &p->ch[c];
    struct rdma_cm_id *id;
    char what[160];

    if (rdma_create_id(p->ec, &id, NULL, RDMA_PS_TCP))
        pair_fail(p, EXIT_ERROR, "error", "rdma_create_id: %s", strerror(errno));

    struct addrinfo *dst = lookup(p, cfg->servers[c], cfg->port + p->index);
    struct addrinfo *src = cfg->sources[c] ? lookup(p, cfg->sources[c], 0) : NULL;
    snprintf(what, sizeof what, "resolving %s", cfg->servers[c]);
    if (rdma_resolve_addr(id, src ? src->ai_addr : NULL, dst->ai_addr, ADDR_TIMEOUT_MS))
        pair_fail(p, EXIT_ERROR, "error", "rdma_resolve_addr %s: %s", cfg->servers[c],
                  strerror(errno));
    freeaddrinfo(dst);
    if (src)
        freeaddrinfo(src);

    struct rdma_cm_event *ev = get_event(p, deadline, what);
    enum rdma_cm_event_type got = ev->event;
    if (rdma_ack_cm_event(ev))
        pair_fail(p, EXIT_ERROR, "error", "rdma_ack_cm_event: %s", strerror(errno));
    if (got != RDMA_CM_EVENT_ADDR_RESOLVED)
        pair_fail(p, EXIT_ERROR, "error", "cannot reach %s through an RDMA device (%s): is the "
                  "address on an RDMA-capable interface?", cfg->servers[c], rdma_event_str(got));
    if (rdma_resolve_route(id, ADDR_TIMEOUT_MS))
        pair_fail(p, EXIT_ERROR, "error", "rdma_resolve_route %s: %s", cfg->servers[c],
                  strerror(errno));
    snprintf(what, sizeof what, "route to %s", cfg->servers[c]);
    expect_event(p, id, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, what);

    setup_channel(p, ch, id, cfg->window, cfg->inline_size);

    struct conn_req req = {PROTO_MAGIC, PROTO_VERSION, (uint32_t)p->index,
                           (uint32_t)cfg->pairs, (uint32_t)c, (uint32_t)cfg->nchan,
                           (uint32_t)cfg->test, (uint32_t)cfg->window,
                           (uint32_t)cfg->inline_size};
    struct rdma_conn_param cp;
    conn_param(&cp, &req, sizeof req, id->verbs);
    if (rdma_connect(id, &cp))
        pair_fail(p, EXIT_ERROR, "error", "rdma_connect %s: %s", cfg->servers[c], strerror(errno));

    snprintf(what, sizeof what, "connecting to %s port %d", cfg->servers[c],
             cfg->port + p->index);
    ev = get_event(p, deadline, what);
    got = ev->event;
    int status = ev->status;
    if (rdma_ack_cm_event(ev))
        pair_fail(p, EXIT_ERROR, "error", "rdma_ack_cm_event: %s", strerror(errno));
    if (got == RDMA_CM_EVENT_ESTABLISHED) {
        ch->connected = 1;
        return 0;
    }
    if (got == RDMA_CM_EVENT_REJECTED || got == RDMA_CM_EVENT_UNREACHABLE ||
        got == RDMA_CM_EVENT_CONNECT_ERROR) {
        if (status == 28 /* IB_CM_REJ_CONSUMER_DEFINED: the server refused us */)
            pair_fail(p, EXIT_ERROR, "error", "the server at %s port %d rejected the connection "
                      "(see its error output)", cfg->servers[c], cfg->port + p->index);
        destroy_channel(ch);
        return -1;
    }
    pair_fail(p, EXIT_ERROR, "error", "%s: got RDMA CM event %s (status %d)", what,
              rdma_event_str(got), status);
}

void client_connect(struct pair *p)
{
    double deadline = now_s() + p->cfg->timeout;
    if (!(p->ec = rdma_create_event_channel()))
        pair_fail(p, EXIT_ERROR, "error", "rdma_create_event_channel: %s", strerror(errno));
    p->nchan = p->cfg->nchan;
    for (int c = 0; c < p->nchan; c++)
        while (try_connect(p, c, deadline) != 0) {
            /* the server may start after us: retry until the deadline */
            if (now_s() + 0.5 > deadline)
                pair_fail(p, EXIT_TIMEOUT, "timeout", "%s port %d refused the connection for %g s "
                          "(no server there, or another --port)", p->cfg->servers[c],
                          p->cfg->port + p->index, p->cfg->timeout);
            usleep(100000);
        }
}

static void reject(struct pair *p, struct rdma_cm_id *id, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
static void reject(struct pair *p, struct rdma_cm_id *id, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rdma_reject(id, NULL, 0);
    pair_fail(p, EXIT_USAGE, "invalid option", "%s", msg);
}

void server_accept(struct pair *p)
{
    const struct config *cfg = p->cfg;
    double deadline = now_s() + cfg->timeout;
    char what[96];

    if (!(p->ec = rdma_create_event_channel()))
        pair_fail(p, EXIT_ERROR, "error", "rdma_create_event_channel: %s", strerror(errno));
    if (rdma_create_id(p->ec, &p->listen_id, NULL, RDMA_PS_TCP))
        pair_fail(p, EXIT_ERROR, "error", "rdma_create_id: %s", strerror(errno));
    struct addrinfo *any = NULL;
    struct sockaddr_in any4 = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)(cfg->port + p->index))};
    struct sockaddr *addr = (struct sockaddr *)&any4;
    if (cfg->bind_addr) {
        any = lookup(p, cfg->bind_addr, cfg->port + p->index);
        addr = any->ai_addr;
    }
    if (rdma_bind_addr(p->listen_id, addr))
        pair_fail(p, EXIT_ERROR, "error", "rdma_bind_addr %s port %d: %s",
                  cfg->bind_addr ? cfg->bind_addr : "(any)", cfg->port + p->index,
                  strerror(errno));
    if (any)
        freeaddrinfo(any);
    if (rdma_listen(p->listen_id, MAX_CHAN))
        pair_fail(p, EXIT_ERROR, "error", "rdma_listen: %s", strerror(errno));

    snprintf(what, sizeof what, "waiting for a client on port %d", cfg->port + p->index);
    int accepted = 0, established = 0;
    p->nchan = 0;
    while (p->nchan == 0 || established < p->nchan) {
        struct rdma_cm_event *ev = get_event(p, deadline, what);
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            struct conn_req req = {0};
            if (ev->param.conn.private_data_len >= sizeof req)
                memcpy(&req, ev->param.conn.private_data, sizeof req);
            if (req.magic != PROTO_MAGIC || req.version != PROTO_VERSION)
                reject(p, ev->id, "a client that is not ibrepro_rdma %s (or another byte "
                       "order) connected", BENCH_VERSION);
            if (req.nchan < 1 || req.nchan > MAX_CHAN || req.chan >= req.nchan ||
                (p->nchan && req.nchan != (uint32_t)p->nchan) || p->ch[req.chan].id)
                reject(p, ev->id, "inconsistent channel %u of %u from the client", req.chan,
                       req.nchan);
            if (req.pairs != (uint32_t)cfg->pairs)
                reject(p, ev->id, "the client runs %u pairs, this server %d: give both the "
                       "same --pairs", req.pairs, cfg->pairs);
            if (req.pair != (uint32_t)p->index)
                reject(p, ev->id, "client pair %u connected to the port of pair %d",
                       req.pair, p->index);
            p->nchan = (int)req.nchan;
            p->cfg->test = (enum test)req.test;  /* the client's test parameters */
            p->cfg->window = (long)req.window;
            setup_channel(p, &p->ch[req.chan], ev->id, (long)req.window, (int)req.inline_size);
            struct rdma_conn_param cp;
            conn_param(&cp, NULL, 0, ev->id->verbs);
            if (rdma_accept(ev->id, &cp))
                pair_fail(p, EXIT_ERROR, "error", "rdma_accept: %s", strerror(errno));
            accepted++;
        } else if (ev->event == RDMA_CM_EVENT_ESTABLISHED) {
            for (int c = 0; c < MAX_CHAN; c++)
                if (p->ch[c].id == ev->id)
                    p->ch[c].connected = 1;
            established++;
        } else {
            pair_fail(p, EXIT_ERROR, "error", "%s: got RDMA CM event %s (status %d)", what,
                      rdma_event_str(ev->event), ev->status);
        }
        if (rdma_ack_cm_event(ev))
            pair_fail(p, EXIT_ERROR, "error", "rdma_ack_cm_event: %s", strerror(errno));
    }
    (void)accepted;
}

void register_data(struct pair *p)
{
    size_t len = 2 * p->cfg->max_size;
    p->data = xalloc(len);
    for (int c = 0; c < p->nchan; c++) {
        struct channel *ch = &p->ch[c];
        ch->data_mr = ibv_reg_mr(ch->pd, p->data, len, IBV_ACCESS_LOCAL_WRITE |
                                 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
        if (!ch->data_mr)
            pair_fail(p, EXIT_ERROR, "error", "ibv_reg_mr of %zu bytes on %s: %s", len,
                      ch->device, strerror(errno));
    }
}

void pair_close(struct pair *p)
{
    int waiting = 0;
    if (!p->cfg->is_server)  /* the client ends the connections; the server sees them end */
        for (int c = 0; c < p->nchan; c++)
            if (p->ch[c].connected && rdma_disconnect(p->ch[c].id))
                fprintf(stderr, "%s: warning: rdma_disconnect on %s: %s\n", bench_prog,
                        p->ch[c].device, strerror(errno));
    for (int c = 0; c < p->nchan; c++)
        waiting += p->ch[c].connected;

    double deadline = now_s() + (p->cfg->timeout < 5.0 ? p->cfg->timeout : 5.0);
    struct pollfd pfd = {.fd = p->ec->fd, .events = POLLIN};
    while (waiting > 0) {
        int ms = (int)((deadline - now_s()) * 1000.0);
        if (ms <= 0 || poll(&pfd, 1, ms) <= 0)
            break;
        struct rdma_cm_event *ev;
        if (rdma_get_cm_event(p->ec, &ev))
            break;
        if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
            for (int c = 0; c < p->nchan; c++)
                if (p->ch[c].id == ev->id && p->ch[c].connected) {
                    p->ch[c].connected = 0;
                    waiting--;
                }
        rdma_ack_cm_event(ev);
    }
    if (waiting > 0)
        fprintf(stderr, "%s: warning: %s pair %d: %d connection(s) not confirmed closed\n",
                bench_prog, p->cfg->is_server ? "server" : "client", p->index, waiting);

    for (int c = 0; c < MAX_CHAN; c++)
        if (p->ch[c].id)
            destroy_channel(&p->ch[c]);
    if (p->listen_id && rdma_destroy_id(p->listen_id))
        fprintf(stderr, "%s: warning: rdma_destroy_id (listener) failed\n", bench_prog);
    if (p->ec)
        rdma_destroy_event_channel(p->ec);
    free(p->data);
    p->data = NULL;
}

static void handle_recv(struct pair *p, int c, const struct ibv_wc *wc)
{
    struct channel *ch = &p->ch[c];
    struct ctrl_msg msg = ch->ctrl[wc->wr_id];
    post_recv(p, ch, (int)wc->wr_id);  /* repost at once: the peer may run ahead */
    if (msg.magic != PROTO_MAGIC)
        pair_fail(p, EXIT_ERROR, "error", "malformed control message on %s", ch->device);
    switch (msg.type) {
    case MSG_DONE: p->done_recv++; break;
    case MSG_ACK: p->ack_recv++; break;
    default:
        if (ch->inbox_count == INBOX)
            pair_fail(p, EXIT_ERROR, "error", "protocol: too many messages on channel %d", c);
        ch->inbox[(ch->inbox_head + ch->inbox_count++) % INBOX] = msg;
    }
}

void progress(struct pair *p)
{
    struct ibv_wc wc[16];
    for (int c = 0; c < p->nchan; c++) {
        int n = ibv_poll_cq(p->ch[c].cq, 16, wc);
        if (n < 0)
            pair_fail(p, EXIT_ERROR, "error", "ibv_poll_cq on %s failed", p->ch[c].device);
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS)
                pair_fail(p, EXIT_ERROR, "error", "completion error on %s (channel %d): %s",
                          p->ch[c].device, c, ibv_wc_status_str(wc[i].status));
            if (wc[i].opcode & IBV_WC_RECV)
                handle_recv(p, c, &wc[i]);
            else
                p->ch[c].outstanding--;
        }
    }
}

static void post_send_wr(struct pair *p, int c, struct ibv_send_wr *wr, const char *what)
{
    struct ibv_send_wr *bad;
    int ret = ibv_post_send(p->ch[c].id->qp, wr, &bad);
    if (ret)
        pair_fail(p, EXIT_ERROR, "error", "ibv_post_send (%s) on %s: %s", what, p->ch[c].device,
                  strerror(ret));
    if (wr->send_flags & IBV_SEND_SIGNALED)
        p->ch[c].outstanding++;
}

void post_write(struct pair *p, int c, size_t local_off, size_t remote_off, size_t len,
                int signaled)
{
    struct channel *ch = &p->ch[c];
    struct ibv_sge sge = {(uintptr_t)(p->data + local_off), (uint32_t)len, ch->data_mr->lkey};
    struct ibv_send_wr wr = {
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_RDMA_WRITE,
        .send_flags = (signaled ? IBV_SEND_SIGNALED : 0) |
                      ((int)len <= p->inline_used && len > 0 ? IBV_SEND_INLINE : 0),
        .wr.rdma = {ch->remote_addr + remote_off, ch->remote_rkey},
    };
    post_send_wr(p, c, &wr, "RDMA write");
}

void post_read(struct pair *p, int c, size_t local_off, size_t remote_off, size_t len)
{
    struct channel *ch = &p->ch[c];
    struct ibv_sge sge = {(uintptr_t)(p->data + local_off), (uint32_t)len, ch->data_mr->lkey};
    struct ibv_send_wr wr = {
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_RDMA_READ,
        .send_flags = IBV_SEND_SIGNALED,
        .wr.rdma = {ch->remote_addr + remote_off, ch->remote_rkey},
    };
    post_send_wr(p, c, &wr, "RDMA read");
}

void post_ctrl(struct pair *p, int c, int slot, const struct ctrl_msg *msg)
{
    struct channel *ch = &p->ch[c];
    struct ctrl_msg *buf = &ch->ctrl[ch->nrecv + slot];
    if (msg) {  /* SLOT_CMD: the caller waits for the completion before the next command */
        *buf = *msg;
        buf->magic = PROTO_MAGIC;
    }
    struct ibv_sge sge = {(uintptr_t)buf, sizeof *buf, ch->ctrl_mr->lkey};
    struct ibv_send_wr wr = {
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED,
    };
    post_send_wr(p, c, &wr, "control message");
}

struct ctrl_msg next_msg(struct pair *p, int c, const char *what)
{
    struct channel *ch = &p->ch[c];
    WAIT_UNTIL(p, ch->inbox_count > 0, what);
    struct ctrl_msg msg = ch->inbox[ch->inbox_head];
    ch->inbox_head = (ch->inbox_head + 1) % INBOX;
    ch->inbox_count--;
    return msg;
}

struct ctrl_msg expect_msg(struct pair *p, int c, enum msg_type type, const char *what)
{
    struct ctrl_msg msg = next_msg(p, c, what);
    if (msg.type != (uint32_t)type)
        pair_fail(p, EXIT_ERROR, "error", "protocol: %s: got message %u, expected %d", what,
                  msg.type, type);
    return msg;
}
