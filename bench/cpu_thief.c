/* cpu_thief: takes each CPU away from whatever runs on it for a share of
 * every period, as a busy hypervisor steals a VM's vCPU: one thread per
 * online CPU, pinned to it, SCHED_FIFO (so it preempts any normal process
 * there at once), wakes at a random point of each period and spins for
 * STEAL x PERIOD. The CPUs are taken independently, each at its own
 * moments, as vCPUs are. bench/contention.sh uses it; needs root (or
 * CAP_SYS_NICE) for SCHED_FIFO.
 *
 * Build: cc -O2 -pthread -o cpu-thief cpu_thief.c
 * Run:   cpu-thief STEAL PERIOD_US SECONDS     e.g. cpu-thief 0.3 2000 60 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double steal;
static int64_t period_ns, end_ns;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void sleep_until(int64_t at) {
  struct timespec t = {.tv_sec = at / 1000000000, .tv_nsec = at % 1000000000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {
  }
}

static void* thief(void* arg) {
  const int cpu = (int)(intptr_t)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    fprintf(stderr, "cpu-thief: cannot pin a thread to CPU %d\n", cpu);
    exit(1);
  }
  struct sched_param p = {.sched_priority = 50};
  if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) != 0) {
    fprintf(stderr, "cpu-thief: SCHED_FIFO refused (run as root or with CAP_SYS_NICE)\n");
    exit(1);
  }
  unsigned seed = (unsigned)(cpu * 7919 + now_ns());
  const int64_t burst = (int64_t)(steal * (double)period_ns);
  for (int64_t start = now_ns(); start < end_ns; start += period_ns) {
    const int64_t at = start + (int64_t)((double)rand_r(&seed) / RAND_MAX * (double)(period_ns - burst));
    sleep_until(at);
    while (now_ns() < at + burst) {
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: cpu-thief STEAL(0..0.9) PERIOD_US SECONDS\n");
    return 2;
  }
  steal = atof(argv[1]);
  period_ns = (int64_t)atol(argv[2]) * 1000;
  if (steal <= 0 || steal > 0.9 || period_ns < 100000) {
    fprintf(stderr, "cpu-thief: STEAL must be in (0, 0.9] and PERIOD_US at least 100\n");
    return 2;
  }
  end_ns = now_ns() + (int64_t)(atof(argv[3]) * 1e9);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  pthread_t t[1024];
  for (long c = 0; c < cpus && c < 1024; ++c) pthread_create(&t[c], NULL, thief, (void*)(intptr_t)c);
  for (long c = 0; c < cpus && c < 1024; ++c) pthread_join(t[c], NULL);
  return 0;
}
