// Argument checks done before anything moves: every misuse a user can make
// locally becomes a ConfigError that says what to change.
#pragma once

#include "collectives/desc.hpp"
#include "mci/types.hpp"

namespace mci {

// One call as the user made it; each field means one thing.
struct Call {
  OpKind kind = OpKind::barrier;
  BufferView in{};
  BufferView out{};
  ReduceOp op = ReduceOp::sum;  // reductions only
  int root = -1;                // broadcast, reduce, gather, scatter
  int peer = -1;                // send: the destination; recv: the source
  int tag = 0;                  // send, recv
};

// Builds the descriptor for one call, or throws ConfigError.
coll::CollectiveDesc make_desc(const Call& call, int rank, int size);

}  // namespace mci
