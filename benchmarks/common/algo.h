/* The decision logic of the benchmarks, as pure functions (no MPI, no verbs) so that
 * tests/unit_algo.c can check it directly. */
#ifndef IBREPRO_ALGO_H
#define IBREPRO_ALGO_H

#include <stddef.h>

/* ---- buffer reuse (002 Sec. 3.5) ----------------------------------------------------------
 * Of M messages, floor(M * pct / 100) use the one reused buffer; the others each use a buffer
 * of their own that no earlier message used. The reused messages are spread evenly
 * (Bresenham): pct = 50 alternates fresh, reused, fresh, ... */
int reuse_is_reused(long msg, int pct);
/* 0 for a reused message, else the 1-based number of the fresh buffer this message uses. */
long reuse_buffer(long msg, int pct);
/* How many fresh buffers the first m messages need. */
long reuse_fresh_count(long m, int pct);
/* The largest iteration count <= iters whose fresh buffers (msgs_per_iter messages per
 * iteration, each buffer buf_bytes) fit in cap_bytes; at least 1. */
long reuse_fit_iterations(long iters, int msgs_per_iter, int pct, size_t buf_bytes,
                          size_t cap_bytes);

/* ---- overlap potential (002 Sec. 3.4) ------------------------------------------------------
 * A probe runs the non-blocking exchange with a compute loop of target_us and reports the
 * time per iteration and the compute time it actually measured. The search finds the largest
 * target whose iteration time stays within base_us * (1 + tol): doubling from
 * max(base_us / 16, resolution_us) until a probe fails, then bisection until the bracket is
 * narrower than resolution_us. A failing probe is repeated once before it counts as failed
 * (one noisy sample should not end the search). */
struct overlap_probe {
    double iter_us;     /* time per iteration with this compute loop */
    double compute_us;  /* measured time of the compute loop per iteration */
};
typedef void (*overlap_probe_fn)(void *ctx, double target_us, struct overlap_probe *out);

struct overlap_result {
    double target_us;   /* largest accepted compute target (0: none accepted) */
    double compute_us;  /* measured compute time at that target: the overlap potential */
    double iter_us;     /* iteration time at that target */
    int probes;         /* probes run (including repeats) */
    int capped;         /* 1 if no probe failed before the doubling cap (16 x base) */
};
void overlap_search(overlap_probe_fn probe, void *ctx, double base_us, double tol,
                    double resolution_us, int max_probes, struct overlap_result *res);

/* ---- multi-port striping and binding (003 Sec. IV.B.3) -------------------------------------
 * A message larger than threshold is split evenly over all nchan channels (the last stripe
 * takes the remainder); a message up to the threshold, or any message when not striping, goes
 * as one piece on send_chan. Returns the number of stripes written to out[]. */
struct stripe {
    int chan;
    size_t offset;
    size_t length;
};
int stripe_plan(size_t size, size_t threshold, int nchan, int striping, int send_chan,
                struct stripe *out);
/* Binding: the channel a side sends on. Pair p's client sends on channel p mod n and its
 * server on (p + 1) mod n, so with two ports each process of a node sends on one port and
 * receives on the other. */
int bind_channel(int pair, int nchan, int is_server);

#endif
