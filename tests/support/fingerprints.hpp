// Fingerprints for transport tests: a collective's and a send/recv's.
#pragma once

#include <cstdint>

#include "common/fingerprint.hpp"

namespace mci::test {

inline Fingerprint coll_fingerprint(std::uint64_t seq, std::uint64_t count, OpKind kind = OpKind::all_reduce,
                                    DType dtype = DType::f32) {
  Fingerprint f;
  f.kind = kind;
  f.seq = seq;
  f.count = count;
  f.dtype = dtype;
  return f;
}

}  // namespace mci::test
