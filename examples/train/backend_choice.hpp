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

// The backend's row says where its buffers live: host memory is torch's
// CPU device, a backend on GPU memory only (nccl) takes GPU LOCAL_RANK.
inline Choice choose_backend() {
  const char* raw = std::getenv("MCI_BACKEND");
  const std::string wanted = raw && *raw ? raw : "cpu";
  const auto info = mci::find_backend_info(wanted);
  if (!info) {
    std::string names;
    for (const auto& b : mci::list_backends()) names += (names.empty() ? "" : ", ") + b.name;
    throw std::runtime_error("MCI_BACKEND=" + wanted + " is not one of " + names);
  }
  if (info->caps.host_memory) {
    if (!info->built) {
      throw std::runtime_error("MCI_BACKEND=" + wanted + ": this build of mci has no " + wanted +
                               " backend; run with MCI_BACKEND=cpu");
    }
    return {wanted, torch::Device(torch::kCPU)};
  }
  if (!torch::cuda::is_available()) {
    throw std::runtime_error("MCI_BACKEND=" + wanted +
                             " needs a LibTorch built with CUDA and a visible GPU; this "
                             "LibTorch sees no CUDA device (Debian's libtorch-dev is CPU only). Run with "
                             "MCI_BACKEND=cpu or gloo");
  }
  if (!info->built) {
    throw std::runtime_error("MCI_BACKEND=" + wanted + ": this build of mci has no " + wanted +
                             " backend (rebuild it "
                             "with " +
                             info->needs + "), or run with MCI_BACKEND=cpu or gloo");
  }
  const char* local = std::getenv("LOCAL_RANK");
  return {wanted, torch::Device(torch::kCUDA, static_cast<torch::DeviceIndex>(local ? std::atoi(local) : 0))};
}

}  // namespace train
