// Which torch a Python program will import, asked of its interpreter
// without importing torch (importlib finds the package, mcirun reads its
// version.py), so that mcirun can give the processes the NCCL variable
// that torch reads: torch older than 2.2 reads NCCL_ASYNC_ERROR_HANDLING
// (torchrun 1.13 sets it), 2.2 and later read
// TORCH_NCCL_ASYNC_ERROR_HANDLING and warn on every rank about the old name.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launch/ranks/signals.hpp"

namespace mci::launch {

struct TorchVersion {
  int major = 0;
  int minor = 0;
  std::string text;  // "2.15.0+cu132"
  // Reads NCCL_ASYNC_ERROR_HANDLING, not TORCH_NCCL_ASYNC_ERROR_HANDLING.
  bool reads_old_nccl_names() const { return major < 2 || (major == 2 && minor < 2); }
};

// "1.13.0a0", "2.15.0+cu132" -> {1, 13}, {2, 15}; nullopt for anything else.
std::optional<TorchVersion> parse_torch_version(const std::string& text);

struct TorchProbe {
  std::optional<TorchVersion> version;  // nullopt: no torch, or no answer
  bool timed_out = false;
};

// Runs `python` (with env) for at most `limit`; a process that outlives it
// is killed. The process starts with mcirun's own signal mask restored.
TorchProbe probe_torch(const std::string& python, const std::vector<std::string>& env, const SignalFd& signals,
                       std::chrono::milliseconds limit = std::chrono::seconds(10));

}  // namespace mci::launch
