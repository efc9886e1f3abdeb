#include "common/fingerprint.hpp"

#include <fmt/format.h>

#include "common/algo.hpp"

namespace mci {

bool Fingerprint::matches(const Fingerprint& o) const noexcept {
  const bool p2p_pair = is_p2p(kind) && is_p2p(o.kind);
  if (p2p_pair) return seq == o.seq && count == o.count && dtype == o.dtype;
  return seq == o.seq && count == o.count && root == o.root && kind == o.kind && dtype == o.dtype && algo == o.algo &&
         (!has_reduce_op(kind) || op == o.op);
}

std::string Fingerprint::describe() const {
  if (is_p2p(kind)) {
    return fmt::format("{} tag {} ({} x {})", op_name(kind), seq, dtype_name(dtype), count);
  }
  if (kind == OpKind::barrier) return fmt::format("barrier #{}", seq);
  std::string s = fmt::format("{} #{} ({} x {}", op_name(kind), seq, dtype_name(dtype), count);
  if (has_reduce_op(kind)) s += fmt::format(", {}", reduce_op_name(op));
  if (has_root(kind)) s += fmt::format(", root {}", root);
  s += ")";
  return s;
}

std::string Fingerprint::describe_receive() const {
  if (!is_p2p(kind)) return describe();
  return fmt::format("recv tag {} ({} x {})", seq, dtype_name(dtype), count);
}

std::string collective_mismatch_text(int me, int peer, const Fingerprint& mine, const Fingerprint& theirs) {
  Fingerprint same_but_algo = theirs;
  same_but_algo.algo = mine.algo;
  if (theirs.algo != mine.algo && same_but_algo.matches(mine)) {
    return fmt::format(
        "collective mismatch between rank {} and rank {} in {}: rank {} chose the {} algorithm, "
        "rank {} chose {}. Set MCI_ALGO the same on every rank (or unset it everywhere).",
        me, peer, mine.describe(), me, algo_name(static_cast<Algo>(mine.algo)), peer,
        algo_name(static_cast<Algo>(theirs.algo)));
  }
  return fmt::format(
      "collective mismatch between rank {} and rank {}: rank {} called {} but rank {} called {}. "
      "Every rank must call the same collectives in the same order with the same count, dtype, "
      "op and root.",
      me, peer, me, mine.describe(), peer, theirs.describe());
}

}  // namespace mci
