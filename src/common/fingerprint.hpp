// What identifies one operation across ranks. It rides in every data frame
// (TCP) and slot header (shm), so ranks that disagree find out for free.
#pragma once

#include <cstdint>
#include <string>

#include "common/op_kind.hpp"
#include "mci/types.hpp"

namespace mci {

struct Fingerprint {
  std::uint64_t seq = 0;    // collective sequence number; the tag for p2p
  std::uint64_t count = 0;  // elements per rank (see CollectiveDesc)
  std::int32_t root = -1;
  OpKind kind = OpKind::barrier;
  DType dtype = DType::u8;
  ReduceOp op = ReduceOp::sum;
  std::uint8_t algo = 0;  // the algorithm chosen, so ranks that chose
                          // differently (e.g. MCI_ALGO set on one) fail loudly

  // A send on one side matches a recv on the other.
  bool matches(const Fingerprint& o) const noexcept;
  // "all_reduce #3 (f32 x 1000, sum)" / "send tag 7 (f32 x 8)"
  std::string describe() const;
  // The same, as the receiving side says it: a point-to-point fingerprint
  // is a send's (its recv carries the same), so its receive reads "recv".
  std::string describe_receive() const;
};

// The MismatchError text for two ranks that disagree on a collective.
std::string collective_mismatch_text(int me, int peer, const Fingerprint& mine, const Fingerprint& theirs);

}  // namespace mci
