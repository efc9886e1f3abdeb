#include "matrix.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "perf/check.hpp"

namespace mci::test {

namespace {

struct Runner {
  ProcessGroup& pg;
  std::ostream& err;
  int failures = 0;
  int coll = 0;  // collective number, seeds the inputs
  int rank = pg.rank();
  int n = pg.size();
  // Which algorithms each collective ran with, in order of first use.
  std::map<std::string, std::vector<std::string>> algorithms{};

  void ran(const Work& w) {
    auto& seen = algorithms[w.op()];
    if (std::find(seen.begin(), seen.end(), w.algorithm()) == seen.end()) seen.push_back(w.algorithm());
  }

  // Fills `count` elements of dtype t with rank r's input for collective c.
  void fill(DType t, std::vector<std::uint8_t>& buf, std::size_t count, int r, int c, bool narrow,
            std::size_t offset = 0) {
    perf::fill_values(t, buf.data() + offset * dtype_size(t), count,
                      [&](std::size_t i) { return perf::input_value(t, r, c, i, narrow); });
  }
  void fill_reference(DType t, std::vector<std::uint8_t>& buf, std::size_t count, ReduceOp op, int c, bool narrow,
                      std::size_t first = 0) {
    perf::fill_values(t, buf.data(), count,
                      [&](std::size_t i) { return perf::reduced_value(t, op, n, c, first + i, narrow); });
  }

  bool expect(const char* what, DType t, const void* got, const void* want, std::size_t count) {
    const std::size_t es = dtype_size(t);
    if (count == 0 || std::memcmp(got, want, count * es) == 0) return true;
    for (std::size_t i = 0; i < count; ++i) {
      if (std::memcmp(static_cast<const std::uint8_t*>(got) + i * es, static_cast<const std::uint8_t*>(want) + i * es,
                      es) != 0) {
        err << fmt::format("FAIL rank {} {} {} count {}: element {} is {} but must be {}\n", rank, what, dtype_name(t),
                           count, i, load_element(t, got, i), load_element(t, want, i));
        break;
      }
    }
    ++failures;
    return false;
  }

  void all_reduce(DType t, std::size_t count, ReduceOp op, bool in_place) {
    const int c = ++coll;
    const bool narrow = op == ReduceOp::prod;
    const std::size_t es = dtype_size(t);
    std::vector<std::uint8_t> in(count * es), out(count * es, 0xAB), want(count * es), keep;
    fill(t, in, count, rank, c, narrow);
    keep = in;
    fill_reference(t, want, count, op, c, narrow);
    const std::string what = fmt::format("all_reduce({}{})", reduce_op_name(op), in_place ? ", in place" : "");
    if (in_place) {
      ran(pg.all_reduce(BufferView{in.data(), count, t}, op));
      expect(what.c_str(), t, in.data(), want.data(), count);
    } else {
      ran(pg.all_reduce(BufferView{in.data(), count, t}, BufferView{out.data(), count, t}, op));
      expect(what.c_str(), t, out.data(), want.data(), count);
      expect((what + " input untouched").c_str(), t, in.data(), keep.data(), count);
    }
  }

  void broadcast(DType t, std::size_t count, int root, bool in_place) {
    const int c = ++coll;
    const std::size_t es = dtype_size(t);
    std::vector<std::uint8_t> in(count * es), out(count * es, 0xCD), want(count * es);
    fill(t, in, count, rank, c, false);
    fill(t, want, count, root, c, false);
    if (in_place) {
      ran(pg.broadcast(BufferView{in.data(), count, t}, root));
      expect("broadcast(in place)", t, in.data(), want.data(), count);
    } else {
      ran(pg.broadcast(BufferView{in.data(), count, t}, BufferView{out.data(), count, t}, root));
      expect("broadcast", t, out.data(), want.data(), count);
    }
  }

  void reduce(DType t, std::size_t count, int root, ReduceOp op) {
    const int c = ++coll;
    const bool narrow = op == ReduceOp::prod;
    const std::size_t es = dtype_size(t);
    std::vector<std::uint8_t> in(count * es), out(count * es, 0x5A), want(count * es), keep, sentinel;
    fill(t, in, count, rank, c, narrow);
    keep = in;
    sentinel = out;
    ran(pg.reduce(BufferView{in.data(), count, t}, BufferView{out.data(), count, t}, root, op));
    const std::string what = fmt::format("reduce({}, root {})", reduce_op_name(op), root);
    if (rank == root) {
      fill_reference(t, want, count, op, c, narrow);
      expect(what.c_str(), t, out.data(), want.data(), count);
    } else {
      expect((what + " non-root output untouched").c_str(), t, out.data(), sentinel.data(), count);
    }
    expect((what + " input untouched").c_str(), t, in.data(), keep.data(), count);
  }

  // In place: the root's result lands in its input; the others' inputs stay.
  void reduce_in_place(DType t, std::size_t count, int root, ReduceOp op) {
    const int c = ++coll;
    const bool narrow = op == ReduceOp::prod;
    const std::size_t es = dtype_size(t);
    std::vector<std::uint8_t> in(count * es), want(count * es), keep;
    fill(t, in, count, rank, c, narrow);
    keep = in;
    ran(pg.reduce(BufferView{in.data(), count, t}, root, op));
    if (rank == root) {
      fill_reference(t, want, count, op, c, narrow);
      expect("reduce(in place) at root", t, in.data(), want.data(), count);
    } else {
      expect("reduce(in place) non-root buffer untouched", t, in.data(), keep.data(), count);
    }
  }

  // The root's own block already sits in its output (in place); the others
  // pass ordinary buffers.
  void gather_in_place(DType t, std::size_t count, int root) {
    const int c = ++coll;
    const std::size_t es = dtype_size(t);
    std::vector<std::uint8_t> in(count * es), out(count * es * n, 0x27), want(count * es * n);
    for (int r = 0; r < n; ++r) fill(t, want, count, r, c, false, count * r);
    if (rank == root) {
      fill(t, out, count, rank, c, false, count * rank);
      ran(pg.gather(BufferView{out.data() + count * es * rank, count, t}, BufferView{out.data(), count * n, t}, root));
      expect("gather(in place) at root", t, out.data(), want.data(), count * n);
    } else {
      fill(t, in, count, rank, c, false);
      ran(pg.gather(BufferView{in.data(), count, t}, BufferView{}, root));
    }
  }

  void scatter_in_place(DType t, std::size_t count, int root) {
    const int c = ++coll;
    const std::size_t es = dtype_size(t);
    std::vector<std::uint8_t> in(count * es * n), out(count * es, 0x38), want(count * es);
    fill(t, want, count, root * 1000 + rank, c, false);
    if (rank == root) {
      for (int r = 0; r < n; ++r) fill(t, in, count, root * 1000 + r, c, false, count * r);
      ran(pg.scatter(BufferView{in.data(), count * n, t}, BufferView{in.data() + count * es * rank, count, t}, root));
      expect("scatter(in place) at root", t, in.data() + count * es * rank, want.data(), count);
    } else {
      ran(pg.scatter(BufferView{}, BufferView{out.data(), count, t}, root));
      expect("scatter", t, out.data(), want.data(), count);
    }
  }

  void all_gather(DType t, std::size_t count, bool in_place) {
    const int c = ++coll;
    const std::size_t es = dtype_size(t);
    std::vector<std::uint8_t> in(count * es), out(count * es * n, 0x11), want(count * es * n);
    for (int r = 0; r < n; ++r) fill(t, want, count, r, c, false, count * r);
    if (in_place) {
      fill(t, out, count, rank, c, false, count * rank);
      ran(pg.all_gather(BufferView{out.data() + count * es * rank, count, t}, BufferView{out.data(), count * n, t}));
    } else {
      fill(t, in, count, rank, c, false);
      ran(pg.all_gather(BufferView{in.data(), count, t}, BufferView{out.data(), count * n, t}));
    }
    expect(in_place ? "all_gather(in place)" : "all_gather", t, out.data(), want.data(), count * n);
  }

  void gather(DType t, std::size_t count, int root) {
    const int c = ++coll;
    const std::size_t es = dtype_size(t);
    std::vector<std::uint8_t> in(count * es), out(count * es * n, 0x22), want(count * es * n);
    fill(t, in, count, rank, c, false);
    for (int r = 0; r < n; ++r) fill(t, want, count, r, c, false, count * r);
    ran(pg.gather(BufferView{in.data(), count, t}, BufferView{out.data(), rank == root ? count * n : 0, t}, root));
    if (rank == root) expect("gather", t, out.data(), want.data(), count * n);
  }

  void scatter(DType t, std::size_t count, int root) {
    const int c = ++coll;
    const std::size_t es = dtype_size(t);
    std::vector<std::uint8_t> in(count * es * n), out(count * es, 0x33), want(count * es);
    for (int r = 0; r < n; ++r) fill(t, in, count, root * 1000 + r, c, false, count * r);
    fill(t, want, count, root * 1000 + rank, c, false);
    ran(pg.scatter(BufferView{in.data(), rank == root ? count * n : 0, t}, BufferView{out.data(), count, t}, root));
    expect("scatter", t, out.data(), want.data(), count);
  }

  void reduce_scatter(DType t, std::size_t count, ReduceOp op, bool in_place) {
    const int c = ++coll;
    const bool narrow = op == ReduceOp::prod;
    const std::size_t es = dtype_size(t);
    // Element i of block b of rank r's input is input_value(r, c, b*count+i).
    std::vector<std::uint8_t> in(count * es * n), out(count * es, 0x44), want(count * es), keep;
    fill(t, in, count * n, rank, c, narrow);
    keep = in;
    fill_reference(t, want, count, op, c, narrow, count * rank);
    const std::string what = fmt::format("reduce_scatter({}{})", reduce_op_name(op), in_place ? ", in place" : "");
    if (in_place) {
      ran(pg.reduce_scatter(BufferView{in.data(), count * n, t}, BufferView{in.data() + count * es * rank, count, t},
                            op));
      expect(what.c_str(), t, in.data() + count * es * rank, want.data(), count);
    } else {
      ran(pg.reduce_scatter(BufferView{in.data(), count * n, t}, BufferView{out.data(), count, t}, op));
      expect(what.c_str(), t, out.data(), want.data(), count);
      expect((what + " input untouched").c_str(), t, in.data(), keep.data(), count * n);
    }
  }

  void all_to_all(DType t, std::size_t count, bool in_place) {
    const int c = ++coll;
    const std::size_t es = dtype_size(t);
    // Block j of rank r's input is "from r to j".
    std::vector<std::uint8_t> in(count * es * n), out(count * es * n, 0x55), want(count * es * n);
    for (int j = 0; j < n; ++j) fill(t, in, count, rank * 100 + j, c, false, count * j);
    for (int i = 0; i < n; ++i) fill(t, want, count, i * 100 + rank, c, false, count * i);
    if (in_place) {
      ran(pg.all_to_all(BufferView{in.data(), count * n, t}, BufferView{in.data(), count * n, t}));
      expect("all_to_all(in place)", t, in.data(), want.data(), count * n);
    } else {
      ran(pg.all_to_all(BufferView{in.data(), count * n, t}, BufferView{out.data(), count * n, t}));
      expect("all_to_all", t, out.data(), want.data(), count * n);
    }
  }

  // Neighbour exchange without deadlock: even ranks send first.
  void send_recv(DType t, std::size_t count) {
    const int c = ++coll;
    if (n == 1) return;
    const std::size_t es = dtype_size(t);
    const int to = (rank + 1) % n, from = (rank + n - 1) % n;
    std::vector<std::uint8_t> in(count * es), out(count * es, 0x66), want(count * es);
    fill(t, in, count, rank, c, false);
    fill(t, want, count, from, c, false);
    if (rank % 2 == 0) {
      ran(pg.send(BufferView{in.data(), count, t}, to, c));
      ran(pg.recv(BufferView{out.data(), count, t}, from, c));
    } else {
      ran(pg.recv(BufferView{out.data(), count, t}, from, c));
      ran(pg.send(BufferView{in.data(), count, t}, to, c));
    }
    expect("send/recv", t, out.data(), want.data(), count);
  }
};

}  // namespace

int run_matrix(ProcessGroup& pg, const MatrixConfig& cfg, std::ostream& err) {
  Runner run{pg, err, 0, 0, pg.rank(), pg.size(), {}};
  const int n = pg.size();
  for (DType t : cfg.dtypes) {
    std::vector<std::size_t> counts = cfg.elements;
    for (std::size_t b : cfg.bytes) counts.push_back(b / dtype_size(t));
    for (std::size_t count : counts) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
        run.all_reduce(t, count, op, false);
      }
      run.all_reduce(t, count, ReduceOp::sum, true);
      run.broadcast(t, count, n - 1, false);
      run.broadcast(t, count, 0, true);
      run.reduce(t, count, n / 2, ReduceOp::sum);
      run.reduce(t, count, n - 1, ReduceOp::max);
      run.all_gather(t, count, false);
      run.all_gather(t, count, true);
      run.reduce_in_place(t, count, (n + 1) / 2 % n, ReduceOp::min);
      run.gather(t, count, (n + 1) / 2 % n);
      run.gather_in_place(t, count, n - 1);
      run.scatter(t, count, n - 1);
      run.scatter_in_place(t, count, 0);
      run.reduce_scatter(t, count, ReduceOp::sum, false);
      run.reduce_scatter(t, count, ReduceOp::min, true);
      run.reduce_scatter(t, count, ReduceOp::avg, false);
      run.all_to_all(t, count, false);
      run.all_to_all(t, count, true);
      run.send_recv(t, count);
      run.ran(pg.barrier());
    }
  }
  // One line the multi-process tests read: "algorithms: all_reduce=ring
  // broadcast=tree ..." (several, joined by '+', when sizes chose differently).
  std::string line = fmt::format("rank {} algorithms:", pg.rank());
  for (const auto& [op, names] : run.algorithms) line += fmt::format(" {}={}", op, fmt::join(names, "+"));
  err << line << "\n";
  return run.failures;
}

}  // namespace mci::test
