// Building the TCP mesh: the links (tcp_links.hpp) made all at once
// (eager) or left to the transport to make on first use (lazy).
#include <fmt/format.h>

#include "transport/tcp/tcp_transport.hpp"

namespace mci::transport {

std::unique_ptr<TcpTransport> connect_tcp_mesh(Store& store, int rank, int size, const std::string& listen_host,
                                               const std::string& session, const std::string& token, const Deadline& dl,
                                               TcpWait wait, ConnectMode mode) {
  if (size == 1) return std::make_unique<TcpTransport>(rank, size, std::vector<Fd>(1), wait);
  auto links = std::make_unique<PeerLinks>(store, link_identity(rank, size, session, token), listen_host);
  if (mode == ConnectMode::lazy) {
    return std::make_unique<TcpTransport>(rank, size, std::vector<std::pair<int, Fd>>{}, std::move(links), wait);
  }
  std::vector<Fd> peers(static_cast<std::size_t>(size));
  for (auto& [p, fd] : links->connect_all(dl)) peers[static_cast<std::size_t>(p)] = std::move(fd);
  // Every pair is connected: nothing more to listen for.
  links.reset();
  return std::make_unique<TcpTransport>(rank, size, std::move(peers), wait);
}

}  // namespace mci::transport
