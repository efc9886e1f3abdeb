// One rank of the fault matrix (tests/faults/matrix.py): a small training
// whose result is exact, with a fault injected at a chosen moment by a
// chosen rank.
//
// The training: NSTEPS steps; at step s, sample j (0 <= j < kBatch) has the
// gradient g(s, j), a vector of integers; the step sums every sample's
// gradient (each rank sums its share of the samples, the shares re-split
// among whoever is in the group, then an all_reduce) and adds the sum to
// the model w. Integers: the model after N steps is the same whoever
// computed which share and in what order, so a survivor's final model
// equals the uninterrupted run's exactly if and only if every step was
// applied once. Under --policy continue a rank that meets a failure shrinks
// the group in place, the survivors take the model of the one that
// completed the most steps (steps are applied after their all_reduce
// completes, so a loss can leave them one step apart), and redo the step;
// under replace, a process started in a lost one's place joins at a step
// boundary and takes the model too.
//
//   fault_rank --dir D --steps N --fault F --moment M --victim R --policy P [--step K] [--large-mib L]
//
// F: none, sigkill, sigstop, abort, destroy (the victim's own doing), or
// external (the runner does it: a signal to mcirun, a link cut, a host
// lost; the victim writes D/at.<R> when it reaches the moment and waits a
// moment for it). M: init, first (step 1's all_reduce), large (an
// all_reduce of L MiB at step K), p2p (a ring of sends and receives at step
// K), dump (a flight-recorder dump at step K), shrink (inside the shrink
// after the last rank's loss at step K), grow (inside the grow that takes a
// replacement in), exit (while destroying the group at the end). Each rank
// appends to D/rank<R>.jsonl a line per completed step ({"step", "world",
// "t_ns", and "attempt": 1 in a restarted job), its errors ({"error"}), and at the end {"final", "expected"}:
// hashes of its model and of the uninterrupted run's. The victim writes
// D/fault.<R> (t_ns) just before its own fault, and D/pid.<R> (its pid,
// whose mcirun is the victim's node) before its marker. P: stop, continue,
// replace, or restart (mcirun --max-restarts: a failure ends the rank as
// under stop, and the job's next start, TORCHELASTIC_RESTART_COUNT > 0,
// runs the whole training again without a fault).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "mci/mci.hpp"

namespace {

constexpr int kDim = 16;
constexpr int kBatch = 60;

struct Options {
  std::string dir;
  int steps = 4;
  std::string fault = "none";
  std::string moment = "first";
  int victim = -1;
  std::string policy = "stop";
  int step = 2;  // the step of the fault (large, p2p, dump, shrink)
  int large_mib = 64;
  int step_ms = 50;  // each step's compute: the job lasts long enough for a fault, a replacement, a recovery
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Sample j's gradient at step s: small integers, so no sum overflows.
std::int64_t grad(int s, int j, int k) {
  return static_cast<std::int64_t>(mix((static_cast<std::uint64_t>(s) << 32) ^ (static_cast<std::uint64_t>(j) << 8) ^
                                       static_cast<std::uint64_t>(k)) %
                                   2001) -
         1000;
}

std::uint64_t hash(const std::vector<std::int64_t>& w) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::int64_t v : w) h = mix(h ^ static_cast<std::uint64_t>(v));
  return h;
}

class Log {
 public:
  Log(const std::string& dir, int job_rank) : out_(fmt::format("{}/rank{}.jsonl", dir, job_rank), std::ios::app) {}
  void line(const std::string& json) { out_ << json << "\n" << std::flush; }

 private:
  std::ofstream out_;
};

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

class Rank {
 public:
  Rank(Options o, int job_rank) : o_(std::move(o)), me_(job_rank), log_(o_.dir, job_rank), w_(kDim, 0) {}

  int run() {
    const bool replacement = std::getenv("MCI_REPLACEMENT") != nullptr;
    mci::InitOptions init;
    if (const char* b = std::getenv("FAULT_BACKEND")) init.backend = b;
    init.timeout = std::chrono::milliseconds(
        std::atoll(std::getenv("FAULT_TIMEOUT_MS") ? std::getenv("FAULT_TIMEOUT_MS") : "2000"));
    if (o_.moment == "init" && victim()) inject_later(std::chrono::milliseconds(5));
    try {
      pg_ = replacement ? mci::join_running_group(init) : mci::init_process_group(init);
    } catch (const mci::Error& e) {
      return failed(e, "init");
    }
    if (replacement) take_model_as_joiner();
    // A replacement joined at the members' boundary check, after which they
    // go on to the step: so does it, or their collectives would not match
    // (as examples/elastic/elastic_train.cpp does; on gloo the mismatch cost
    // a timeout after every replacement).
    bool checked = replacement;
    for (int s = done_ + 1; s <= o_.steps;) {
      try {
        if (o_.policy == "replace" && !checked) maybe_grow();
        checked = false;
        step(s);
        ++done_;
        log_.line(fmt::format(R"({{"step":{},"world":{},"attempt":{},"t_ns":{}}})", s, pg_->size(), restarted() ? 1 : 0,
                              now_ns()));
        s = done_ + 1;
      } catch (const mci::Error& e) {
        log_.line(fmt::format(R"({{"error":{},"step":{},"t_ns":{}}})", quoted(e.what()), s, now_ns()));
        if (o_.policy == "stop" || o_.policy == "restart") return failed(e, "step");
        try {
          recover(s);
        } catch (const mci::Error& again) {
          return failed(again, "recovery");
        }
        s = done_ + 1;
      }
    }
    std::vector<std::int64_t> expected(kDim, 0);
    for (int s = 1; s <= o_.steps; ++s) {
      for (int j = 0; j < kBatch; ++j) {
        for (int k = 0; k < kDim; ++k) expected[k] += grad(s, j, k);
      }
    }
    log_.line(fmt::format(R"({{"final":"{:016x}","expected":"{:016x}","world":{},"t_ns":{}}})", hash(w_),
                          hash(expected), pg_->size(), now_ns()));
    if (o_.moment == "exit" && victim()) inject_now();
    pg_.reset();  // the group closes here (under "exit", with the victim's fault around it)
    return 0;
  }

 private:
  // A restarted job does no fault again: its start is the recovery.
  bool victim() const { return me_ == o_.victim && o_.fault != "none" && !restarted(); }
  static bool restarted() {
    const char* count = std::getenv("TORCHELASTIC_RESTART_COUNT");
    return count && std::string(count) != "0";
  }

  // Sums this rank's share of step s's samples: samples i, i + n, ... for
  // group rank i of n.
  std::vector<std::int64_t> share(int s) const {
    std::vector<std::int64_t> g(kDim, 0);
    for (int j = pg_->rank(); j < kBatch; j += pg_->size()) {
      for (int k = 0; k < kDim; ++k) g[k] += grad(s, j, k);
    }
    return g;
  }

  void step(int s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(o_.step_ms));  // the step's compute
    if (s == o_.step && (o_.moment == "shrink" || o_.moment == "grow") && me_ == last_ && !first_loss_) {
      // The first loss, whose shrink (or the grow that replaces it) the
      // victim's fault then hits.
      first_loss_ = true;
      ::raise(SIGKILL);
    }
    std::vector<std::int64_t> g = share(s);
    const bool here = s == (o_.moment == "first" ? 1 : o_.step) && victim() && !injected_;
    // The others come a moment later, so that the victim waits inside the
    // collective when its fault comes.
    if (o_.moment == "first" && s == 1 && me_ != o_.victim) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (here && o_.moment == "first") {
      if (o_.fault == "destroy") destroy_in_flight(g);
      inject_later(std::chrono::milliseconds(5));
    }
    pg_->all_reduce(mci::view(g), mci::ReduceOp::sum);
    if (s == o_.step && (o_.moment == "large" || o_.moment == "p2p" || o_.moment == "dump")) moment_op(here);
    for (int k = 0; k < kDim; ++k) w_[k] += g[k];
  }

  // destroy_process_group with work in flight: the operation is issued,
  // the group destroyed before it is waited on; then this rank leaves.
  [[noreturn]] void destroy_in_flight(std::vector<std::int64_t>& g) {
    injected_ = true;
    write_fault_time();
    mci::Work w = pg_->all_reduce(mci::view(g), mci::ReduceOp::sum, mci::Exec::async);
    pg_.reset();
    try {
      w.wait();
    } catch (const mci::Error&) {
    }
    throw mci::Error("this rank destroyed its group with an all_reduce in flight, and leaves");
  }

  void moment_op(bool here) {
    if (here && o_.fault == "destroy") {
      std::vector<std::int64_t> g(kDim, 0);
      destroy_in_flight(g);
    }
    if (o_.moment == "large") {
      std::vector<float> big(static_cast<std::size_t>(o_.large_mib) << 18, 1.0f);
      if (here) inject_later(std::chrono::milliseconds(5));
      pg_->all_reduce(mci::view(big), mci::ReduceOp::sum);
      if (big.front() != static_cast<float>(pg_->size()) || big.back() != static_cast<float>(pg_->size())) {
        throw mci::Error(fmt::format("the large all_reduce gave {} instead of {}", big.front(), pg_->size()));
      }
    } else if (o_.moment == "p2p") {
      std::vector<float> out(1 << 18, static_cast<float>(me_)), in(1 << 18, -1.0f);
      const int n = pg_->size(), r = pg_->rank();
      if (n < 2) return;  // a survivor left alone has no ring
      if (here) {
        inject_later(std::chrono::milliseconds(5));
      } else if (me_ != o_.victim) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the victim's receive waits for them
      }
      mci::Work a = pg_->recv(mci::view(in), (r + n - 1) % n, 3, mci::Exec::async);
      mci::Work b = pg_->send(mci::view(out), (r + 1) % n, 3, mci::Exec::async);
      a.wait();
      b.wait();
    } else if (o_.moment == "dump") {
      if (here) {
        std::thread d([this] {
          try {
            pg_->dump_flight_recorder();
          } catch (const mci::Error&) {
          }
        });
        inject_now();
        d.join();
      }
      pg_->barrier();
    }
  }

  // After a failure: the survivors' group, the model of whoever completed
  // the most steps.
  void recover(int s) {
    if (!pg_) throw mci::Error("its group is destroyed: this rank leaves the job");
    if (o_.moment == "shrink" && victim() && s == o_.step && !injected_) inject_later(std::chrono::milliseconds(0));
    // A rank lost inside the recovery, after the survivors agreed and before
    // they shared the model, is one more loss: shrink again, as a program
    // must. Each shrink leaves out at least the rank just lost, so it ends
    // (a shrink with nobody left throws).
    while (true) {
      mci::ProcessGroup::Shrunk shrunk = pg_->shrink();
      pg_ = shrunk.group;
      try {
        sync_model();
        return;
      } catch (const mci::PeerError& e) {
        log_.line(fmt::format(R"({{"error":{},"step":{},"t_ns":{}}})", quoted(e.what()), s, now_ns()));
      }
    }
  }

  void sync_model() {
    std::vector<std::int64_t> most{done_};
    pg_->all_reduce(mci::view(most), mci::ReduceOp::max);
    std::vector<std::int64_t> who{done_ == most[0] ? pg_->rank() : pg_->size()};
    pg_->all_reduce(mci::view(who), mci::ReduceOp::min);
    pg_->broadcast(mci::view(w_), static_cast<int>(who[0]));
    done_ = static_cast<int>(most[0]);
  }

  // Replacements wait to join at a step boundary.
  void maybe_grow() {
    if (!pg_->joiners_waiting()) return;
    if (o_.moment == "grow" && victim() && !injected_) inject_later(std::chrono::milliseconds(0));
    mci::ProcessGroup::Grown grown = pg_->grow();
    pg_ = grown.group;
    sync_model();
  }

  void take_model_as_joiner() { sync_model(); }

  // The runner's cue: this rank's pid first (which node runs it, when an
  // elastic job numbers its nodes itself), then the marker.
  void mark_moment() const {
    std::ofstream(fmt::format("{}/pid.{}", o_.dir, me_)) << ::getpid() << "\n";
    std::ofstream(fmt::format("{}/at.{}", o_.dir, me_)) << now_ns() << "\n";
  }

  void write_fault_time() { std::ofstream(fmt::format("{}/fault.{}", o_.dir, me_)) << now_ns() << "\n"; }

  // The fault now, on this thread (or, for "external", the marker the
  // runner waits for).
  void inject_now() {
    if (injected_) return;
    injected_ = true;
    write_fault_time();
    if (o_.fault == "sigkill") ::raise(SIGKILL);
    if (o_.fault == "sigstop") ::raise(SIGSTOP);
    if (o_.fault == "abort") pg_->abort("the fault matrix's abort");
    if (o_.fault == "external") mark_moment();
  }

  // The fault from a thread of its own, `after` once the operation that
  // follows has begun: a kill, a stop or an abort inside it.
  void inject_later(std::chrono::milliseconds after) {
    if (injected_) return;
    injected_ = true;
    helper_ = std::thread([this, after] {
      std::this_thread::sleep_for(after);
      write_fault_time();
      if (o_.fault == "sigkill") ::raise(SIGKILL);
      if (o_.fault == "sigstop") ::raise(SIGSTOP);
      if (o_.fault == "abort" && pg_) pg_->abort("the fault matrix's abort");
      if (o_.fault == "external") mark_moment();
    });
    helper_.detach();
  }

  int failed(const mci::Error& e, const char* where) {
    log_.line(fmt::format(R"({{"error":{},"where":"{}","t_ns":{}}})", quoted(e.what()), where, now_ns()));
    std::fprintf(stderr, "fault_rank: rank %d (%s): %s\n", me_, where, e.what());
    return 1;
  }

  Options o_;
  int me_;
  int last_ = static_cast<int>(std::atoi(std::getenv("WORLD_SIZE") ? std::getenv("WORLD_SIZE") : "1")) - 1;
  Log log_;
  std::shared_ptr<mci::ProcessGroup> pg_;
  std::vector<std::int64_t> w_;
  int done_ = 0;
  bool injected_ = false;
  bool first_loss_ = false;
  std::thread helper_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--dir")
      o.dir = v;
    else if (a == "--steps")
      o.steps = std::atoi(v.c_str());
    else if (a == "--fault")
      o.fault = v;
    else if (a == "--moment")
      o.moment = v;
    else if (a == "--victim")
      o.victim = std::atoi(v.c_str());
    else if (a == "--policy")
      o.policy = v;
    else if (a == "--step")
      o.step = std::atoi(v.c_str());
    else if (a == "--large-mib")
      o.large_mib = std::atoi(v.c_str());
    else if (a == "--step-ms")
      o.step_ms = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "fault_rank: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  const char* rank = std::getenv("RANK");
  if (o.dir.empty() || !rank) {
    std::fprintf(stderr, "fault_rank: --dir and RANK are required\n");
    return 2;
  }
  // A replacement takes the lost rank's RANK: its lines go to a file of its own.
  const int job_rank = std::atoi(rank) + (std::getenv("MCI_REPLACEMENT") ? 1000 : 0);
  return Rank(o, job_rank).run();
}
