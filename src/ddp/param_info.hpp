// What DDP knows of one parameter before any gradient exists: enough to lay
// out buckets and to check that every rank wraps the same model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mci/types.hpp"

namespace mci::ddp {

struct ParamInfo {
  std::string name;
  std::size_t count = 0;
  DType dtype = DType::f32;
  Device device = Device::cpu();
  // Empty for raw buffers (described as "N values"); a tensor's sizes otherwise.
  std::vector<std::int64_t> shape;
};

}  // namespace mci::ddp
