// One descriptor per call (NCCL's idea): the front end fills it, validation,
// selection, recording and the algorithms all read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/algo.hpp"
#include "common/fingerprint.hpp"
#include "mci/process_group.hpp"
#include "mci/types.hpp"

namespace mci::coll {

struct CollectiveDesc {
  OpKind kind = OpKind::barrier;
  const void* in = nullptr;  // send buffer
  void* out = nullptr;       // receive buffer (may equal in)
  // Elements per rank: the whole buffer for all_reduce, broadcast, reduce,
  // send, recv; one rank's share for all_gather, gather, scatter,
  // reduce_scatter; one peer's block for all_to_all.
  std::size_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = -1;          // broadcast, reduce, gather, scatter
  int peer = -1;          // send: the destination; recv: the source
  int tag = 0;            // send, recv
  std::uint64_t seq = 0;  // collective sequence number (1-based)
  Algo algo = Algo::unset;
  Device device = Device::cpu();

  std::size_t bytes() const { return count * dtype_size(dtype); }
  // A recv that takes its data from whichever rank sends first.
  bool from_any_source() const { return kind == OpKind::recv && peer == any_source; }
  Fingerprint fingerprint() const;
  // For messages: the fingerprint's words, a recv saying recv (and from
  // any source, when it is).
  std::string describe() const {
    if (kind != OpKind::recv) return fingerprint().describe();
    return fingerprint().describe_receive() + (from_any_source() ? " from any source" : "");
  }
};

// Scratch memory reused across calls of one group.
class Scratch {
 public:
  std::uint8_t* get(std::size_t bytes) {
    if (buf_.size() < bytes) buf_.resize(bytes);
    return buf_.data();
  }

 private:
  std::vector<std::uint8_t> buf_;
};

}  // namespace mci::coll
