// elastic_train: training that goes on when a rank is lost, in place, with
// no restart (docs/fault-tolerance.md, "In place"). A small linear model on
// mci::DistributedDataParallel over mci's cpu backend:
//
//   mcirun --nproc_per_node=4 --on-rank-loss=continue elastic_train --steps 40 --step-ms 50
//
// Group rank 0 prints "step S world W loss L" after each step; every rank
// prints "final rank R world W sum X bits H" at the end (X: the sum of the
// parameters, %.12e; H: a hash of the parameters' and the optimizer's
// bits; both the same on every rank). When a peer is lost, the
// survivors shrink the group (DistributedDataParallel::recover), take the
// model of the survivor that completed the most steps and redo the
// interrupted step.
//
// Flags:
//   --steps N        optimizer steps (default 20)
//   --step-ms M      milliseconds of simulated compute per step (default 0)
//   --timestamps     rank 0's step lines end with " at T" (ms since the epoch)
//   --whole          under --on-rank-loss=replace, no step runs on fewer
//                    ranks than WORLD_SIZE: after a loss the members wait at
//                    the step boundary for the replacements (up to 60 s,
//                    then they go on and say so). With MCI_REPRODUCIBLE=1
//                    every step then sums the same shares in the same
//                    order, and the run ends with the uninterrupted run's
//                    bits.
//   --die R@S:POINT  the process started as RANK R kills itself with SIGKILL
//                    at step S (repeatable), at POINT: between (before the
//                    step starts), backward (mid-compute, before any
//                    gradient is sent), collective (with its first bucket's
//                    all-reduce running), recovery (when it would recover
//                    from another rank's loss). Only on a job's first
//                    start: a restarted job (TORCHELASTIC_RESTART_COUNT > 0,
//                    mcirun --max-restarts) and a replacement run without
//                    the fault.
// Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT as mcirun sets
// them; MCI_BACKEND (default cpu). Under mcirun --on-rank-loss=replace
// (MCI_ON_RANK_LOSS=replace) the members look for replacements at each step
// boundary and grow the group; a replacement (MCI_REPLACEMENT set) joins
// the running group and takes the model from the others.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mci/mci.hpp"

namespace {

constexpr int kDim = 8;            // inputs per sample
constexpr int kBatch = 48;         // samples per step, split across the ranks
constexpr double kLr = 0.05;       // SGD learning rate
constexpr double kMomentum = 0.9;  // the optimizer's state: one buffer per parameter

enum class Point { between, backward, collective, recovery };

struct Death {
  int rank = -1;
  int step = -1;
  Point point = Point::between;
};

struct Options {
  int steps = 20;
  int step_ms = 0;
  bool timestamps = false;
  bool whole = false;
  std::vector<Death> deaths;
};

struct UsageError {
  std::string text;
};

int to_int(const std::string& flag, const std::string& v) {
  try {
    std::size_t used = 0;
    const int x = std::stoi(v, &used);
    if (used == v.size() && x >= 0) return x;
  } catch (const std::exception&) {
  }
  throw UsageError{fmt::format("{} takes a whole number >= 0, not '{}'", flag, v)};
}

Death parse_death(const std::string& v) {
  const auto at = v.find('@');
  const auto colon = v.find(':', at == std::string::npos ? 0 : at);
  if (at == std::string::npos || colon == std::string::npos) {
    throw UsageError{fmt::format("--die takes RANK@STEP:POINT (e.g. 1@10:backward), not '{}'", v)};
  }
  Death d;
  d.rank = to_int("--die's RANK", v.substr(0, at));
  d.step = to_int("--die's STEP", v.substr(at + 1, colon - at - 1));
  const std::string p = v.substr(colon + 1);
  if (p == "between") {
    d.point = Point::between;
  } else if (p == "backward") {
    d.point = Point::backward;
  } else if (p == "collective") {
    d.point = Point::collective;
  } else if (p == "recovery") {
    d.point = Point::recovery;
  } else {
    throw UsageError{fmt::format("--die's POINT is between, backward, collective or recovery, not '{}'", p)};
  }
  return d;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{fmt::format("{} needs a value", a)};
      return argv[++i];
    };
    if (a == "--steps") {
      o.steps = to_int(a, value());
    } else if (a == "--step-ms") {
      o.step_ms = to_int(a, value());
    } else if (a == "--timestamps") {
      o.timestamps = true;
    } else if (a == "--whole") {
      o.whole = true;
    } else if (a == "--die") {
      o.deaths.push_back(parse_death(value()));
    } else {
      throw UsageError{
          fmt::format("unknown argument '{}' (flags: --steps N --step-ms M --timestamps --whole --die R@S:POINT)", a)};
    }
  }
  return o;
}

// One write per line, so lines of several ranks never mix.
void say(const std::string& line) {
  const std::string s = line + "\n";
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The data: sample i of the whole run, a deterministic function of i, with
// targets from a fixed linear rule, so every run (and every world size)
// sees the same samples.
double input(std::int64_t sample, int k) {
  const auto h = static_cast<std::uint64_t>(sample) * 0x9E3779B97F4A7C15ull +
                 static_cast<std::uint64_t>(k) * 0xBF58476D1CE4E5B9ull;
  return static_cast<double>((h >> 11) % 2001) / 1000.0 - 1.0;
}
double target(std::int64_t sample) {
  double y = 0.5;
  for (int k = 0; k < kDim; ++k) y += (k % 3 - 1) * 0.75 * input(sample, k);
  return y;
}

class Trainer {
 public:
  Trainer(const Options& o, int start_rank, std::shared_ptr<mci::ProcessGroup> pg, bool joining)
      : o_(o),
        start_rank_(start_rank),
        w_(kDim, 0.0),
        b_(1, 0.0),
        dw_(kDim, 0.0),
        db_(1, 0.0),
        vw_(kDim, 0.0),
        vb_(1, 0.0) {
    mci::DdpOptions opts;
    opts.bucket_cap_bytes = 0;  // a bucket per parameter: two all-reduces per step
    opts.broadcast_parameters = !joining;
    ddp_ = std::make_unique<mci::DistributedDataParallel>(
        std::move(pg),
        std::vector<mci::Parameter>{{"weight", mci::view(w_), mci::view(dw_)}, {"bias", mci::view(b_), mci::view(db_)}},
        opts);
    const char* world = std::getenv("WORLD_SIZE");
    full_ = world ? std::atoi(world) : group().size();
    if (joining) {
      joined_ = true;
      // The members grow() at a step boundary: take the most advanced replica.
      done_ = ddp_->sync_replicas(0, {mci::view(vw_), mci::view(vb_)});
      share_gave_up();
      say(fmt::format("joined as rank {} of world {} at step {}", group().rank(), group().size(), done_ + 1));
    }
  }

  int run() {
    std::uint64_t& done = done_;
    const char* policy = std::getenv("MCI_ON_RANK_LOSS");
    const bool replace = policy && std::string(policy) == "replace";
    // A replacement joined at the members' boundary check, after which they
    // go on to the step: so does it, or the collectives would not match.
    bool checked = joined_;
    while (done < static_cast<std::uint64_t>(o_.steps)) {
      const int step = static_cast<int>(done) + 1;
      try {
        // A step boundary: replacements waiting join here.
        const bool check = replace && !checked;
        checked = false;
        if (replace && o_.whole && !gave_up_ && group().size() < full_) {
          wait_whole(step);
        } else if (check && group().joiners_waiting()) {
          grow_at(step);
        }
        const double loss = train_step(step);
        ++done;
        if (group().rank() == 0) {
          say(fmt::format("step {} world {} loss {:.6f}{}", step, group().size(), loss,
                          o_.timestamps ? fmt::format(" at {}", now_ms()) : ""));
        }
      } catch (const mci::PeerError& e) {
        maybe_die(step, Point::recovery);
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = ddp_->recover(done, {mci::view(vw_), mci::view(vb_)});
        const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (group().rank() == 0) {
          say(fmt::format("recovered world {} lost {} in {:.1f} ms: redo step {} ({})", group().size(),
                          fmt::join(r.lost, ","), ms, r.steps_done + 1, e.what()));
        }
        done = r.steps_done;
      }
    }
    double sum = b_[0];
    for (double x : w_) sum += x;
    say(fmt::format("final rank {} world {} sum {:.12e} bits {:016x}", group().rank(), group().size(), sum, bits()));
    return 0;
  }

 private:
  mci::ProcessGroup& group() const { return ddp_->process_group(); }

  // Replacements waiting join at this boundary (grow is collective).
  void grow_at(int step) {
    const auto t0 = std::chrono::steady_clock::now();
    mci::DistributedDataParallel::Growth g;
    try {
      g = ddp_->grow(done_, {mci::view(vw_), mci::view(vb_)});
    } catch (const mci::ConfigError& e) {
      // A joiner lost while the group formed: go on as after a loss.
      throw mci::PeerError(e.what(), -1);
    }
    const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    share_gave_up();
    if (group().rank() == 0) {
      say(fmt::format("grew world {} joined {} in {:.1f} ms at step {}{}", group().size(), g.joined, ms, step,
                      o_.timestamps ? fmt::format(" at {}", now_ms()) : ""));
    }
  }

  // --whole: a replacement that joins after the members gave up waiting
  // must not wait at the next boundary while they step: it hears their
  // state from rank 0 (both sides call this right after the grow).
  void share_gave_up() {
    if (!o_.whole) return;
    std::uint8_t g = gave_up_ ? 1 : 0;
    group().broadcast(mci::view(&g, 1), 0);
    gave_up_ = g != 0;
  }

  // --whole: the group waits at this boundary until it is whole again.
  // Every look is collective (joiners_waiting: rank 0 asks, all hear its
  // answer) and so is giving up (rank 0's clock, broadcast), so the ranks
  // never part ways.
  void wait_whole(int step) {
    constexpr auto kLimit = std::chrono::seconds(60);
    const auto since = std::chrono::steady_clock::now();
    while (group().size() < full_) {
      if (group().joiners_waiting()) {
        grow_at(step);
        continue;
      }
      std::uint8_t give_up = group().rank() == 0 && std::chrono::steady_clock::now() - since > kLimit ? 1 : 0;
      group().broadcast(mci::view(&give_up, 1), 0);
      if (give_up) {
        gave_up_ = true;
        if (group().rank() == 0) {
          say(
              fmt::format("no replacement within 60 s: going on with world {} of {} at step {}; its bits will "
                          "differ from a run that was never interrupted",
                          group().size(), full_, step));
        }
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // FNV-1a over the bytes of the parameters and the optimizer's state: the
  // same bits, the same hash.
  std::uint64_t bits() const {
    std::uint64_t h = 1469598103934665603ull;
    for (const std::vector<double>* v : {&w_, &b_, &vw_, &vb_}) {
      const auto* p = reinterpret_cast<const unsigned char*>(v->data());
      for (std::size_t i = 0; i < v->size() * sizeof(double); ++i) h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
  }

  void maybe_die(int step, Point p) const {
    if (const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT"); attempt && std::atoi(attempt) > 0) return;
    if (mci::is_replacement()) return;  // the fault was the process it replaces'
    for (const auto& d : o_.deaths) {
      if (d.rank == start_rank_ && d.step == step && d.point == p) {
        say(fmt::format("dying: rank {} at step {} at {}", start_rank_, step, now_ms()));
        std::raise(SIGKILL);
      }
    }
  }

  // Forward and backward of the mean squared error on this rank's share of
  // the step's samples, then the averaged gradients, then the update. The
  // update happens only after every all-reduce of the step succeeded.
  double train_step(int step) {
    maybe_die(step, Point::between);
    mci::ProcessGroup& g = group();
    std::fill(dw_.begin(), dw_.end(), 0.0);
    db_[0] = 0.0;
    double loss = 0.0;
    int mine = 0;
    for (int i = g.rank(); i < kBatch; i += g.size()) {
      const std::int64_t s = static_cast<std::int64_t>(step) * kBatch + i;
      double pred = b_[0];
      for (int k = 0; k < kDim; ++k) pred += w_[static_cast<std::size_t>(k)] * input(s, k);
      const double err = pred - target(s);
      loss += err * err;
      for (int k = 0; k < kDim; ++k) dw_[static_cast<std::size_t>(k)] += 2.0 * err * input(s, k);
      db_[0] += 2.0 * err;
      ++mine;
    }
    for (auto& x : dw_) x /= mine;
    db_[0] /= mine;
    loss /= mine;
    if (o_.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o_.step_ms / 2));
    maybe_die(step, Point::backward);
    if (o_.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o_.step_ms - o_.step_ms / 2));
    ddp_->grad_ready(1);  // bias: the last parameter's gradient comes first, as in backward
    maybe_die(step, Point::collective);
    ddp_->finish_gradient_sync();
    g.all_reduce(mci::view(&loss, 1), mci::ReduceOp::avg);
    for (std::size_t k = 0; k < w_.size(); ++k) {
      vw_[k] = kMomentum * vw_[k] + dw_[k];
      w_[k] -= kLr * vw_[k];
    }
    vb_[0] = kMomentum * vb_[0] + db_[0];
    b_[0] -= kLr * vb_[0];
    return loss;
  }

  const Options& o_;
  const int start_rank_;
  std::uint64_t done_ = 0;  // optimizer steps completed
  bool joined_ = false;     // a replacement that joined the running group
  // --whole: the job's WORLD_SIZE, which every step runs on; gave_up_: no
  // replacement came in time, and the steps go on with fewer.
  int full_ = 0;
  bool gave_up_ = false;
  std::vector<double> w_, b_, dw_, db_, vw_, vb_;
  std::unique_ptr<mci::DistributedDataParallel> ddp_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "elastic_train: %s\n", e.text.c_str());
    return 2;
  }
  try {
    mci::InitOptions init;
    if (const char* b = std::getenv("MCI_BACKEND")) init.backend = b;
    const bool joining = mci::is_replacement();
    auto pg = joining ? mci::join_running_group(init) : mci::init_process_group(init);
    const char* rank = std::getenv("RANK");
    Trainer t(o, joining && rank ? std::atoi(rank) : pg->rank(), pg, joining);
    return t.run();
  } catch (const mci::Error& e) {
    std::fprintf(stderr, "elastic_train: %s\n", e.what());
    return 1;
  }
}
