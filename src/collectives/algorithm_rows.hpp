// The rows of the algorithm table (algorithm_table.cpp), one per
// (algorithm, collective) pair mci can run: the one place an algorithm's
// function is named. The table is made from this list, and so is each
// family's list of functions (mesh/, shm/ and hierarchical/algorithms.hpp
// declare the functions of their rows), so an algorithm is added with its
// line in MCI_ALGORITHMS (common/algo.hpp), its file in its family's folder
// (each folder's files are the family's: collectives/CMakeLists.txt) and its
// rows here.
//
//   MESH(algo, kind, function, forcible): over a Transport, the function
//     taking a Ctx; forcible: MCI_ALGO may name it (point-to-point may not:
//     it has one algorithm, and forcing it means nothing).
//   SHM(algo, kind, function): over one host's shared-memory segment (ShmCtx).
//   HIER(algo, kind, function): shared memory inside each host, the mesh
//     between one delegate per host (HierCtx; hierarchical/algorithms.hpp
//     says what a delegate is).
// One function may serve two kinds (shm_all_gather: gather too).
#pragma once

// clang-format off
#define MCI_ALGORITHM_ROWS(MESH, SHM, HIER)                                        \
  MESH(direct, all_reduce, all_reduce_direct, true)                                \
  MESH(direct, broadcast, broadcast_direct, true)                                  \
  MESH(direct, all_gather, all_gather_direct, true)                                \
  MESH(direct, gather, gather_direct, true)                                        \
  MESH(direct, scatter, scatter_direct, true)                                      \
  MESH(direct, reduce_scatter, reduce_scatter_direct, true)                        \
  MESH(ring, all_reduce, all_reduce_ring, true)                                    \
  MESH(ring, all_gather, all_gather_ring, true)                                    \
  MESH(ring, reduce_scatter, reduce_scatter_ring, true)                            \
  MESH(recursive_doubling, all_reduce, all_reduce_recursive_doubling, true)        \
  MESH(ordered, all_reduce, all_reduce_ordered, true)                              \
  MESH(ordered, reduce, reduce_ordered, true)                                      \
  MESH(tree, broadcast, broadcast_tree, true)                                      \
  MESH(tree, reduce, reduce_tree, true)                                            \
  MESH(pairwise, all_to_all, all_to_all_pairwise, true)                            \
  MESH(dissemination, barrier, barrier_dissemination, true)                        \
  MESH(p2p, send, send_p2p, false)                                                 \
  MESH(p2p, recv, recv_p2p, false)                                                 \
  SHM(shm_direct, all_reduce, shm_all_reduce_direct)                               \
  SHM(shm_direct, reduce, shm_reduce_direct)                                       \
  SHM(shm_sliced, all_reduce, shm_all_reduce_sliced)                               \
  SHM(shm_sliced, reduce, shm_reduce_sliced)                                       \
  SHM(shm_staged, broadcast, shm_broadcast)                                        \
  SHM(shm_staged, all_gather, shm_all_gather)                                      \
  SHM(shm_staged, gather, shm_all_gather)                                          \
  SHM(shm_staged, scatter, shm_scatter)                                            \
  SHM(shm_staged, reduce_scatter, shm_reduce_scatter)                              \
  SHM(shm_staged, all_to_all, shm_all_to_all)                                      \
  SHM(shm_flags, barrier, shm_barrier)                                             \
  HIER(hierarchical, all_reduce, hierarchical_all_reduce)                          \
  HIER(host_chain, all_reduce, hierarchical_all_reduce_chain)                      \
  HIER(hierarchical, broadcast, hierarchical_broadcast)                            \
  HIER(hierarchical, reduce, hierarchical_reduce)                                  \
  HIER(hierarchical, all_gather, hierarchical_all_gather)                          \
  HIER(hierarchical, gather, hierarchical_gather)                                  \
  HIER(hierarchical, scatter, hierarchical_scatter)                                \
  HIER(hierarchical, reduce_scatter, hierarchical_reduce_scatter)                  \
  HIER(hierarchical, all_to_all, hierarchical_all_to_all)                          \
  HIER(hierarchical, barrier, hierarchical_barrier)
// clang-format on

// For the families' expansions: the rows of the other families.
#define MCI_ALGORITHM_ROW_ELSEWHERE(...)
