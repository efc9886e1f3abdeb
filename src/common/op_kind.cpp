#include "common/op_kind.hpp"

namespace mci {

std::string_view op_name(OpKind k) noexcept {
  switch (k) {
    case OpKind::all_reduce: return "all_reduce";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce: return "reduce";
    case OpKind::all_gather: return "all_gather";
    case OpKind::gather: return "gather";
    case OpKind::scatter: return "scatter";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::all_to_all: return "all_to_all";
    case OpKind::barrier: return "barrier";
    case OpKind::send: return "send";
    case OpKind::recv: return "recv";
  }
  return "?";
}

bool is_p2p(OpKind k) noexcept { return k == OpKind::send || k == OpKind::recv; }

bool has_root(OpKind k) noexcept {
  return k == OpKind::broadcast || k == OpKind::reduce || k == OpKind::gather || k == OpKind::scatter;
}

bool has_reduce_op(OpKind k) noexcept {
  return k == OpKind::all_reduce || k == OpKind::reduce || k == OpKind::reduce_scatter;
}

}  // namespace mci
