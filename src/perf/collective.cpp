#include "perf/collective.hpp"

#include <algorithm>
#include <cctype>

namespace mci::perf {

std::string_view collective_name(OpKind c) noexcept { return is_p2p(c) ? "send_recv" : op_name(c); }

std::optional<OpKind> parse_collective(std::string_view text) {
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
  for (OpKind c : kAllCollectives) {
    if (squash(collective_name(c)) == want) return c;
  }
  return std::nullopt;
}

std::string nccl_program_name(OpKind c) {
  // nccl-tests writes these two without their separator.
  const std::string_view name = collective_name(c);
  if (name == "all_to_all") return "alltoall_perf";
  if (name == "send_recv") return "sendrecv_perf";
  return std::string(name) + "_perf";
}

std::string collective_list() {
  std::string out;
  for (OpKind c : kAllCollectives) {
    if (!out.empty()) out += ", ";
    out += collective_name(c);
  }
  return out;
}

}  // namespace mci::perf
