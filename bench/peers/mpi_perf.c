/* mpi-perf: the Open MPI side of bench/compare.sh. It measures what mci-perf
 * measures, the same way, so the two tables compare line by line:
 *   - the same sizes (-b/-e/-f or -i; nccl-tests' convention: the size is
 *     the larger buffer a rank sees, split collectives round blocks down),
 *   - per size: -w warmup calls, a barrier, one monotonic clock around -n
 *     calls, divided by -n; the iteration time is the slowest rank's
 *     (MPI_Allreduce MAX of the per-rank averages),
 *   - the same algbw/busbw formulas and columns, out of place and in place
 *     (MPI_IN_PLACE; barrier and send_recv have no in-place form: N/A),
 *   - with --barrier-ref, the mean of 10 MPI_Barrier calls after each size.
 * Build: mpicc -O2 -o mpi-perf mpi_perf.c
 * Run:   mpirun -np 2 ./mpi-perf all_reduce -b 8 -e 16M -f 4 [--csv FILE] */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum coll { ALL_REDUCE, BROADCAST, REDUCE, ALL_GATHER, GATHER, SCATTER, REDUCE_SCATTER, ALL_TO_ALL, BARRIER, SEND_RECV };
static const char* const kNames[] = {"all_reduce", "broadcast", "reduce",     "all_gather", "gather",
                                     "scatter",    "reduce_scatter", "all_to_all", "barrier", "send_recv"};

struct opts {
  enum coll coll;
  size_t minb, maxb, factor, stepb;
  int iters, warmup, root, barrier_ref;
  MPI_Datatype type;
  const char *type_name, *short_name;
  size_t es;
  MPI_Op op;
  const char* op_name;
  const char* csv;
};

static int rank, nranks;

static void die(const char* msg, const char* arg) {
  if (rank == 0) fprintf(stderr, "mpi-perf: %s%s\n", msg, arg ? arg : "");
  MPI_Finalize();
  exit(2);
}

static size_t parse_bytes(const char* s) {
  char* end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) die("bad byte count: ", s);
  switch (*end) {
    case 'K': case 'k': v <<= 10; break;
    case 'M': case 'm': v <<= 20; break;
    case 'G': case 'g': v <<= 30; break;
    case '\0': break;
    default: die("bad size suffix (use K, M or G): ", s);
  }
  return (size_t)v;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double bus_factor(enum coll c, int n) {
  switch (c) {
    case ALL_REDUCE: return 2.0 * (n - 1) / n;
    case ALL_GATHER: case REDUCE_SCATTER: case ALL_TO_ALL: case GATHER: case SCATTER: return (double)(n - 1) / n;
    case BROADCAST: case REDUCE: case SEND_RECV: return 1.0;
    default: return 0.0;
  }
}

/* Element counts of the input and output buffers for a nominal count. */
static void layout(enum coll c, size_t count, size_t* in, size_t* out, size_t* block) {
  const size_t n = (size_t)nranks, b = count / n;
  switch (c) {
    case ALL_GATHER: case GATHER: *in = b; *out = b * n; *block = b; break;
    case SCATTER: case REDUCE_SCATTER: *in = b * n; *out = b; *block = b; break;
    case ALL_TO_ALL: *in = *out = b * n; *block = b; break;
    case BARRIER: *in = *out = *block = 0; break;
    default: *in = *out = *block = count; break;
  }
}

/* In place as MPI spells it (MPI_IN_PLACE on the side that would be copied),
 * in the same buffers mci-perf uses in place: the input inside the output. */
static void run_once(const struct opts* o, void* in, void* out, size_t cin, size_t cout, size_t block, int inplace) {
  const int root = rank == o->root;
  char* own = (char*)out + (size_t)rank * block * o->es;
  switch (o->coll) {
    case ALL_REDUCE: MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, (int)cin, o->type, o->op, MPI_COMM_WORLD); break;
    case BROADCAST: MPI_Bcast(out, (int)cout, o->type, o->root, MPI_COMM_WORLD); break;
    case REDUCE:
      MPI_Reduce(inplace ? (root ? MPI_IN_PLACE : out) : in, out, (int)cin, o->type, o->op, o->root, MPI_COMM_WORLD);
      break;
    case ALL_GATHER:
      if (inplace) MPI_Allgather(MPI_IN_PLACE, 0, o->type, out, (int)block, o->type, MPI_COMM_WORLD);
      else MPI_Allgather(in, (int)block, o->type, out, (int)block, o->type, MPI_COMM_WORLD);
      break;
    case GATHER:
      if (inplace) MPI_Gather(root ? MPI_IN_PLACE : own, (int)block, o->type, out, (int)block, o->type, o->root, MPI_COMM_WORLD);
      else MPI_Gather(in, (int)block, o->type, out, (int)block, o->type, o->root, MPI_COMM_WORLD);
      break;
    case SCATTER:
      /* In place the root's block stays where it is in its full buffer. */
      if (inplace) MPI_Scatter(out, (int)block, o->type, root ? MPI_IN_PLACE : own, (int)block, o->type, o->root, MPI_COMM_WORLD);
      else MPI_Scatter(in, (int)block, o->type, out, (int)block, o->type, o->root, MPI_COMM_WORLD);
      break;
    case REDUCE_SCATTER:
      if (inplace) MPI_Reduce_scatter_block(MPI_IN_PLACE, out, (int)block, o->type, o->op, MPI_COMM_WORLD);
      else MPI_Reduce_scatter_block(in, out, (int)block, o->type, o->op, MPI_COMM_WORLD);
      break;
    case ALL_TO_ALL:
      if (inplace) MPI_Alltoall(MPI_IN_PLACE, 0, o->type, out, (int)block, o->type, MPI_COMM_WORLD);
      else MPI_Alltoall(in, (int)block, o->type, out, (int)block, o->type, MPI_COMM_WORLD);
      break;
    case BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
    case SEND_RECV: {
      const int to = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;
      MPI_Sendrecv(in, (int)cin, o->type, to, 0, out, (int)cout, o->type, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      break;
    }
  }
}

/* Right-aligned in `width` characters with as many decimals as fit. */
static void num(char* buf, size_t cap, double v, int width) {
  int digits = 0;
  for (double p = 1; v >= p && digits < 40; p *= 10) ++digits;
  if (digits < width - 2) snprintf(buf, cap, "%*.2f", width, v);
  else if (digits < width - 1) snprintf(buf, cap, "%*.1f", width, v);
  else if (digits < width + 1) snprintf(buf, cap, "%*.0f", width, v);
  else snprintf(buf, cap, "%*.1e", width, v);
}

static void parse(int argc, char** argv, struct opts* o) {
  memset(o, 0, sizeof *o);
  o->minb = 8; o->maxb = 32u << 20; o->factor = 2; o->iters = 20; o->warmup = 5;
  o->type = MPI_FLOAT; o->type_name = "float"; o->short_name = "f32"; o->es = 4;
  o->op = MPI_SUM; o->op_name = "sum";
  if (argc < 2) die("usage: mpi-perf COLLECTIVE [-b B] [-e B] [-f F | -i B] [-n N] [-w N] [-d T] [-o OP] [-r R] "
                    "[--csv FILE] [--barrier-ref]", NULL);
  int found = 0;
  for (int c = 0; c <= SEND_RECV; ++c) {
    if (strcmp(argv[1], kNames[c]) == 0) { o->coll = (enum coll)c; found = 1; }
  }
  if (!found) die("unknown collective: ", argv[1]);
  for (int i = 2; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--barrier-ref") == 0) { o->barrier_ref = 1; continue; }
    if (!v) die("missing value after ", a);
    ++i;
    if (!strcmp(a, "-b")) o->minb = parse_bytes(v);
    else if (!strcmp(a, "-e")) o->maxb = parse_bytes(v);
    else if (!strcmp(a, "-f")) o->factor = (size_t)atol(v);
    else if (!strcmp(a, "-i")) o->stepb = parse_bytes(v);
    else if (!strcmp(a, "-n")) o->iters = atoi(v);
    else if (!strcmp(a, "-w")) o->warmup = atoi(v);
    else if (!strcmp(a, "-r")) o->root = atoi(v);
    else if (!strcmp(a, "--csv")) o->csv = v;
    else if (!strcmp(a, "-d")) {
      if (!strcmp(v, "float") || !strcmp(v, "f32")) { o->type = MPI_FLOAT; o->type_name = "float"; o->short_name = "f32"; o->es = 4; }
      else if (!strcmp(v, "double") || !strcmp(v, "f64")) { o->type = MPI_DOUBLE; o->type_name = "double"; o->short_name = "f64"; o->es = 8; }
      else if (!strcmp(v, "int32") || !strcmp(v, "i32")) { o->type = MPI_INT32_T; o->type_name = "int32"; o->short_name = "i32"; o->es = 4; }
      else if (!strcmp(v, "int64") || !strcmp(v, "i64")) { o->type = MPI_INT64_T; o->type_name = "int64"; o->short_name = "i64"; o->es = 8; }
      else if (!strcmp(v, "int8") || !strcmp(v, "i8")) { o->type = MPI_INT8_T; o->type_name = "int8"; o->short_name = "i8"; o->es = 1; }
      else if (!strcmp(v, "uint8") || !strcmp(v, "u8")) { o->type = MPI_UINT8_T; o->type_name = "uint8"; o->short_name = "u8"; o->es = 1; }
      else die("type not in MPI (no half/bfloat16): ", v);
    } else if (!strcmp(a, "-o")) {
      if (!strcmp(v, "sum")) o->op = MPI_SUM;
      else if (!strcmp(v, "prod")) o->op = MPI_PROD;
      else if (!strcmp(v, "min")) o->op = MPI_MIN;
      else if (!strcmp(v, "max")) o->op = MPI_MAX;
      else die("reduce op not in MPI (no avg): ", v);
      o->op_name = v;
    } else die("unknown flag: ", a);
  }
  if (o->iters < 1 || o->warmup < 0) die("-n must be 1 or more and -w 0 or more", NULL);
  if (o->stepb == 0 && o->factor < 2) die("-f must be 2 or more", NULL);
  if (o->minb > o->maxb || o->minb % o->es || o->maxb % o->es) die("bad -b/-e for this type", NULL);
  if (o->root < 0 || o->root >= nranks) die("root out of range", NULL);
  if (o->coll == SEND_RECV && nranks < 2) die("send_recv needs 2 ranks", NULL);
}

/* Per call, over -n calls after -w warmup calls and a barrier. */
static double time_runs(const struct opts* o, void* in, void* out, size_t cin, size_t cout, size_t block, int inplace) {
  for (int i = 0; i < o->warmup; ++i) run_once(o, in, out, cin, cout, block, inplace);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now_s();
  for (int i = 0; i < o->iters; ++i) run_once(o, in, out, cin, cout, block, inplace);
  return (now_s() - t0) / o->iters;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  struct opts o;
  parse(argc, argv, &o);

  size_t in_max, out_max, blk;
  layout(o.coll, o.maxb / o.es, &in_max, &out_max, &blk);
  const size_t cap = (in_max > out_max ? in_max : out_max) * o.es + 64;
  char* in = aligned_alloc(64, (cap + 63) / 64 * 64);
  char* out = aligned_alloc(64, (cap + 63) / 64 * 64);
  if (!in || !out) die("out of memory", NULL);
  memset(in, 0, cap);  /* zeros: every reduce op stays finite */
  memset(out, 0, cap);

  FILE* csv = NULL;
  if (rank == 0 && o.csv) {
    csv = fopen(o.csv, "w");
    if (!csv) die("cannot write ", o.csv);
    fprintf(csv, "collective,backend,transport,algo,ranks,size,count,type,redop,root,placement,time_us,algbw_GBps,"
                 "busbw_GBps,wrong,barrier_us\n");
  }
  const int has_op = o.coll == ALL_REDUCE || o.coll == REDUCE || o.coll == REDUCE_SCATTER;
  const int has_root = o.coll == BROADCAST || o.coll == REDUCE || o.coll == GATHER || o.coll == SCATTER;
  const char* redop = has_op ? o.op_name : "none";
  const int root_col = has_root ? o.root : -1;
  if (rank == 0) {
    printf("# mpi-perf (Open MPI): %s  ranks %d\n", kNames[o.coll], nranks);
    printf("# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d validation: 0 blocking: 1 time: max "
           "over ranks\n#\n", o.minb, o.maxb, o.stepb ? o.stepb : o.factor, o.stepb ? "bytes" : "factor", o.warmup,
           o.iters);
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          %s\n", "", "",
           "", "", "", o.barrier_ref ? "  reference" : "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s\n", "size", "count", "type", "redop",
           "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
           o.barrier_ref ? "  barrier_us" : "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s\n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", o.barrier_ref ? "        (us)" : "");
  }
  double bw_sum = 0;
  int cells = 0;
  for (size_t size = o.minb;;) {
    size_t cin, cout, block;
    const size_t count = size / o.es;
    layout(o.coll, count, &cin, &cout, &block);
    const size_t bytes = (cin > cout ? cin : cout) * o.es;
    const int has_in_place = o.coll != BARRIER && o.coll != SEND_RECV;
    double t[3] = {time_runs(&o, in, out, cin, cout, block, 0), 0, 0};
    if (has_in_place) t[1] = time_runs(&o, in, out, cin, cout, block, 1);
    if (o.barrier_ref) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double b0 = now_s();
      for (int i = 0; i < 10; ++i) MPI_Barrier(MPI_COMM_WORLD);
      t[2] = (now_s() - b0) / 10;
    }
    MPI_Allreduce(MPI_IN_PLACE, t, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double algbw[2], busbw[2];
    for (int p = 0; p < 2; ++p) {
      algbw[p] = o.coll == BARRIER || t[p] <= 0 ? 0 : (double)bytes / 1e9 / t[p];
      busbw[p] = algbw[p] * bus_factor(o.coll, nranks);
    }
    bw_sum += busbw[0];
    ++cells;
    if (rank == 0) {
      char ts[2][32], ab[2][32], bb[2][32], br[32];
      for (int p = 0; p < 2; ++p) {
        if (p == 1 && !has_in_place) {
          snprintf(ts[p], sizeof ts[p], "%7s", "N/A");
          snprintf(ab[p], sizeof ab[p], "%6s", "N/A");
          snprintf(bb[p], sizeof bb[p], "%6s", "N/A");
          continue;
        }
        num(ts[p], sizeof ts[p], t[p] * 1e6, 7);
        num(ab[p], sizeof ab[p], algbw[p], 6);
        num(bb[p], sizeof bb[p], busbw[p], 6);
      }
      num(br, sizeof br, t[2] * 1e6, 10);
      printf("%12zu  %12zu  %8s  %6s  %6d  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s%s\n", bytes, count, o.type_name,
             redop, root_col, ts[0], ab[0], bb[0], "N/A", ts[1], ab[1], bb[1], "N/A", o.barrier_ref ? "  " : "",
             o.barrier_ref ? br : "");
      fflush(stdout);
      for (int p = 0; csv && p < 1 + has_in_place; ++p) {
        fprintf(csv, "%s,openmpi,auto,auto,%d,%zu,%zu,%s,%s,%d,%s,%.3f,%.6f,%.6f,,", kNames[o.coll], nranks, bytes,
                count, o.short_name, redop, root_col, p ? "in_place" : "out_of_place", t[p] * 1e6, algbw[p], busbw[p]);
        if (o.barrier_ref) fprintf(csv, "%.3f", t[2] * 1e6);
        fprintf(csv, "\n");
      }
    }
    if (size == o.maxb) break;
    if (o.stepb) {
      if (o.stepb > o.maxb - size) break;
      size += o.stepb;
    } else {
      if (size > o.maxb / o.factor || size == 0) break;
      size *= o.factor;
    }
  }
  if (rank == 0) {
    printf("# Out of bounds values : 0 OK (not checked)\n# Avg bus bandwidth    : %g \n#\n", cells ? bw_sum / cells : 0);
    if (csv) fclose(csv);
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
