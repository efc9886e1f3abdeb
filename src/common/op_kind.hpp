// The kinds of operation a group runs (collectives and point-to-point), with
// their names and the properties validation, selection and fingerprints ask.
#pragma once

#include <cstdint>
#include <string_view>

namespace mci {

// The kinds as a table on two lines:
// clang-format off
enum class OpKind : std::uint8_t {
  all_reduce = 0, broadcast, reduce, all_gather, gather, scatter,
  reduce_scatter, all_to_all, barrier, send, recv
};
// clang-format on
std::string_view op_name(OpKind k) noexcept;
bool is_p2p(OpKind k) noexcept;
bool has_root(OpKind k) noexcept;
bool has_reduce_op(OpKind k) noexcept;

}  // namespace mci
