/* Unit test of common/algo.c (buffer-reuse schedule, overlap search, striping plan).
 * Prints one "ok"/"not ok" line per check (TAP); exits 1 if any check failed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../common/algo.h"

static int failures, checks;

#define CHECK(cond, ...)                                 \
    do {                                                 \
        checks++;                                        \
        if (cond) {                                      \
            printf("ok %d - ", checks);                  \
        } else {                                         \
            failures++;                                  \
            printf("not ok %d - ", checks);              \
        }                                                \
        printf(__VA_ARGS__);                             \
        putchar('\n');                                   \
    } while (0)

static void test_reuse(void)
{
    const int pcts[] = {0, 33, 50, 90, 100};
    for (unsigned k = 0; k < sizeof pcts / sizeof *pcts; k++) {
        int pct = pcts[k];
        long m = 1000, reused = 0, next_fresh = 1, ok = 1;
        for (long i = 0; i < m; i++) {
            long b = reuse_buffer(i, pct);
            if (reuse_is_reused(i, pct) != (b == 0))
                ok = 0;
            if (b == 0)
                reused++;
            else if (b != next_fresh++)  /* fresh buffers: 1, 2, 3, ... each used once */
                ok = 0;
        }
        CHECK(ok, "reuse %d%%: fresh buffers are numbered 1, 2, ... and each used once", pct);
        CHECK(reused == m * pct / 100, "reuse %d%%: %ld of %ld messages reuse (want %ld)", pct,
              reused, m, m * pct / 100);
        CHECK(reuse_fresh_count(m, pct) == m - reused, "reuse %d%%: fresh count %ld", pct,
              reuse_fresh_count(m, pct));
    }
    int alternate = 1;
    for (long i = 0; i < 10; i++)
        alternate &= reuse_is_reused(i, 50) == (i % 2 == 1);
    CHECK(alternate, "reuse 50%%: fresh and reused alternate");

    /* memory cap: 1000 iterations of 1 message, 1 MiB buffers, 64 MiB cap */
    long n = reuse_fit_iterations(1000, 1, 0, 1 << 20, 64u << 20);
    CHECK(n == 64, "cap, reuse 0%%: 64 iterations fit in 64 MiB (got %ld)", n);
    n = reuse_fit_iterations(1000, 1, 50, 1 << 20, 64u << 20);
    CHECK(n == 128, "cap, reuse 50%%: 128 iterations fit (got %ld)", n);
    CHECK(reuse_fresh_count(n, 50) <= 64 && reuse_fresh_count(n + 1, 50) > 64,
          "cap, reuse 50%%: the fit is the largest");
    n = reuse_fit_iterations(1000, 16, 0, 1 << 20, 64u << 20);
    CHECK(n == 4, "cap, window 16: 4 iterations fit (got %ld)", n);
    CHECK(reuse_fit_iterations(1000, 1, 100, 1 << 20, 1) == 1000,
          "cap, reuse 100%%: no fresh buffer, all iterations");
    CHECK(reuse_fit_iterations(1000, 1, 0, 1 << 30, 1 << 20) == 1, "cap: at least 1 iteration");
    CHECK(reuse_fit_iterations(10, 1, 0, 4096, 1 << 30) == 10, "cap: never more than asked");
}

/* A model exchange: round trip rtt; a loop of c us hides up to rtt - o of it. */
struct model {
    double rtt, o;
    int calls, fail_once_at;  /* make probe number fail_once_at fail (noise) */
};

static void model_probe(void *arg, double c, struct overlap_probe *out)
{
    struct model *m = arg;
    m->calls++;
    out->compute_us = c;
    out->iter_us = c + m->o > m->rtt ? c + m->o : m->rtt;
    if (m->calls == m->fail_once_at)
        out->iter_us *= 3;
}

static void test_overlap(void)
{
    struct overlap_result r;
    struct model m = {10.0, 2.0, 0, 0};
    overlap_search(model_probe, &m, 10.0, 0.05, 0.1, 60, &r);
    /* accepted while max(10, c + 2) <= 10.5: c <= 8.5 */
    CHECK(r.target_us <= 8.5 && r.target_us > 8.5 - 0.1 - 1e-9,
          "overlap: knee found within the resolution (8.5, got %.3f)", r.target_us);
    CHECK(fabs(r.compute_us - r.target_us) < 1e-9, "overlap: reports the measured loop time");
    CHECK(r.iter_us <= 10.5, "overlap: accepted iteration time within tolerance (%.3f)",
          r.iter_us);
    CHECK(r.probes == m.calls && r.probes <= 60, "overlap: %d probes counted", r.probes);
    CHECK(!r.capped, "overlap: not capped");

    struct model noisy = {10.0, 2.0, 0, 2};  /* the second probe is a stall */
    overlap_search(model_probe, &noisy, 10.0, 0.05, 0.1, 60, &r);
    CHECK(r.target_us <= 8.5 && r.target_us > 8.4 - 1e-9,
          "overlap: one stalled probe is repeated, not taken (got %.3f)", r.target_us);

    struct model none = {10.0, 20.0, 0, 0};  /* any loop shows: no overlap */
    overlap_search(model_probe, &none, 10.0, 0.05, 0.1, 60, &r);
    CHECK(r.target_us == 0.0 && r.compute_us == 0.0, "overlap: none possible gives 0");

    struct model flat = {10.0, -1e9, 0, 0};  /* the loop never shows: capped */
    overlap_search(model_probe, &flat, 10.0, 0.05, 0.1, 60, &r);
    CHECK(r.capped && r.target_us > 16 * 10.0, "overlap: a loop that never shows is capped");

    struct model few = {10.0, 2.0, 0, 0};
    overlap_search(model_probe, &few, 10.0, 0.05, 0.1, 4, &r);
    CHECK(r.probes <= 5 && r.target_us <= 8.5, "overlap: the probe limit holds (%d)", r.probes);
}

static void test_stripes(void)
{
    struct stripe s[8];
    int n = stripe_plan(8192, 8192, 2, 1, 0, s);
    CHECK(n == 1 && s[0].chan == 0 && s[0].length == 8192,
          "stripe: a message at the threshold is not striped");
    n = stripe_plan(8193, 8192, 2, 1, 0, s);
    CHECK(n == 2 && s[0].length == 4096 && s[1].length == 4097 && s[1].offset == 4096 &&
          s[0].chan == 0 && s[1].chan == 1,
          "stripe: above the threshold, even split, remainder on the last port");
    n = stripe_plan(1 << 20, 8192, 3, 1, 0, s);
    size_t total = 0, contiguous = 1;
    for (int i = 0; i < n; i++) {
        contiguous &= s[i].offset == total;
        total += s[i].length;
    }
    CHECK(n == 3 && total == 1 << 20 && contiguous, "stripe: 3 ports cover the message");
    n = stripe_plan(1 << 20, 8192, 2, 0, 1, s);
    CHECK(n == 1 && s[0].chan == 1 && s[0].length == 1 << 20,
          "bind: one piece on the bound channel");
    n = stripe_plan(1, 0, 2, 1, 0, s);
    CHECK(n == 1 && s[0].length == 1, "stripe: never a zero-length stripe");
    CHECK(bind_channel(0, 2, 0) == 0 && bind_channel(0, 2, 1) == 1 && bind_channel(1, 2, 0) == 1 &&
          bind_channel(1, 2, 1) == 0 && bind_channel(3, 1, 1) == 0,
          "bind: client of pair p on p mod n, server on p+1 mod n");
}

int main(void)
{
    test_reuse();
    test_overlap();
    test_stripes();
    printf("1..%d\n", checks);
    return failures ? 1 : 0;
}
