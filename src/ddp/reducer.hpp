// The gradient Reducer: packs gradients into buckets (in reverse order of
// registration, the order backward usually produces them), starts one async
// averaging all-reduce per bucket as soon as the bucket is complete, and
// copies the averaged values back. Buckets start strictly in index order so
// every rank issues the same all-reduces in the same order, whatever order
// its gradients became ready in.
#pragma once

#include <cstdint>
#include <vector>

#include "mci/ddp.hpp"
#include "mci/work.hpp"

namespace mci::ddp {

struct Bucket {
  std::vector<std::size_t> params;   // indices into the parameter list
  std::vector<std::size_t> offsets;  // element offset of each in `flat`
  std::size_t count = 0;
  DType dtype = DType::f32;
  Device device = Device::cpu();
  std::vector<std::uint8_t> flat;    // host staging; unused for single-parameter buckets
  std::size_t pending = 0;           // gradients not yet ready this step
  Work work;
};

class Reducer {
 public:
  Reducer(ProcessGroup& pg, const std::vector<Parameter>& params, std::size_t cap_bytes);

  void grad_ready(std::size_t param);
  void finish();
  std::size_t num_buckets() const { return buckets_.size(); }

 private:
  void launch_ready_in_order();
  void launch(Bucket& b);
  void reset();

  ProcessGroup& pg_;
  const std::vector<Parameter>& params_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;  // parameter -> bucket
  std::vector<bool> ready_;
  std::size_t next_launch_ = 0;
};

}  // namespace mci::ddp
