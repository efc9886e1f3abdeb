#include <fmt/format.h>

#include "collectives/algorithms.hpp"
#include "mci/errors.hpp"

namespace mci::coll {

void run_collective(const Ctx& c) {
  const auto& d = c.d;
  switch (d.kind) {
    case OpKind::all_reduce:
      switch (d.algo) {
        case Algo::ring: return all_reduce_ring(c);
        case Algo::direct: return all_reduce_direct(c);
        default: return all_reduce_recursive_doubling(c);
      }
    case OpKind::broadcast:
      return d.algo == Algo::direct ? broadcast_direct(c) : broadcast_tree(c);
    case OpKind::reduce: return reduce_tree(c);
    case OpKind::all_gather:
      return d.algo == Algo::direct ? all_gather_direct(c) : all_gather_ring(c);
    case OpKind::gather: return gather_direct(c);
    case OpKind::scatter: return scatter_direct(c);
    case OpKind::reduce_scatter:
      return d.algo == Algo::direct ? reduce_scatter_direct(c) : reduce_scatter_ring(c);
    case OpKind::all_to_all: return all_to_all_pairwise(c);
    case OpKind::barrier: return barrier_dissemination(c);
    case OpKind::send: return send_p2p(c);
    case OpKind::recv: return recv_p2p(c);
  }
  throw Error(fmt::format("mci: no algorithm for {}", op_name(d.kind)));
}

}  // namespace mci::coll
