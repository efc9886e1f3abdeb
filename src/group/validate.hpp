// Argument checks done before anything moves: every misuse a user can make
// locally becomes a ConfigError that says what to change.
#pragma once

#include "collectives/desc.hpp"
#include "mci/process_group.hpp"

namespace mci {

// One call as the user made it (the public OpCall); each field means one
// thing.
using Call = OpCall;

// Builds the descriptor for one call, or throws ConfigError.
coll::CollectiveDesc make_desc(const Call& call, int rank, int size);

}  // namespace mci
