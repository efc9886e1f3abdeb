// send and recv: one frame tagged with the user's tag. A recv takes the
// oldest frame from that peer with that tag; frames with other tags wait in
// the transport until someone asks for them.
#include "collectives/mesh/algorithms.hpp"

namespace mci::coll {

void send_p2p(const Ctx& c) {
  c.t.post_send(c.d.peer, c.d.fingerprint(), c.d.in, c.d.bytes());
  c.t.wait_all(c.dl);
}

void recv_p2p(const Ctx& c) {
  c.t.post_recv(c.d.peer, c.d.fingerprint(), c.d.out, c.d.bytes());
  c.t.wait_all(c.dl);
}

}  // namespace mci::coll
