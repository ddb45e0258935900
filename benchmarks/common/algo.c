#include "algo.h"

static long reused_before(long m, int pct)  /* reused messages among the first m */
{
    return (long)((long long)m * pct / 100);
}

int reuse_is_reused(long msg, int pct)
{
    return reused_before(msg + 1, pct) != reused_before(msg, pct);
}

long reuse_buffer(long msg, int pct)
{
    if (reuse_is_reused(msg, pct))
        return 0;
    return (msg + 1) - reused_before(msg + 1, pct);
}

long reuse_fresh_count(long m, int pct)
{
    return m - reused_before(m, pct);
}

long reuse_fit_iterations(long iters, int msgs_per_iter, int pct, size_t buf_bytes,
                          size_t cap_bytes)
{
    long lo = 1, hi = iters;  /* the fresh-buffer count grows with the iterations: bisect */
    while (lo < hi) {
        long mid = lo + (hi - lo + 1) / 2;
        if ((size_t)reuse_fresh_count(mid * msgs_per_iter, pct) * buf_bytes <= cap_bytes)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static int accepted(overlap_probe_fn probe, void *ctx, double target, double limit,
                    struct overlap_result *res, struct overlap_probe *out)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        probe(ctx, target, out);
        res->probes++;
        if (out->iter_us <= limit)
            return 1;
    }
    return 0;
}

void overlap_search(overlap_probe_fn probe, void *ctx, double base_us, double tol,
                    double resolution_us, int max_probes, struct overlap_result *res)
{
    const double limit = base_us * (1.0 + tol);
    struct overlap_probe p;
    double good = 0.0, bad = -1.0;
    double c = base_us / 16.0 > resolution_us ? base_us / 16.0 : resolution_us;

    *res = (struct overlap_result){.iter_us = base_us};

    while (res->probes < max_probes) {
        if (!accepted(probe, ctx, c, limit, res, &p)) {
            bad = c;
            break;
        }
        good = c;
        res->target_us = c;
        res->compute_us = p.compute_us;
        res->iter_us = p.iter_us;
        if (c > 16.0 * base_us) {  /* cannot be: the loop alone is longer than the exchange */
            res->capped = 1;
            return;
        }
        c *= 2.0;
    }

    while (bad > 0 && bad - good > resolution_us && res->probes < max_probes) {
        double mid = (good + bad) / 2.0;
        if (accepted(probe, ctx, mid, limit, res, &p)) {
            good = mid;
            res->target_us = mid;
            res->compute_us = p.compute_us;
            res->iter_us = p.iter_us;
        } else {
            bad = mid;
        }
    }
}

int stripe_plan(size_t size, size_t threshold, int nchan, int striping, int send_chan,
                struct stripe *out)
{
    if (!striping || nchan < 2 || size <= threshold || size < (size_t)nchan) {
        out[0] = (struct stripe){send_chan, 0, size};
        return 1;
    }
    size_t piece = size / (size_t)nchan;
    for (int c = 0; c < nchan; c++) {
        out[c].chan = c;
        out[c].offset = piece * (size_t)c;
        out[c].length = c == nchan - 1 ? size - piece * (size_t)(nchan - 1) : piece;
    }
    return nchan;
}

int bind_channel(int pair, int nchan, int is_server)
{
    return (pair + (is_server ? 1 : 0)) % nchan;
}
