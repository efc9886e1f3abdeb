#include "collectives/algorithm_table.hpp"

#include <array>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci::coll {

namespace {

constexpr AlgoRow mesh(Algo a, OpKind k, void (*f)(const Ctx&), bool forcible = true) {
  return AlgoRow{a, k, Place::mesh, forcible, f, nullptr, nullptr};
}
constexpr AlgoRow shm(Algo a, OpKind k, void (*f)(const ShmCtx&)) {
  return AlgoRow{a, k, Place::shm, true, nullptr, f, nullptr};
}
constexpr AlgoRow hier(Algo a, OpKind k, void (*f)(const HierCtx&)) {
  return AlgoRow{a, k, Place::hierarchical, true, nullptr, nullptr, f};
}

using K = OpKind;
constexpr std::array kTable{
    mesh(Algo::direct, K::all_reduce, all_reduce_direct),
    mesh(Algo::direct, K::broadcast, broadcast_direct),
    mesh(Algo::direct, K::all_gather, all_gather_direct),
    mesh(Algo::direct, K::gather, gather_direct),
    mesh(Algo::direct, K::scatter, scatter_direct),
    mesh(Algo::direct, K::reduce_scatter, reduce_scatter_direct),
    mesh(Algo::ring, K::all_reduce, all_reduce_ring),
    mesh(Algo::ring, K::all_gather, all_gather_ring),
    mesh(Algo::ring, K::reduce_scatter, reduce_scatter_ring),
    mesh(Algo::recursive_doubling, K::all_reduce, all_reduce_recursive_doubling),
    mesh(Algo::tree, K::broadcast, broadcast_tree),
    mesh(Algo::tree, K::reduce, reduce_tree),
    mesh(Algo::pairwise, K::all_to_all, all_to_all_pairwise),
    mesh(Algo::dissemination, K::barrier, barrier_dissemination),
    mesh(Algo::p2p, K::send, send_p2p, false),
    mesh(Algo::p2p, K::recv, recv_p2p, false),
    shm(Algo::shm_direct, K::all_reduce, shm_all_reduce_direct),
    shm(Algo::shm_direct, K::reduce, shm_reduce_direct),
    shm(Algo::shm_sliced, K::all_reduce, shm_all_reduce_sliced),
    shm(Algo::shm_sliced, K::reduce, shm_reduce_sliced),
    shm(Algo::shm_staged, K::broadcast, shm_broadcast),
    shm(Algo::shm_staged, K::all_gather, shm_all_gather),
    shm(Algo::shm_staged, K::gather, shm_all_gather),
    shm(Algo::shm_staged, K::scatter, shm_scatter),
    shm(Algo::shm_staged, K::reduce_scatter, shm_reduce_scatter),
    shm(Algo::shm_staged, K::all_to_all, shm_all_to_all),
    shm(Algo::shm_flags, K::barrier, shm_barrier),
    hier(Algo::hierarchical, K::all_reduce, hierarchical_all_reduce),
    hier(Algo::hierarchical, K::broadcast, hierarchical_broadcast),
    hier(Algo::hierarchical, K::reduce, hierarchical_reduce),
    hier(Algo::hierarchical, K::all_gather, hierarchical_all_gather),
    hier(Algo::hierarchical, K::gather, hierarchical_gather),
    hier(Algo::hierarchical, K::scatter, hierarchical_scatter),
    hier(Algo::hierarchical, K::reduce_scatter, hierarchical_reduce_scatter),
    hier(Algo::hierarchical, K::all_to_all, hierarchical_all_to_all),
    hier(Algo::hierarchical, K::barrier, hierarchical_barrier),
};

// Dispatch runs on every call: an index by (algorithm, collective) instead
// of a search of the table, sized by the algorithm list itself (so no value
// of Algo falls outside it).
constexpr std::size_t kAlgos = kAlgoCount;
constexpr std::size_t kKinds = kOpKindCount;
struct Index {
  std::array<std::array<const AlgoRow*, kKinds>, kAlgos> row{};
  std::array<Place, kAlgos> place{};
};
constexpr Index make_index() {
  Index ix;
  for (auto& p : ix.place) p = Place::library;
  for (const auto& r : kTable) {
    ix.row[static_cast<std::size_t>(r.algo)][static_cast<std::size_t>(r.kind)] = &r;
    ix.place[static_cast<std::size_t>(r.algo)] = r.place;
  }
  return ix;
}
constexpr Index kIndex = make_index();

}  // namespace

std::string_view place_name(Place p) noexcept {
  switch (p) {
    case Place::mesh: return "mesh";
    case Place::shm: return "shm";
    case Place::hierarchical: return "hierarchical";
    case Place::library: return "library";
  }
  return "?";
}

std::span<const AlgoRow> algorithm_table() noexcept { return kTable; }

const AlgoRow* find_algorithm(Algo algo, OpKind kind) noexcept {
  const auto a = static_cast<std::size_t>(algo), k = static_cast<std::size_t>(kind);
  return a < kAlgos && k < kKinds ? kIndex.row[a][k] : nullptr;
}

Place place_of(Algo algo) noexcept {
  const auto a = static_cast<std::size_t>(algo);
  return a < kAlgos ? kIndex.place[a] : Place::library;
}

std::string forcible_algorithms_help() {
  std::string out = "auto (mci chooses)";
  for (const auto& n : algo_names()) {
    std::string serves;
    for (const auto& r : kTable) {
      if (r.algo == n.algo && r.forcible) serves += fmt::format("{}{}", serves.empty() ? "" : "/", op_name(r.kind));
    }
    if (serves.empty()) continue;
    out += fmt::format(", {}{} [{}]", n.name, n.alias.empty() ? "" : fmt::format(" ({})", n.alias), serves);
  }
  return out;
}

std::optional<Algo> parse_forced_algo(const std::string& value) {
  if (value.empty() || value == "auto") return std::nullopt;
  const auto a = algo_from_name(value);
  bool forcible = false;
  for (const auto& r : kTable) forcible = forcible || (a && r.algo == *a && r.forcible);
  if (!forcible) {
    throw ConfigError(
        fmt::format("MCI_ALGO='{}' is not an algorithm: use {}. A forced algorithm applies to the "
                    "collectives in brackets; the others keep mci's choice.",
                    value, forcible_algorithms_help()));
  }
  return a;
}

void run_algorithm(const Places& p, const CollectiveDesc& d, const Deadline& dl, Scratch& scratch) {
  const AlgoRow* row = find_algorithm(d.algo, d.kind);
  if (!row) {
    throw Error(
        fmt::format("mci: there is no {} algorithm for {} (an mci bug: selection chose a pairing the "
                    "algorithm table does not have)",
                    algo_name(d.algo), op_name(d.kind)));
  }
  const bool ready = row->place == Place::mesh           ? p.mesh != nullptr
                     : row->place == Place::shm          ? p.shm != nullptr && p.copier != nullptr
                     : row->place == Place::hierarchical ? p.mesh && p.hosts && p.packed && p.copier
                                                         : false;
  if (!ready) {
    throw Error(fmt::format("mci: {} {} needs a {} this group does not have (an mci bug in selection)",
                            algo_name(d.algo), op_name(d.kind), place_name(row->place)));
  }
  switch (row->place) {
    case Place::mesh: return row->on_mesh(Ctx{*p.mesh, d, dl, scratch});
    case Place::shm: return row->on_shm(ShmCtx{*p.shm, d, dl, scratch, *p.copier});
    case Place::hierarchical:
      return row->on_hier(HierCtx{*p.mesh, p.shm, *p.hosts, d, dl, scratch, *p.packed, *p.copier});
    case Place::library: break;
  }
}

}  // namespace mci::coll
