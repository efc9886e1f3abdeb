// Argument checks done before anything moves: every misuse a user can make
// locally becomes a ConfigError that says what to change.
#pragma once

#include "collectives/desc.hpp"
#include "mci/types.hpp"

namespace mci {

// Builds the descriptor for one call, or throws ConfigError.
coll::CollectiveDesc make_desc(OpKind kind, const BufferView& in, const BufferView& out,
                               ReduceOp op, int root, int tag, int rank, int size);

}  // namespace mci
