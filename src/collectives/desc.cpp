#include "collectives/desc.hpp"

namespace mci::coll {

Fingerprint CollectiveDesc::fingerprint() const {
  Fingerprint fp;
  fp.kind = kind;
  fp.dtype = dtype;
  fp.count = count;
  fp.algo = static_cast<std::uint8_t>(algo);
  if (is_p2p(kind)) {
    fp.seq = static_cast<std::uint64_t>(static_cast<std::uint32_t>(tag));
    fp.kind = OpKind::send;  // a send and its recv carry the same fingerprint
    fp.algo = 0;
    return fp;
  }
  fp.seq = seq;
  fp.op = op;
  fp.root = has_root(kind) ? root : -1;
  return fp;
}

}  // namespace mci::coll
