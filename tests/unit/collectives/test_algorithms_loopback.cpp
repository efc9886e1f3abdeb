// Every mesh row of the algorithm table, run through run_algorithm with one
// thread per rank over the loopback transport, on 1 to 5 ranks, and checked
// element by element against values computed locally (the inputs and
// references of the collective matrix, perf/check.hpp). The cases come from
// the collective a row serves, so a new algorithm for a known collective is
// tested without a line here; a row this file cannot exercise fails the test.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "collectives/algorithm_table.hpp"
#include "mci/errors.hpp"
#include "perf/check.hpp"
#include "support/loopback_ranks.hpp"
#include "support/loopback_transport.hpp"

namespace mci::coll {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;

constexpr int kMaxWorld = 5;
constexpr std::uint8_t kSentinel = 0xA5;  // no input or reference value has these bytes

// One call of one row, the same on every rank.
struct Case {
  const AlgoRow* row = nullptr;
  DType dtype = DType::f32;
  std::size_t count = 0;  // CollectiveDesc::count
  bool in_place = false;
  int root = -1;
  ReduceOp op = ReduceOp::sum;
  int round = 0;  // seeds the inputs; the sequence number (and the tag for p2p)

  std::string str() const {
    std::string s = fmt::format("{} {} {} x {}", algo_name(row->algo), op_name(row->kind), dtype_name(dtype), count);
    if (has_reduce_op(row->kind)) s += fmt::format(" {}", reduce_op_name(op));
    if (root >= 0) s += fmt::format(" root {}", root);
    if (in_place) s += " in place";
    return s;
  }
};

// Sizes 0, 1 and 7, and one that spans several pipeline chunks: for the ring
// all-reduce each rank's block must, for the others the per-rank count.
std::vector<std::size_t> counts_for(OpKind k, DType t, int n) {
  const std::size_t chunk = kPipelineChunkBytes / dtype_size(t);
  return {0, 1, 7, chunk * (k == OpKind::all_reduce ? static_cast<std::size_t>(n) : 1) + 3};
}

// Every case for a world of n ranks, in the order every rank runs them.
std::vector<Case> cases_for(int n) {
  std::vector<Case> out;
  auto add = [&](Case c) {
    c.round = static_cast<int>(out.size()) + 1;
    out.push_back(c);
  };
  for (const AlgoRow& row : algorithm_table()) {
    if (row.place != Place::mesh) continue;
    switch (row.kind) {
      case OpKind::barrier: add(Case{.row = &row, .dtype = DType::u8}); continue;
      case OpKind::recv: continue;  // runs with its send
      case OpKind::send:
        if (n == 1 || !find_algorithm(row.algo, OpKind::recv)) continue;
        for (DType t : {DType::f32, DType::i32}) {
          for (std::size_t c : counts_for(row.kind, t, n)) add(Case{.row = &row, .dtype = t, .count = c});
        }
        continue;
      case OpKind::all_reduce:
      case OpKind::broadcast:
      case OpKind::reduce:
      case OpKind::all_gather:
      case OpKind::gather:
      case OpKind::scatter:
      case OpKind::reduce_scatter:
      case OpKind::all_to_all: break;
    }
    const std::vector<int> roots = !has_root(row.kind) ? std::vector<int>{-1}
                                   : n == 1            ? std::vector<int>{0}
                                                       : std::vector<int>{0, n - 1};
    for (DType t : {DType::f32, DType::i32}) {
      for (std::size_t c : counts_for(row.kind, t, n)) {
        std::vector<ReduceOp> ops = {ReduceOp::sum};
        if (has_reduce_op(row.kind) && c <= 7) ops = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max};
        for (bool in_place : {false, true}) {
          for (int root : roots) {
            for (ReduceOp op : ops) {
              add(Case{.row = &row, .dtype = t, .count = c, .in_place = in_place, .root = root, .op = op});
            }
          }
        }
      }
    }
  }
  return out;
}

// The buffers of one rank for one case, and what they must hold afterwards.
class RankCase {
 public:
  RankCase(const Case& c, int rank, int n) : c_(c), r_(rank), n_(n), es_(dtype_size(c.dtype)) {}

  // Runs the case; returns "" or what went wrong.
  std::string run(transport::Transport& t, Scratch& scratch) {
    CollectiveDesc d;
    d.kind = c_.row->kind;
    d.algo = c_.row->algo;
    d.count = c_.count;
    d.dtype = c_.dtype;
    d.op = c_.op;
    d.root = c_.root;
    d.seq = static_cast<std::uint64_t>(c_.round);
    d.tag = c_.round;
    if (d.kind == OpKind::send) return run_pair(t, scratch, d);
    setup(d);
    const Bytes keep = in_;
    run_algorithm(Places{.mesh = &t}, d, Deadline(60s), scratch);
    std::string err = compare("result", result_, want_.data(), want_.size());
    if (err.empty() && input_untouched_) err = compare("input", in_.data(), keep.data(), keep.size());
    if (err.empty() && !sentinel_.empty())
      err = compare("non-root output", out_.data(), sentinel_.data(), sentinel_.size());
    return err;
  }

 private:
  // Elements [first, first + count) of rank key's input, at element `at` of b.
  void fill(Bytes& b, std::size_t at, std::size_t count, int key, std::size_t first = 0) const {
    perf::fill_values(c_.dtype, b.data() + at * es_, count,
                      [&](std::size_t i) { return perf::input_value(c_.dtype, key, c_.round, first + i, false); });
  }
  void fill_reduced(Bytes& b, std::size_t count, std::size_t first) const {
    perf::fill_values(c_.dtype, b.data(), count, [&](std::size_t i) {
      return perf::reduced_value(c_.dtype, c_.op, n_, c_.round, first + i, false);
    });
  }
  Bytes elems(std::size_t count) const { return Bytes(count * es_, kSentinel); }
  std::uint8_t* block(Bytes& b, int i) const { return b.data() + static_cast<std::size_t>(i) * c_.count * es_; }

  // The buffers and references of the collective matrix (tests/support/matrix.cpp),
  // with the in-place layouts the front end accepts (group/validate.cpp).
  void setup(CollectiveDesc& d) {
    const std::size_t c = c_.count;
    const bool root = r_ == c_.root;
    input_untouched_ = !c_.in_place;
    switch (d.kind) {
      case OpKind::all_reduce:
      case OpKind::broadcast:
      case OpKind::reduce:
        in_ = elems(c);
        out_ = elems(c);
        fill(in_, 0, c, r_);
        d.in = in_.data();
        d.out = c_.in_place ? in_.data() : out_.data();
        result_ = static_cast<std::uint8_t*>(d.out);
        want_ = elems(c);
        if (d.kind == OpKind::broadcast) {
          fill(want_, 0, c, c_.root);
        } else if (d.kind == OpKind::all_reduce || root) {
          fill_reduced(want_, c, 0);
        } else {
          // A reduce leaves everything but the root's output alone.
          want_ = in_;
          result_ = in_.data();
          input_untouched_ = false;
          if (!c_.in_place) sentinel_ = out_;
        }
        break;
      case OpKind::all_gather:
      case OpKind::gather:
        want_ = elems(c * n_);
        for (int j = 0; j < n_; ++j) fill(want_, c * j, c, j);
        in_ = elems(c);
        fill(in_, 0, c, r_);
        d.in = in_.data();
        if (d.kind == OpKind::gather && !root) {
          want_.clear();  // nothing to receive; the input must stay
          input_untouched_ = true;
          break;
        }
        out_ = elems(c * n_);
        if (c_.in_place) {
          fill(out_, c * r_, c, r_);
          d.in = block(out_, r_);
        }
        d.out = out_.data();
        result_ = out_.data();
        break;
      case OpKind::scatter:
        want_ = elems(c);
        fill(want_, 0, c, c_.root * 1000 + r_);
        out_ = elems(c);
        d.out = out_.data();
        result_ = out_.data();
        input_untouched_ = root;  // in place too: the root's own block is already right
        if (!root) break;
        in_ = elems(c * n_);
        for (int j = 0; j < n_; ++j) fill(in_, c * j, c, c_.root * 1000 + j);
        d.in = in_.data();
        if (c_.in_place) {
          d.out = block(in_, r_);
          result_ = block(in_, r_);
        }
        break;
      case OpKind::reduce_scatter:
        in_ = elems(c * n_);
        fill(in_, 0, c * n_, r_);
        want_ = elems(c);
        fill_reduced(want_, c, c * r_);
        out_ = elems(c);
        d.in = in_.data();
        d.out = c_.in_place ? block(in_, r_) : out_.data();
        result_ = static_cast<std::uint8_t*>(d.out);
        break;
      case OpKind::all_to_all:
        in_ = elems(c * n_);
        for (int j = 0; j < n_; ++j) fill(in_, c * j, c, r_ * 100 + j);
        want_ = elems(c * n_);
        for (int i = 0; i < n_; ++i) fill(want_, c * i, c, i * 100 + r_);
        out_ = elems(c * n_);
        d.in = in_.data();
        d.out = c_.in_place ? in_.data() : out_.data();
        result_ = static_cast<std::uint8_t*>(d.out);
        break;
      case OpKind::barrier:
      case OpKind::send:
      case OpKind::recv: d.count = 0; break;
    }
  }

  // Rank r sends to r+1 and receives from r-1, with the send row and its recv.
  std::string run_pair(transport::Transport& t, Scratch& scratch, CollectiveDesc send) {
    const std::size_t c = c_.count;
    in_ = elems(c);
    fill(in_, 0, c, r_);
    const Bytes keep = in_;
    out_ = elems(c);
    want_ = elems(c);
    const int from = (r_ + n_ - 1) % n_;
    fill(want_, 0, c, from);
    send.in = in_.data();
    send.peer = (r_ + 1) % n_;
    CollectiveDesc recv = send;
    recv.kind = OpKind::recv;
    recv.in = nullptr;
    recv.out = out_.data();
    recv.peer = from;
    run_algorithm(Places{.mesh = &t}, send, Deadline(60s), scratch);
    run_algorithm(Places{.mesh = &t}, recv, Deadline(60s), scratch);
    std::string err = compare("received", out_.data(), want_.data(), want_.size());
    return err.empty() ? compare("sent buffer", in_.data(), keep.data(), keep.size()) : err;
  }

  std::string compare(const char* what, const std::uint8_t* got, const std::uint8_t* want, std::size_t bytes) const {
    if (bytes == 0 || std::memcmp(got, want, bytes) == 0) return "";
    for (std::size_t i = 0; i < bytes / es_; ++i) {
      if (std::memcmp(got + i * es_, want + i * es_, es_) != 0) {
        return fmt::format("{}: element {} of {} is {} but must be {}", what, i, bytes / es_,
                           perf::get_value(c_.dtype, got, i), perf::get_value(c_.dtype, want, i));
      }
    }
    return fmt::format("{} differs", what);
  }

  const Case& c_;
  int r_;
  int n_;
  std::size_t es_;
  Bytes in_, out_, want_, sentinel_;
  const std::uint8_t* result_ = nullptr;
  bool input_untouched_ = false;
};

// Runs every case on n threads; returns what went wrong, rank by rank.
// window_bytes: what the links hold in flight (0: sends complete at once).
std::vector<std::string> run_world(int n, const std::vector<Case>& cases, std::size_t window_bytes = 0) {
  std::vector<std::vector<std::string>> failures(static_cast<std::size_t>(n));
  const std::vector<std::string> errors = test::run_loopback(
      n,
      [&](transport::LoopbackTransport& t) {
        const int r = t.rank();
        Scratch scratch;  // reused across calls, as a group reuses it
        const Case* current = nullptr;
        try {
          for (const Case& c : cases) {
            current = &c;
            std::string err = RankCase(c, r, n).run(t, scratch);
            if (!err.empty()) failures[r].push_back(fmt::format("rank {} of {}, {}: {}", r, n, c.str(), err));
          }
        } catch (const std::exception& e) {
          t.abort(e.what());  // the others fail at once instead of at their deadline
          throw std::runtime_error(
              fmt::format("rank {} of {}, {}: threw {}", r, n, current ? current->str() : "?", e.what()));
        }
      },
      window_bytes);
  return test::flatten(failures, errors);
}

TEST(MeshAlgorithmsOverLoopback, EveryMeshRowMatchesTheLocalReference) {
  std::map<const AlgoRow*, int> exercised;  // clean runs per row
  for (int n = 1; n <= kMaxWorld; ++n) {
    const std::vector<Case> cases = cases_for(n);
    const std::vector<std::string> failures = run_world(n, cases);
    for (std::size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << failures[i];
    if (!failures.empty()) continue;
    for (const Case& c : cases) {
      ++exercised[c.row];
      if (c.row->kind == OpKind::send) ++exercised[find_algorithm(c.row->algo, OpKind::recv)];
    }
  }
  for (const AlgoRow& row : algorithm_table()) {
    if (row.place != Place::mesh) continue;
    EXPECT_GT(exercised[&row], 0) << "the mesh row " << algo_name(row.algo) << " " << op_name(row.kind)
                                  << " ran no case cleanly: give its collective cases in " << __FILE__;
  }
}

// Links that hold 16 KiB in flight, as TCP's buffers do early in a job: a
// send can still be leaving the caller's buffer when the receive beside it
// is done, so an algorithm that changes a buffer before its send is
// complete sends the change (issue 49).
TEST(MeshAlgorithmsOverLoopback, EveryMeshRowOverLinksThatTakeLittleAtATime) {
  for (int n = 2; n <= kMaxWorld; ++n) {
    const std::vector<std::string> failures = run_world(n, cases_for(n), 16 * 1024);
    for (std::size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << failures[i];
  }
}

// Ranks that chose different algorithms (e.g. MCI_ALGO set on one) must fail
// loudly, not exchange frames that mean different things.
TEST(MeshAlgorithmsOverLoopback, RanksThatChoseDifferentAlgorithmsGetAMismatch) {
  // Each rank's text: the mismatch it saw, or the PeerError of the other
  // rank, which saw it first and aborted.
  const std::vector<std::string> errors = test::run_loopback(2, [](transport::LoopbackTransport& t) {
    Scratch scratch;
    std::vector<float> buf(16, 1.0f);
    CollectiveDesc d;
    d.kind = OpKind::all_reduce;
    d.algo = t.rank() == 0 ? Algo::ring : Algo::direct;
    d.count = buf.size();
    d.in = d.out = buf.data();
    d.seq = 1;
    try {
      run_algorithm(Places{.mesh = &t}, d, Deadline(10s), scratch);
    } catch (const MismatchError& e) {
      t.abort(e.what());
      throw;
    }
  });
  const std::string both = errors[0] + " | " + errors[1];
  EXPECT_NE(both.find("chose the"), std::string::npos) << both;
  EXPECT_NE(both.find("ring"), std::string::npos) << both;
  EXPECT_NE(both.find("direct"), std::string::npos) << both;
}

}  // namespace
}  // namespace mci::coll
