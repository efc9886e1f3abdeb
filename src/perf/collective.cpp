#include "perf/collective.hpp"

#include <algorithm>
#include <cctype>

namespace mci::perf {

std::string_view collective_name(Collective c) noexcept {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::broadcast: return "broadcast";
    case Collective::reduce: return "reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::gather: return "gather";
    case Collective::scatter: return "scatter";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_to_all: return "all_to_all";
    case Collective::barrier: return "barrier";
    case Collective::send_recv: return "send_recv";
  }
  return "?";
}

std::optional<Collective> parse_collective(std::string_view text) {
  // Compare without separators or case, so all_reduce, allreduce,
  // all-reduce and AllReduce all name the same operation.
  auto squash = [](std::string_view s) {
    std::string out;
    for (char ch : s) {
      if (ch != '_' && ch != '-') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
    }
    return out;
  };
  std::string want = squash(text);
  // nccl-tests' program names: all_reduce_perf, alltoall_perf, ...
  if (want.size() > 4 && want.ends_with("perf")) want.resize(want.size() - 4);
  if (want.empty()) return std::nullopt;
  for (Collective c : kAllCollectives) {
    if (squash(collective_name(c)) == want) return c;
  }
  return std::nullopt;
}

std::string nccl_program_name(Collective c) {
  switch (c) {
    case Collective::all_to_all: return "alltoall_perf";
    case Collective::send_recv: return "sendrecv_perf";
    default: return std::string(collective_name(c)) + "_perf";
  }
}

std::string collective_list() {
  std::string out;
  for (Collective c : kAllCollectives) {
    if (!out.empty()) out += ", ";
    out += collective_name(c);
  }
  return out;
}

bool uses_reduce_op(Collective c) noexcept {
  return c == Collective::all_reduce || c == Collective::reduce || c == Collective::reduce_scatter;
}

bool uses_root(Collective c) noexcept {
  return c == Collective::broadcast || c == Collective::reduce || c == Collective::gather || c == Collective::scatter;
}

bool has_in_place(Collective c) noexcept { return c != Collective::send_recv && c != Collective::barrier; }

bool moves_data(Collective c) noexcept { return c != Collective::barrier; }

}  // namespace mci::perf
