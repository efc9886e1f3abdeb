#include "perf/host_ops.hpp"

#include <optional>

#include "mci/device_memory.hpp"
#include "mci/init.hpp"

namespace mci::perf {

namespace {

// Host buffers as they are, or their copies on this rank's GPU for a
// backend that takes GPU memory only (nccl).
class Staged {
 public:
  Staged(ProcessGroup& pg, BufferView host) : host_(host) {
    const auto info = find_backend_info(pg.backend());
    if (!info || info->caps.host_memory) return;
    const Device gpu = Device::cuda(pg.local_rank());
    mem_.emplace(gpu, host.bytes());
    mem_->copy_from_host(host.data, host.bytes());
  }
  BufferView view() const { return mem_ ? BufferView{mem_->data(), host_.count, host_.dtype, mem_->device()} : host_; }
  void back() const {
    if (mem_) mem_->copy_to_host(host_.data, host_.bytes());
  }

 private:
  BufferView host_;
  std::optional<DeviceMemory> mem_;
};

}  // namespace

void host_all_reduce(ProcessGroup& pg, BufferView host, ReduceOp op) {
  const Staged s(pg, host);
  pg.all_reduce(s.view(), op);
  s.back();
}

void host_all_gather(ProcessGroup& pg, BufferView in, BufferView out) {
  const Staged a(pg, in), b(pg, out);
  pg.all_gather(a.view(), b.view());
  b.back();
}

void host_broadcast(ProcessGroup& pg, BufferView host, int root) {
  const Staged s(pg, host);
  pg.broadcast(s.view(), root);
  s.back();
}

}  // namespace mci::perf
