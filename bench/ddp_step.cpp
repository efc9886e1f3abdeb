// One rank of the DDP step benchmark (bench/ddp_compare.sh runs it under
// mcirun beside PyTorch's DDP, bench/peers/torch_ddp_step.py): the time of
// one training step (zero_grad, forward, cross entropy, backward, SGD step)
// with mci::torch::DistributedDataParallel, and of the same step under
// no_sync() in the same run; the difference is what DDP's communication
// costs per step. Blocks of synced and no_sync steps alternate so that a
// drifting machine hurts both alike. Also times one blocking all-reduce of
// all the gradients' bytes: the communication that backward hides is
// 1 - cost / that time.
//
//   mcirun --nproc_per_node=2 bench_ddp_step --model mlp --rounds 5 --steps 10
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
// IValue complete before torch/torch.h: with torch 1.13's headers, clang 14
// in C++20 instantiates std::vector<IValue>'s members where IValue is only
// declared (ATen/core/List.h) and stops.
#include <ATen/core/ivalue.h>
#include <torch/torch.h>

#include "mci/mci.hpp"
#include "mci/torch.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

torch::nn::Sequential make_model(const std::string& name) {
  if (name == "linear") return torch::nn::Sequential(torch::nn::Linear(784, 10));  // train_ddp's model
  if (name == "mlp") {
    return torch::nn::Sequential(torch::nn::Linear(1024, 2048), torch::nn::ReLU(), torch::nn::Linear(2048, 2048),
                                 torch::nn::ReLU(), torch::nn::Linear(2048, 1024), torch::nn::ReLU(),
                                 torch::nn::Linear(1024, 10));
  }
  throw std::runtime_error("--model takes linear or mlp, not " + name);
}

}  // namespace

int main(int argc, char** argv) try {
  std::string model_name = "mlp";
  int rounds = 5, steps = 10, warmup = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--model")
      model_name = argv[i + 1];
    else if (a == "--rounds")
      rounds = std::atoi(argv[i + 1]);
    else if (a == "--steps")
      steps = std::atoi(argv[i + 1]);
    else if (a == "--warmup")
      warmup = std::atoi(argv[i + 1]);
    else
      throw std::runtime_error("unknown option " + a + " (--model, --rounds, --steps, --warmup)");
  }
  auto pg = mci::init_process_group();
  torch::manual_seed(pg->rank());
  auto model = make_model(model_name);
  const int batch = model_name == "linear" ? 32 : 8;
  const std::int64_t in = model_name == "linear" ? 784 : 1024;
  mci::torch::DistributedDataParallel ddp(pg, model);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01));
  const auto x = torch::randn({batch, in});
  const auto y = torch::randint(0, 10, {batch}, torch::kLong);

  auto step = [&] {
    const auto t0 = Clock::now();
    opt.zero_grad();
    torch::nn::functional::cross_entropy(ddp(x), y).backward();
    opt.step();
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  for (int i = 0; i < warmup; ++i) step();
  {
    auto guard = ddp.no_sync();
    for (int i = 0; i < warmup; ++i) step();
  }
  std::vector<double> sync_ms, nosync_ms, cost_ms;
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> s, n;
    pg->barrier();
    for (int i = 0; i < steps; ++i) s.push_back(step());
    pg->barrier();
    {
      auto guard = ddp.no_sync();
      for (int i = 0; i < steps; ++i) n.push_back(step());
    }
    sync_ms.push_back(median(s));
    nosync_ms.push_back(median(n));
    cost_ms.push_back(sync_ms.back() - nosync_ms.back());
  }
  std::size_t numel = 0;
  for (const auto& p : model->parameters()) numel += static_cast<std::size_t>(p.numel());
  std::vector<float> flat(numel, 1.0f);
  std::vector<double> ar_ms;
  for (int i = 0; i < rounds * 2; ++i) {
    pg->barrier();
    const auto t0 = Clock::now();
    pg->all_reduce(mci::view(flat), mci::ReduceOp::avg);
    ar_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  if (pg->rank() == 0) {
    // One line of JSON per run; the script makes the table.
    std::printf("%s\n", fmt::format(R"({{"impl": "mci", "model": "{}", "params": {}, "buckets": {}, "step_ms": [{}], )"
                                    R"("nosync_ms": [{}], "cost_ms": [{}], "allreduce_ms": {:.3f}}})",
                                    model_name, numel, ddp.num_buckets(), fmt::join(sync_ms, ", "),
                                    fmt::join(nosync_ms, ", "), fmt::join(cost_ms, ", "), median(ar_ms))
                            .c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_ddp_step: %s\n", e.what());
  return 1;
}
