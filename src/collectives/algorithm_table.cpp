#include "collectives/algorithm_table.hpp"

#include <array>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci::coll {

namespace {

// The rows of collectives/algorithm_rows.hpp, in its order.
#define MCI_MESH_ROW(algo, kind, function, forcible) \
  AlgoRow{Algo::algo, OpKind::kind, Place::mesh, forcible, function, nullptr, nullptr},
#define MCI_SHM_ROW(algo, kind, function) \
  AlgoRow{Algo::algo, OpKind::kind, Place::shm, true, nullptr, function, nullptr},
#define MCI_HIER_ROW(algo, kind, function) \
  AlgoRow{Algo::algo, OpKind::kind, Place::hierarchical, true, nullptr, nullptr, function},
constexpr std::array kTable{MCI_ALGORITHM_ROWS(MCI_MESH_ROW, MCI_SHM_ROW, MCI_HIER_ROW)};
#undef MCI_MESH_ROW
#undef MCI_SHM_ROW
#undef MCI_HIER_ROW

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
