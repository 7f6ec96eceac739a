/*
 * One decision through the C API, as `cargo bench -p fencing-runtime --bench
 * check` measures `check/wasm/single`: the same fence and sequencer (a
 * 30-byte lock name, high-water 1000 with sequence 7, token 1000 with
 * sequence 8, non-decreasing), decided over and over on one thread.
 *
 *   bench [measurement seconds]   (default 3, after 1 s of warm-up)
 *
 * Prints the median over samples of the time per decision, in ns, and the
 * verdict (which must be admitted), on one line: `c-api/single <ns>`.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fencing_guard.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    const char *lock = "storage:customer-orders-bucket"; /* 30 bytes */
    fencing_fence fence = {lock, strlen(lock), 1000, 7, 1, {0}};
    fencing_sequencer seq = {lock, strlen(lock), 1000, 8, 1, {0}};
    fencing_guard *g = NULL;
    fencing_error err;
    fencing_verdict v;
    if (fencing_guard_open(NULL, NULL, &g, &err) != FENCING_OK) {
        fprintf(stderr, "bench: %s\n", err.message);
        return 2;
    }
    /* Warm-up, and the number of decisions in one sample (about 10 ms). */
    long per_sample = 1;
    double start = now();
    long done = 0;
    while (now() - start < 1.0) {
        for (long i = 0; i < 1000; i++) fencing_admit(g, &fence, &seq, FENCING_NON_DECREASING, &v, &err);
        done += 1000;
    }
    per_sample = (long)(done / (now() - start) * 0.01) + 1;
    enum { MAX_SAMPLES = 100000 };
    static double samples[MAX_SAMPLES];
    int n = 0;
    start = now();
    while (n < MAX_SAMPLES && now() - start < seconds) {
        double t0 = now();
        for (long i = 0; i < per_sample; i++) {
            if (fencing_admit(g, &fence, &seq, FENCING_NON_DECREASING, &v, &err) != FENCING_OK) {
                fprintf(stderr, "bench: %s\n", err.message);
                return 1;
            }
        }
        samples[n++] = (now() - t0) / (double)per_sample * 1e9;
    }
    if (!v.admitted) {
        fprintf(stderr, "bench: the decision was %s, not admitted\n", fencing_reason(v.code));
        return 1;
    }
    qsort(samples, (size_t)n, sizeof samples[0], compare);
    printf("c-api/single %.2f\n", samples[n / 2]);
    fencing_guard_close(g);
    return 0;
}
