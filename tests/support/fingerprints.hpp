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

// An all_reduce of f32 (the transports' tests' usual collective).
inline Fingerprint coll(std::uint64_t seq, std::uint64_t count) { return coll_fingerprint(seq, count); }

// A send/recv of i32: the tag is its sequence number.
inline Fingerprint p2p(std::uint64_t tag, std::uint64_t count = 1) {
  return coll_fingerprint(tag, count, OpKind::send, DType::i32);
}

}  // namespace mci::test
