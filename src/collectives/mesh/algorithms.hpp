// Algorithms over a Transport, one per file, each readable top to bottom.
// They read the descriptor, move bytes with the transport and reduce with
// the kernels; they never see a socket.
#pragma once

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

void all_reduce_ring(const Ctx& c);
void all_reduce_recursive_doubling(const Ctx& c);
void all_reduce_direct(const Ctx& c);
void broadcast_tree(const Ctx& c);
void broadcast_direct(const Ctx& c);
void reduce_tree(const Ctx& c);
void all_gather_ring(const Ctx& c);
void all_gather_direct(const Ctx& c);
void gather_direct(const Ctx& c);
void scatter_direct(const Ctx& c);
void reduce_scatter_ring(const Ctx& c);
void reduce_scatter_direct(const Ctx& c);
void all_to_all_pairwise(const Ctx& c);
void barrier_dissemination(const Ctx& c);
void send_p2p(const Ctx& c);
void recv_p2p(const Ctx& c);

}  // namespace mci::coll
