// train_ddp: the seed's Example 1 (train_ddp.py) in C++ with LibTorch and
// mci: Linear(784, 10) on 1000 random samples, DistributedRandomSampler,
// batches of 32, SGD lr 0.01, cross entropy, 5 epochs; each rank prints
// "Rang {rank}, Époque {epoch}, Perte : {loss}" after each epoch.
//
//   mcirun --nproc_per_node=2 train_ddp        (MCI_BACKEND=cpu|gloo|nccl)
#include <cstdio>
#include <exception>
#include <vector>

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
  const int rank = pg->rank();
  const int world = pg->size();

  // The same dataset on every rank (the sampler splits it): one seed.
  torch::manual_seed(0);
  const auto data = torch::randn({1000, 784});
  const auto labels = torch::randint(0, 10, {1000}, torch::kLong);
  torch::data::samplers::DistributedRandomSampler sampler(1000, world, rank);

  torch::nn::Linear model(784, 10);
  model->to(choice.device);
  mci::torch::DistributedDataParallel ddp(pg, model);  // rank 0's weights everywhere
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01));

  for (int epoch = 0; epoch < 5; ++epoch) {
    sampler.set_epoch(epoch);
    sampler.reset();
    torch::Tensor loss;
    while (auto batch = sampler.next(32)) {
      const auto index = torch::tensor(std::vector<std::int64_t>(batch->begin(), batch->end()));
      const auto inputs = data.index_select(0, index).to(choice.device);
      const auto targets = labels.index_select(0, index).to(choice.device);
      optimizer.zero_grad();
      loss = torch::nn::functional::cross_entropy(ddp(inputs), targets);
      loss.backward();
      optimizer.step();
    }
    train::say(fmt::format("Rang {}, Époque {}, Perte : {}", rank, epoch, loss.item<double>()));
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_ddp: %s\n", e.what());
  return 1;
}
