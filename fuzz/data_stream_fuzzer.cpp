// libFuzzer target: a peer that sends arbitrary bytes on a data connection.
// The TCP transport must end every such exchange with data or a clean mci
// error (PeerError, MismatchError, TimeoutError), never a crash or a hang.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mci/errors.hpp"
#include "transport/tcp/tcp_transport.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mci;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  Fd peer_end(sv[1]);
  std::vector<Fd> peers(2);
  peers[1] = Fd(sv[0]);
  transport::TcpTransport t(0, 2, std::move(peers));
  // The stranger's bytes, then it hangs up.
  std::size_t off = 0;
  while (off < size) {
    ssize_t w = ::send(peer_end.get(), data + off, size - off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w <= 0) break;
    off += static_cast<std::size_t>(w);
  }
  ::shutdown(peer_end.get(), SHUT_WR);
  Fingerprint coll;
  coll.kind = OpKind::all_reduce;
  coll.seq = 1;
  coll.count = 4;
  coll.dtype = DType::f32;
  Fingerprint p2p;
  p2p.kind = OpKind::send;
  p2p.seq = 3;
  p2p.count = 2;
  p2p.dtype = DType::f32;
  float a[4], b[2];
  try {
    t.post_recv(1, coll, a, sizeof a);
    t.post_recv(1, p2p, b, sizeof b);
    t.wait_all(Deadline(std::chrono::milliseconds(200)));
  } catch (const mci::Error&) {
  }
  return 0;
}
