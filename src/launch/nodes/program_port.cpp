#include "launch/nodes/program_port.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "common/deadline.hpp"
#include "common/env.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"

namespace mci::launch {

namespace {

// Each store call's own wait, so that the loop looks at its signals and
// its deadline between tries.
constexpr auto kStoreTry = std::chrono::milliseconds(500);

}  // namespace

PortReservation::PortReservation() {
  // On every address, as torch's TCPStore listens on all of them.
  fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd_.valid()) throw Error(fmt::format("cannot reserve a port for the program: socket: {}", std::strerror(errno)));
  int one = 1;
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = 0;
  if (::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0) {
    throw Error(fmt::format("cannot reserve a port for the program: bind: {}", std::strerror(errno)));
  }
  port_ = local_port(fd_.get());
}

void publish_program_endpoint(const ProgramPortOptions& o, const ProgramEndpoint& e) {
  const auto store = o.store.connect(std::chrono::seconds(10), std::chrono::seconds(10));
  store->set(kProgramAddrKey + o.scope, to_bytes(e.addr));
  store->set(kOnRankLossKey + o.scope, to_bytes(e.on_rank_loss));
  store->set(kProgramPortKey + o.scope, to_bytes(std::to_string(e.port)));  // last: the others wait on it
}

std::optional<ProgramEndpoint> fetch_program_endpoint(const ProgramPortOptions& o, SignalFd& signals,
                                                      int* stop_signal) {
  const Deadline dl(o.wait_limit);
  std::unique_ptr<TcpStore> store;  // kept between slices once connected
  while (true) {
    try {
      if (!store) store = o.store.connect(kStoreTry, kStoreTry);
      const std::string v = to_string(store->get(kProgramPortKey + o.scope, kStoreTry));
      const auto port = parse_int(v);
      if (!port || *port < 1 || *port > 65535) {
        throw Error(
            fmt::format("node 0's launcher published '{}' as the program's MASTER_PORT; every node "
                        "must run the same mcirun version",
                        v));
      }
      ProgramEndpoint e{to_string(store->get(kProgramAddrKey + o.scope, kStoreTry)), static_cast<int>(*port)};
      // Set before the port; absent only from an mcirun older than --on-rank-loss, which stops.
      if (store->check({kOnRankLossKey + o.scope})) {
        e.on_rank_loss = to_string(store->get(kOnRankLossKey + o.scope, kStoreTry));
      }
      return e;
    } catch (const TimeoutError&) {
      // node 0's launcher is not up yet, or has not published the port yet
    }
    if (o.owner_gone) {
      if (auto why = o.owner_gone()) throw ProgramOwnerLost(*why);
    }
    pollfd p{signals.fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      for (int sig : signals.take()) {
        if (is_stop_signal(sig)) {
          *stop_signal = sig;
          return std::nullopt;
        }
      }
    }
    if (dl.expired()) {
      throw TimeoutError(fmt::format(
          "node 0's launcher at {}:{} did not answer within {} s: start mcirun with --node_rank=0 there, with the "
          "same --master_addr/--master_port (and MCI_JOB_TOKEN) on every node (--rdzv_conf join_timeout=SECONDS "
          "waits longer)",
          o.store.host, o.store.port, std::chrono::duration_cast<std::chrono::seconds>(o.wait_limit).count()));
    }
  }
}

}  // namespace mci::launch
