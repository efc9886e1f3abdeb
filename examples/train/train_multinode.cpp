// train_multinode: the seed's Example 2 (train_multinode.py) in C++ with
// LibTorch and mci: Linear(784, 10), one batch of 64, 10 steps of SGD; each
// rank prints "Rang {rank} terminé". Across hosts:
//
//   mcirun --nnodes=2 --nproc_per_node=4 --rdzv_endpoint=HOST:PORT train_multinode
#include <cstdio>
#include <exception>

#include <fmt/format.h>
// IValue complete before torch/torch.h: with torch 1.13's headers, clang 14
// in C++20 instantiates std::vector<IValue>'s members where IValue is only
// declared (ATen/core/List.h) and stops.
#include <ATen/core/ivalue.h>
#include <torch/torch.h>

#include "backend_choice.hpp"
#include "mci/mci.hpp"
#include "mci/torch.hpp"

int main() try {
  const train::Choice choice = train::choose_backend();
  mci::InitOptions opts;
  opts.backend = choice.backend;
  auto pg = mci::init_process_group(opts);

  torch::nn::Linear model(784, 10);
  model->to(choice.device);
  mci::torch::DistributedDataParallel ddp(pg, model);

  // Simplified training loop, as the seed's.
  const auto data = torch::randn({64, 784}).to(choice.device);
  const auto labels = torch::randint(0, 10, {64}, torch::kLong).to(choice.device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01));
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(ddp(data), labels);
    loss.backward();
    optimizer.step();
  }
  train::say(fmt::format("Rang {} terminé", pg->rank()));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_multinode: %s\n", e.what());
  return 1;
}
