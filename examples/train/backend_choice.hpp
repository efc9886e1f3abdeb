// How train_ddp and train_multinode pick their backend and device, as labo
// does: MCI_BACKEND=cpu (the default: mci's own engine), gloo (the Gloo
// library) or nccl (NCCL on GPU LOCAL_RANK, which needs a LibTorch built
// with CUDA). Uses only the public API.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <torch/cuda.h>
#include <torch/types.h>

#include "mci/init.hpp"

namespace train {

struct Choice {
  std::string backend;
  torch::Device device{torch::kCPU};
};

// One line in one write, so two ranks' lines never interleave.
inline void say(const std::string& line) {
  const std::string s = line + "\n";
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

inline Choice choose_backend() {
  const char* raw = std::getenv("MCI_BACKEND");
  const std::string wanted = raw && *raw ? raw : "cpu";
  if (wanted == "cpu" || wanted == "gloo") {
    if (!mci::backend_available(wanted)) {
      throw std::runtime_error("MCI_BACKEND=" + wanted + ": this build of mci has no " + wanted +
                               " backend; run with MCI_BACKEND=cpu");
    }
    return {wanted, torch::Device(torch::kCPU)};
  }
  if (wanted != "nccl") {
    throw std::runtime_error("MCI_BACKEND=" + wanted + " is not cpu, gloo or nccl");
  }
  if (!torch::cuda::is_available()) {
    throw std::runtime_error("MCI_BACKEND=nccl needs a LibTorch built with CUDA and a visible GPU; this "
                             "LibTorch sees no CUDA device (Debian's libtorch-dev is CPU only). Run with "
                             "MCI_BACKEND=cpu or gloo");
  }
  if (!mci::backend_available("nccl")) {
    throw std::runtime_error("MCI_BACKEND=nccl: this build of mci has no NCCL backend (rebuild it with the "
                             "CUDA toolkit and NCCL), or run with MCI_BACKEND=cpu or gloo");
  }
  const char* local = std::getenv("LOCAL_RANK");
  return {"nccl", torch::Device(torch::kCUDA, static_cast<torch::DeviceIndex>(local ? std::atoi(local) : 0))};
}

}  // namespace train
