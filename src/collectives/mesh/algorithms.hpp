// Algorithms over a Transport, one per file, each readable top to bottom.
// They read the descriptor, move bytes with the transport and reduce with
// the kernels; they never see a socket.
#pragma once

#include "collectives/algorithm_rows.hpp"
#include "collectives/blocks.hpp"
#include "collectives/desc.hpp"
#include "common/deadline.hpp"
#include "transport/transport.hpp"

namespace mci::coll {

struct Ctx {
  transport::Transport& t;
  const CollectiveDesc& d;
  const Deadline& dl;
  Scratch& scratch;
};

// The functions of the mesh rows (collectives/algorithm_rows.hpp).
#define MCI_DECLARE_MESH_ROW(algo, kind, function, forcible) void function(const Ctx& c);
MCI_ALGORITHM_ROWS(MCI_DECLARE_MESH_ROW, MCI_ALGORITHM_ROW_ELSEWHERE, MCI_ALGORITHM_ROW_ELSEWHERE)
#undef MCI_DECLARE_MESH_ROW

}  // namespace mci::coll
