// The gradient Reducer, shared by the raw-buffer and the LibTorch DDP: packs
// gradients into buckets (in reverse order of registration, the order
// backward usually produces them), starts each bucket's averaging through
// the communication hook as soon as the bucket is complete, and copies the
// averaged values back. Buckets start strictly in index order so every rank
// issues the same collectives in the same order, whatever order its
// gradients became ready in.
//
// A gradient's buffer is handed over when it is ready, not at construction:
// LibTorch may allocate a parameter's gradient during the first backward.
#pragma once

#include <cstdint>
#include <vector>

#include "ddp/param_info.hpp"
#include "mci/ddp.hpp"

namespace mci::ddp {

struct Bucket {
  std::vector<std::size_t> params;   // indices into the parameter list
  std::vector<std::size_t> offsets;  // element offset of each in `flat`
  std::size_t count = 0;
  DType dtype = DType::f32;
  Device device = Device::cpu();
  std::vector<std::uint8_t> flat;  // host staging; unused for single-parameter buckets
  std::size_t pending = 0;         // gradients not yet ready this step
  BucketCompletion done;           // set when launched
};

class Reducer {
 public:
  // cap_bytes 0: one bucket per parameter. Device (CUDA) gradients always
  // get a bucket each (host code cannot pack them).
  Reducer(ProcessGroup& pg, std::vector<ParamInfo> params, std::size_t cap_bytes, CommHook hook);

  // The gradient of parameter i is final for this step and lives in `grad`
  // (same count, dtype and device as the parameter) until finish() returns.
  void grad_ready(std::size_t i, BufferView grad);
  bool is_ready(std::size_t i) const { return ready_[i]; }
  // Whether any gradient was marked ready since the last finish().
  bool step_started() const { return started_; }
  // Every gradient must have been marked ready. Waits for every bucket and
  // writes the averages back into the gradients' buffers.
  void finish();

  // Between steps only (a step's launched buckets used the old hook).
  void set_hook(CommHook hook);

  // Where parameter i's gradient sits in its bucket's flat buffer, for
  // owners that can keep the gradient there (LibTorch's "gradient as bucket
  // view"): a gradient handed over at that address is neither copied in
  // nor out. Empty for a parameter alone in its bucket (averaged in place).
  BufferView slot(std::size_t i);

  std::size_t num_buckets() const { return buckets_.size(); }
  std::size_t num_params() const { return params_.size(); }
  const ParamInfo& param(std::size_t i) const { return params_[i]; }

 private:
  void launch_ready_in_order();
  void launch(Bucket& b);
  void reset();

  ProcessGroup& pg_;
  std::vector<ParamInfo> params_;
  CommHook hook_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;  // parameter -> bucket
  std::vector<BufferView> grads_;       // this step's gradient buffers
  std::vector<bool> ready_;
  std::size_t next_launch_ = 0;
  bool started_ = false;
};

}  // namespace mci::ddp
