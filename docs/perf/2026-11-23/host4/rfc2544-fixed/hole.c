// Spins on one CPU reading the TSC; reports every gap longer than a
// threshold and whether the thread was context-switched during it.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <sys/resource.h>
#include <x86intrin.h>
int main(int argc, char **argv) {
    int cpu = atoi(argv[1]); double secs = atof(argv[2]); double thr_us = atof(argv[3]);
    cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s);
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a); uint64_t t0 = __rdtsc();
    do { clock_gettime(CLOCK_MONOTONIC, &b); } while ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec) < 2e8);
    double ghz = (__rdtsc() - t0) / ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec));
    uint64_t thr = thr_us * 1e3 * ghz, end = __rdtsc() + secs * 1e9 * ghz, last = __rdtsc();
    struct rusage r0, r1; getrusage(RUSAGE_THREAD, &r0);
    long n = 0, nsw = 0, b1 = 0, b5 = 0; double maxg = 0, sum = 0;
    while (last < end) {
        uint64_t t = __rdtsc();
        if (t - last > thr) {
            getrusage(RUSAGE_THREAD, &r1);
            int sw = (r1.ru_nivcsw + r1.ru_nvcsw) != (r0.ru_nivcsw + r0.ru_nvcsw);
            r0 = r1;
            double g = (t - last) / ghz / 1e3;
            if (sw) nsw++; else { n++; sum += g; if (g > 1000) b1++; if (g > 5000) b5++; if (g > maxg) maxg = g; }
            t = __rdtsc();
        }
        last = t;
    }
    printf("cpu %d %.0f s: gaps > %.0f us without a guest context switch: %ld (> 1 ms: %ld, > 5 ms: %ld, max %.0f us, sum %.1f ms); with one: %ld\n",
           cpu, secs, thr_us, n, b1, b5, maxg, sum / 1e3, nsw);
    return 0;
}
