// mci::torch::DistributedDataParallel against the arithmetic it promises:
// N ranks training with DDP take, step by step, the same weights as one
// process training on the union of their batches, and hold bit-identical
// weights; no_sync() accumulates; unused parameters, models that differ
// between ranks and a rank dying mid-backward end in clear errors, never a
// hang. Each scenario is one rank of a real multi-process job.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
// IValue complete first: see examples/train/train_ddp.cpp (clang 14, C++20).
#include <ATen/core/ivalue.h>
#include <torch/torch.h>

#include "mci/mci.hpp"
#include "mci/torch.hpp"
#include "support/job.hpp"
#include "support/rank.hpp"
#include "support/scenario.hpp"

namespace {

constexpr int kIn = 16;
constexpr int kBatch = 8;  // per rank and step

// Two layers and a branch `b` that some scenarios leave out of the forward.
struct NetImpl : ::torch::nn::Module {
  explicit NetImpl(int hidden = 32)
      : fc1(register_module("fc1", ::torch::nn::Linear(kIn, hidden))),
        fc2(register_module("fc2", ::torch::nn::Linear(hidden, 4))),
        b(register_module("b", ::torch::nn::Linear(kIn, 4))) {}
  ::torch::Tensor forward(const ::torch::Tensor& x, bool use_b = true) {
    auto y = fc2(::torch::relu(fc1(x)));
    return use_b ? y + b(x) : y;
  }
  ::torch::nn::Linear fc1, fc2, b;
};
TORCH_MODULE(Net);

}  // namespace

namespace mci::test {
namespace {

// Rank r's batch at `step`, the same on every process that asks.
std::pair<::torch::Tensor, ::torch::Tensor> batch(int step, int r) {
  ::torch::manual_seed(1000 + 100 * step + r);
  return {::torch::randn({kBatch, kIn}), ::torch::randint(0, 4, {kBatch}, ::torch::kLong)};
}

Net seeded_net(int seed, int hidden = 32) {
  ::torch::manual_seed(seed);
  return Net(hidden);
}

double max_abs_diff(Net& a, Net& b) {
  double most = 0;
  auto pa = a->parameters(), pb = b->parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) most = std::max(most, (pa[i] - pb[i]).abs().max().item<double>());
  return most;
}

double max_grad_diff(Net& a, Net& b) {
  double most = 0;
  auto pa = a->parameters(), pb = b->parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    most = std::max(most, (pa[i].grad() - pb[i].grad()).abs().max().item<double>());
  }
  return most;
}

// Whether every rank holds exactly these bytes (rank 0's, gathered).
bool identical_on_every_rank(ProcessGroup& pg, Net& net) {
  std::vector<float> mine;
  for (const auto& p : net->parameters()) {
    const auto c = p.detach().contiguous();
    mine.insert(mine.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  std::vector<float> all(mine.size() * static_cast<std::size_t>(pg.size()));
  pg.all_gather(view(mine), view(all));
  for (int r = 1; r < pg.size(); ++r) {
    if (std::memcmp(all.data(), all.data() + mine.size() * static_cast<std::size_t>(r), mine.size() * sizeof(float)) !=
        0) {
      return false;
    }
  }
  return true;
}

// Where each parameter's gradient lives: its first byte and its size.
using GradPlaces = std::vector<std::pair<const std::byte*, std::size_t>>;
GradPlaces grad_places(Net& net) {
  GradPlaces places;
  for (const auto& p : net->parameters()) {
    const auto& g = p.grad();
    places.emplace_back(g.defined() ? static_cast<const std::byte*>(g.data_ptr()) : nullptr,
                        g.defined() ? g.nbytes() : 0);
  }
  return places;
}

// Whether the gradients lie back to back in one buffer (DDP's bucket).
bool one_buffer(GradPlaces places) {
  std::sort(places.begin(), places.end());
  for (std::size_t i = 0; i < places.size(); ++i) {
    if (!places[i].first) return false;
    if (i > 0 && places[i].first != places[i - 1].first + places[i - 1].second) return false;
  }
  return true;
}

// How many of the gradients are no longer where they were at `home`.
std::size_t moved(const GradPlaces& home, const GradPlaces& now) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < home.size(); ++i) n += home[i].first != now[i].first;
  return n;
}

// The optimizer's zero_grad() (MCI_TEST_ZERO_GRAD=default: zeros on
// LibTorch 1.13, None on 2.x), or every gradient set to None by hand as
// 2.x's does (none), on either LibTorch.
void zero_grad(::torch::optim::Optimizer& opt, Net& net, const std::string& how) {
  if (how == "none") {
    for (auto& p : net->parameters()) p.mutable_grad().reset();
  } else {
    opt.zero_grad();
  }
}

::torch::Tensor loss_of(Net& net, int step, int r, bool use_b = true) {
  auto [x, y] = batch(step, r);
  return ::torch::nn::functional::cross_entropy(net->forward(x, use_b), y);
}

std::string env_or(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v ? v : dflt;
}

// The reference: one process whose loss is the mean over the union of every
// rank's batch (the mean of the ranks' means: the batches have one size).
void reference_backward(Net& ref, int step, int world, const std::vector<bool>& uses_b) {
  ::torch::Tensor total = ::torch::zeros({});
  for (int r = 0; r < world; ++r) total = total + loss_of(ref, step, r, uses_b[static_cast<std::size_t>(r)]);
  (total / world).backward();
}

// MCI_TEST_BUCKET_MB, MCI_TEST_HOOK (bf16), MCI_TEST_TOLERANCE: 20 steps of
// SGD with DDP beside the one-process reference. MCI_TEST_ZERO_GRAD
// (default, none): how gradients are cleared, and every step checks that
// each gradient is still where DDP put it at construction, in one bucket.
MCI_SCENARIO(torch_matches_one_process) {
  auto pg = join();
  const int rank = pg->rank(), world = pg->size();
  Net net = seeded_net(42 + rank);  // different starting weights: DDP must broadcast rank 0's
  Net ref = seeded_net(42);
  mci::torch::DdpOptions o;
  o.bucket_cap_mb = std::stod(env_or("MCI_TEST_BUCKET_MB", "25"));
  if (env_or("MCI_TEST_HOOK", "") == "bf16") o.comm_hook = bf16_compress_hook();
  const double tolerance = std::stod(env_or("MCI_TEST_TOLERANCE", "1e-5"));
  const std::string zero = env_or("MCI_TEST_ZERO_GRAD", "");
  mci::torch::DistributedDataParallel ddp(pg, net, o);
  say(fmt::format("buckets {}", ddp.num_buckets()));
  const GradPlaces home = grad_places(net);
  if (!zero.empty() && !one_buffer(home)) {
    say("after construction the gradients are not in one bucket");
    return exit_code::failed;
  }
  ::torch::optim::SGD opt(net->parameters(), ::torch::optim::SGDOptions(0.1));
  ::torch::optim::SGD ref_opt(ref->parameters(), ::torch::optim::SGDOptions(0.1));
  if (max_abs_diff(net, ref) != 0.0) return exit_code::failed;
  double worst = 0;
  std::size_t left_bucket = 0;  // gradients found outside their bucket, over all steps
  for (int step = 0; step < 20; ++step) {
    zero_grad(opt, net, zero);
    loss_of(net, step, rank).backward();
    if (!zero.empty()) {
      const std::size_t n = moved(home, grad_places(net));
      if (n > 0) say(fmt::format("step {}: {} of {} gradients are outside their bucket", step, n, home.size()));
      left_bucket += n;
    }
    opt.step();
    ref_opt.zero_grad();
    reference_backward(ref, step, world, std::vector<bool>(static_cast<std::size_t>(world), true));
    ref_opt.step();
    const double d = max_abs_diff(net, ref);
    worst = std::max(worst, d);
    if (d > tolerance) {
      say(fmt::format("step {}: max abs difference {} > {}", step, d, tolerance));
      return exit_code::failed;
    }
    if (!identical_on_every_rank(*pg, net)) {
      say(fmt::format("step {}: the ranks' weights differ", step));
      return exit_code::failed;
    }
  }
  say(fmt::format("20 steps, max abs difference {:.3g}, identical on every rank", worst));
  if (left_bucket > 0) return exit_code::failed;
  if (!zero.empty()) say("every gradient stayed in its bucket");
  return exit_code::ok;
}

// Three micro-batches, the first two under no_sync(): no communication
// until the third backward, whose averaged sum equals one large batch.
MCI_SCENARIO(torch_no_sync_accumulates) {
  auto pg = join();
  const int rank = pg->rank(), world = pg->size();
  Net net = seeded_net(42), ref = seeded_net(42);
  std::optional<mci::torch::DistributedDataParallel<Net>> ddp(std::in_place, pg, net);
  for (int micro = 0; micro < 3; ++micro) {
    const auto seq = pg->last_seq();
    if (micro < 2) {
      auto guard = ddp->no_sync();
      loss_of(net, micro, rank).backward();
    } else {
      loss_of(net, micro, rank).backward();
    }
    if (micro < 2 && pg->last_seq() != seq) {
      say("no_sync() backward communicated");
      return exit_code::failed;
    }
    reference_backward(ref, micro, world, std::vector<bool>(static_cast<std::size_t>(world), true));
  }
  const double d = max_grad_diff(net, ref);
  say(fmt::format("accumulated gradient max abs difference {:.3g}", d));
  // The gradients lived in DDP's buckets: they outlive it, unchanged.
  ddp.reset();
  const double after = max_grad_diff(net, ref);
  if (after != d) say(fmt::format("after DDP is gone: max abs difference {:.3g}", after));
  return d <= 1e-5 && after == d ? exit_code::ok : exit_code::failed;
}

// Branch b is used on rank 0 only (MCI_TEST_B_RANKS=0) or on no rank
// (MCI_TEST_B_RANKS=none); MCI_TEST_FIND_UNUSED=1 sets find_unused_parameters.
MCI_SCENARIO(torch_unused_parameter) {
  auto pg = join();
  const int rank = pg->rank(), world = pg->size();
  const std::string b_ranks = env_or("MCI_TEST_B_RANKS", "0");
  std::vector<bool> uses_b(static_cast<std::size_t>(world), false);
  if (b_ranks == "0") uses_b[0] = true;
  Net net = seeded_net(42), ref = seeded_net(42);
  mci::torch::DdpOptions o;
  o.find_unused_parameters = env_or("MCI_TEST_FIND_UNUSED", "0") == "1";
  o.bucket_cap_mb = 0.001;  // two buckets: b's (with fc2 and fc1.bias) and fc1.weight's
  mci::torch::DistributedDataParallel ddp(pg, net, o);
  ::torch::optim::SGD opt(net->parameters(), ::torch::optim::SGDOptions(0.1));
  ::torch::optim::SGD ref_opt(ref->parameters(), ::torch::optim::SGDOptions(0.1));
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    loss_of(net, step, rank, uses_b[static_cast<std::size_t>(rank)]).backward();
    opt.step();
    ref_opt.zero_grad();
    reference_backward(ref, step, world, uses_b);
    ref_opt.step();
    if (max_abs_diff(net, ref) > 1e-5 || !identical_on_every_rank(*pg, net)) {
      say(fmt::format("step {}: differs from the reference or between ranks", step));
      return exit_code::failed;
    }
  }
  say("unused parameter: 5 steps match the reference");
  return exit_code::ok;
}

// Rank 1's fc1 has 33 hidden units instead of 32.
MCI_SCENARIO(torch_models_differ) {
  auto pg = join();
  Net net(pg->rank() == 1 ? 33 : 32);
  mci::torch::DistributedDataParallel ddp(pg, net);
  return exit_code::failed;  // construction must throw
}

// The last rank dies in the middle of backward, after fc2's gradients
// (first bucket) are ready and before fc1's: the others get PeerError.
MCI_SCENARIO(torch_rank_dies_mid_backward) {
  auto pg = join();
  const int rank = pg->rank(), world = pg->size();
  ::torch::manual_seed(42);
  Net net;
  mci::torch::DdpOptions o;
  o.bucket_cap_mb = 0;  // one bucket per parameter
  mci::torch::DistributedDataParallel ddp(pg, net, o);
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = batch(step, rank);
    auto hidden = ::torch::relu(net->fc1(x));
    if (step == 2 && rank == world - 1) {
      hidden.register_hook([](::torch::Tensor g) {
        say("dying mid-backward");
        ::_exit(7);
        return g;
      });
    }
    auto loss = ::torch::nn::functional::cross_entropy(net->fc2(hidden) + net->b(x), y);
    say_ms_if_it_fails("failed after", [&] { loss.backward(); });
  }
  return exit_code::failed;  // the survivors' third backward must throw
}

// In place: rank 2 dies mid-backward of step 2; the survivors' backward
// throws, they recover() (shrink, the most advanced replica, new hooks on
// the survivors' group), redo step 2 and finish with identical parameters.
MCI_SCENARIO(torch_survivors_recover) {
  auto pg = join();
  const int start_rank = pg->rank();
  ::torch::manual_seed(42);
  Net net;
  mci::torch::DdpOptions o;
  o.bucket_cap_mb = 0;  // one bucket per parameter
  mci::torch::DistributedDataParallel ddp(pg, net, o);
  ::torch::optim::SGD opt(net->parameters(), 0.1);
  std::uint64_t done = 0;
  while (done < 5) {
    const int step = static_cast<int>(done);
    const int rank = ddp.process_group().rank();
    auto [x, y] = batch(step, rank);
    opt.zero_grad();
    auto hidden = ::torch::relu(net->fc1(x));
    if (step == 2 && start_rank == 2) {
      hidden.register_hook([](::torch::Tensor g) {
        ::_exit(7);
        return g;
      });
    }
    auto loss = ::torch::nn::functional::cross_entropy(net->fc2(hidden) + net->b(x), y);
    try {
      loss.backward();
    } catch (const std::exception& e) {
      const auto r = ddp.recover(done);
      say(fmt::format("recovered world {} lost {} redo step {}", ddp.process_group().size(), r.lost.at(0),
                      r.steps_done));
      done = r.steps_done;
      continue;
    }
    opt.step();
    ++done;
  }
  double sum = 0;
  for (const auto& p : net->parameters()) sum += p.sum().item<double>();
  say(fmt::format("final world {} sum {:.12e}", ddp.process_group().size(), sum));
  return 0;
}

// One bucket per parameter: the hook of each bucket must run during
// backward, as soon as its gradients are ready, not after backward: fc2's
// buckets (whose gradients autograd computes first) are started before
// fc1's weight gradient exists. Events are logged in the order they happen.
MCI_SCENARIO(torch_buckets_start_during_backward) {
  auto pg = join();
  const int rank = pg->rank();
  ::torch::manual_seed(42);
  Net net;
  mci::torch::DdpOptions o;
  o.bucket_cap_mb = 0;
  std::vector<std::string> events;
  o.comm_hook = [&events, inner = allreduce_hook()](ProcessGroup& g, BufferView bucket) {
    events.push_back(fmt::format("bucket of {}", bucket.count));
    return inner(g, bucket);
  };
  mci::torch::DistributedDataParallel ddp(pg, net, o);
  auto [x, y] = batch(0, rank);
  auto hidden = ::torch::relu(net->fc1(x));
  // The gradient flowing into fc1 (computed after fc2's parameters' own).
  hidden.register_hook([&events](::torch::Tensor g) {
    events.push_back("fc1 input gradient");
    return g;
  });
  ::torch::nn::functional::cross_entropy(net->fc2(hidden) + net->b(x), y).backward();
  events.push_back("backward returned");
  std::string order;
  for (const auto& e : events) order += e + "; ";
  say("order: " + order);
  // fc2.weight is 4 x 32 = 128 elements: its bucket must come before the
  // hook on fc1's output, and fc1.weight's (32 x 16 = 512) after it.
  const auto pos = [&](const std::string& e) { return std::find(events.begin(), events.end(), e) - events.begin(); };
  const bool ok = pos("bucket of 128") < pos("fc1 input gradient") &&
                  pos("fc1 input gradient") < pos("bucket of 512") && pos("bucket of 512") < pos("backward returned");
  say(ok ? "buckets start during backward" : "buckets did not start during backward");
  return ok ? exit_code::ok : exit_code::failed;
}

TEST(TorchDdp, MatchesOneProcessOnTheUnionOfBatches) {
  for (int world : {2, 3}) {
    Job job(world, Scenario{"torch_matches_one_process"});
    job.wait(std::chrono::seconds(120));
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(job.status(r).code, exit_code::ok) << job.all_output();
      EXPECT_NE(job.output(r).find("identical on every rank"), std::string::npos) << job.all_output();
      EXPECT_NE(job.output(r).find("buckets 1\n"), std::string::npos) << job.all_output();  // 25 MiB: one for all
    }
  }
}

TEST(TorchDdp, EveryBucketSizeGivesTheSameTraining) {
  // 0: one bucket per parameter (6); 0.0005 MiB (524 bytes): four, fc1's
  // weight (2 KiB) alone in one bigger than the cap.
  for (const auto& [mb, buckets] : {std::pair<std::string, std::string>{"0", "6"}, {"0.0005", "4"}}) {
    Job job(2, Scenario{"torch_matches_one_process"}, {{"MCI_TEST_BUCKET_MB", mb}});
    job.wait(std::chrono::seconds(120));
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(job.status(r).code, exit_code::ok) << job.all_output();
      EXPECT_NE(job.output(r).find("buckets " + buckets + "\n"), std::string::npos) << job.all_output();
    }
  }
}

// LibTorch 2.x's zero_grad() leaves every gradient undefined (None); the
// next backward must still accumulate into the bucket (no copy in or out),
// and average right. "none" clears them by hand, so 1.13 is checked too.
TEST(TorchDdp, GradientsStayInTheirBucketWhenZeroGradSetsThemToNone) {
  for (const char* how : {"default", "none"}) {
    Job job(2, Scenario{"torch_matches_one_process"}, {{"MCI_TEST_ZERO_GRAD", how}});
    job.wait(std::chrono::seconds(120));
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(job.status(r).code, exit_code::ok) << how << "\n" << job.all_output();
      EXPECT_NE(job.output(r).find("every gradient stayed in its bucket"), std::string::npos) << how << "\n"
                                                                                              << job.all_output();
    }
  }
}

TEST(TorchDdp, Bf16CompressionHookTrainsCloseToOneProcess) {
  Job job(2, Scenario{"torch_matches_one_process"}, {{"MCI_TEST_HOOK", "bf16"}, {"MCI_TEST_TOLERANCE", "5e-3"}});
  job.wait(std::chrono::seconds(120));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(job.status(r).code, exit_code::ok) << job.all_output();
}

TEST(TorchDdp, NoSyncAccumulatesLikeOneLargeBatch) {
  Job job(2, Scenario{"torch_no_sync_accumulates"});
  job.wait(std::chrono::seconds(120));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(job.status(r).code, exit_code::ok) << job.all_output();
}

TEST(TorchDdp, FindUnusedParametersAveragesAParameterOneRankDidNotUse) {
  Job job(2, Scenario{"torch_unused_parameter"}, {{"MCI_TEST_FIND_UNUSED", "1"}, {"MCI_TEST_B_RANKS", "0"}});
  job.wait(std::chrono::seconds(120));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(job.status(r).code, exit_code::ok) << job.all_output();
}

TEST(TorchDdp, AnUnusedParameterWithoutFindUnusedIsNamed) {
  Job job(2, Scenario{"torch_unused_parameter"}, {{"MCI_TEST_B_RANKS", "none"}});
  job.wait(std::chrono::seconds(120));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(job.status(r).code, exit_code::config) << job.all_output();
    const std::string out = job.output(r);
    EXPECT_NE(out.find("received no gradient in this backward: 'b.weight', 'b.bias'"), std::string::npos) << out;
    EXPECT_NE(out.find("find_unused_parameters = true"), std::string::npos) << out;
  }
}

TEST(TorchDdp, AModelThatDiffersBetweenRanksIsNamed) {
  Job job(2, Scenario{"torch_models_differ"});
  job.wait(std::chrono::seconds(120));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(job.status(r).code, exit_code::mismatch) << job.all_output();
    EXPECT_NE(job.output(r).find("at parameter 0 'fc1.weight'"), std::string::npos) << job.all_output();
  }
  EXPECT_NE(job.output(0).find("rank 0 has f32 [32, 16], rank 1 has f32 [33, 16]"), std::string::npos) << job.output(0);
}

TEST(TorchDdp, ARankDyingMidBackwardGivesPeerErrorNotAHang) {
  Job job(3, Scenario{"torch_rank_dies_mid_backward"}, {{"MCI_TEST_TIMEOUT_MS", "60000"}});
  job.wait(std::chrono::seconds(90));
  EXPECT_EQ(job.status(2).code, 7) << job.all_output();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(job.status(r).code, exit_code::peer) << job.all_output();
    EXPECT_FALSE(job.status(r).timed_out);
    const std::string out = job.output(r);
    // Noticed at once, far below the 60 s timeout.
    const auto at = out.find("failed after ");
    ASSERT_NE(at, std::string::npos) << out;
    EXPECT_LT(std::stol(out.substr(at + 13)), 20000) << out;
  }
}

}  // namespace
}  // namespace mci::test

namespace mci::test {
namespace {

TEST(TorchDdp, SurvivorsRecoverInPlaceAndRedoTheInterruptedStep) {
  Job job(3, Scenario{"torch_survivors_recover"}, {{"MCI_TEST_TIMEOUT_MS", "60000"}, {"MCI_TRANSPORT", "tcp"}});
  job.wait(std::chrono::seconds(90));
  EXPECT_EQ(job.status(2).code, 7) << job.all_output();
  std::vector<std::string> finals;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(job.status(r).code, 0) << job.all_output();
    const std::string out = job.output(r);
    EXPECT_NE(out.find("recovered world 2 lost 2 redo step 2"), std::string::npos) << out;
    const auto at = out.find("final world 2 sum ");
    ASSERT_NE(at, std::string::npos) << out;
    finals.push_back(out.substr(at, out.find('\n', at) - at));
  }
  EXPECT_EQ(finals[0], finals[1]) << job.all_output();
}

TEST(TorchDdp, EachBucketStartsDuringBackwardAsSoonAsItsGradientsAreReady) {
  Job job(2, Scenario{"torch_buckets_start_during_backward"});
  job.wait(std::chrono::seconds(120));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(job.status(r).code, exit_code::ok) << job.all_output();
    EXPECT_NE(job.output(r).find("buckets start during backward"), std::string::npos) << job.all_output();
  }
}

}  // namespace
}  // namespace mci::test
