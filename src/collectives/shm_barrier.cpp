// Barrier in shared memory: one step with nothing to copy. No rank leaves
// before every rank has posted its flag.
#include "collectives/shm_algorithms.hpp"

namespace mci::coll {

void shm_barrier(const ShmCtx& c) {
  shm_step(c, c.d.fingerprint(), [](std::uint64_t) {}, [](std::uint64_t) {});
}

void run_shm_collective(const ShmCtx& c) {
  switch (c.d.kind) {
    case OpKind::all_reduce: return shm_all_reduce(c);
    case OpKind::reduce: return shm_reduce(c);
    case OpKind::broadcast: return shm_broadcast(c);
    case OpKind::all_gather:
    case OpKind::gather: return shm_all_gather(c);
    case OpKind::scatter: return shm_scatter(c);
    case OpKind::reduce_scatter: return shm_reduce_scatter(c);
    case OpKind::all_to_all: return shm_all_to_all(c);
    case OpKind::barrier: return shm_barrier(c);
    case OpKind::send:
    case OpKind::recv: break;
  }
}

}  // namespace mci::coll
