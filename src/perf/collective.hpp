// The operations mci-perf measures, named as on its command line: every
// kind of operation a group runs (mci/op_kind.hpp), read off its row, the
// two point-to-point kinds together as one pair (each rank sends to the next
// and receives from the previous), which nccl-tests calls sendrecv: it is
// listed once, under send, and named send_recv.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "mci/op_kind.hpp"

namespace mci::perf {

// Whether mci-perf lists the kind: every one but the receiving side of the
// point-to-point pair, which is measured with its send.
constexpr bool measured(OpKind k) noexcept {
  const OpShape& s = op_shape(k);
  return !s.p2p || s.in != BufferExtent::none;
}

inline constexpr std::size_t kMeasuredCount = [] {
  std::size_t n = 0;
  for (OpKind k : kAllOpKinds) n += measured(k) ? 1 : 0;
  return n;
}();

// Every operation mci-perf measures, in the rows' order.
inline constexpr std::array<OpKind, kMeasuredCount> kAllCollectives = [] {
  std::array<OpKind, kMeasuredCount> out{};
  std::size_t i = 0;
  for (OpKind k : kAllOpKinds) {
    if (measured(k)) out[i++] = k;
  }
  return out;
}();

// The row's name; send_recv for the point-to-point pair.
std::string_view collective_name(OpKind c) noexcept;
// mci's names (all_reduce), plus the spellings nccl-tests and MPI users type
// (allreduce, all-reduce, alltoall, sendrecv) and nccl-tests' program names
// (all_reduce_perf); nullopt when unknown.
std::optional<OpKind> parse_collective(std::string_view text);
// The nccl-tests program that measures c (all_reduce_perf, alltoall_perf,
// sendrecv_perf; barrier_perf, which nccl-tests lacks, by the same rule).
std::string nccl_program_name(OpKind c);
// "all_reduce, broadcast, ..." for error messages and --help.
std::string collective_list();

inline bool uses_reduce_op(OpKind c) noexcept { return has_reduce_op(c); }
inline bool uses_root(OpKind c) noexcept { return has_root(c); }
// Whether any buffer moves (a barrier's do not).
constexpr bool moves_data(OpKind c) noexcept {
  return op_shape(c).in != BufferExtent::none || op_shape(c).out != BufferExtent::none;
}
// The point-to-point pair has no in-place form: a rank would overwrite what
// it still has to send. A barrier moves no data.
constexpr bool has_in_place(OpKind c) noexcept { return moves_data(c) && !is_p2p(c); }

}  // namespace mci::perf
