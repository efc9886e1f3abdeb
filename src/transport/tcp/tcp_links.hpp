// The connections of one rank, made when first needed: a listener whose
// address is published in the store, dials to the peers this rank asks for
// and answers to the peers that dial it, all moved forward without blocking
// from the transport's own progress loop.
//
// Two ranks may dial each other at once (both send first, or one sends while
// the other posts a receive). The higher rank's dial wins: it answers the
// lower rank's dial with "mine wins", and the lower rank, when the higher
// rank's hello arrives while its own dial is in flight, accepts it and drops
// its own. Each rank decides from what it knows alone, and both end with the
// same single connection.
#pragma once

#include <poll.h>

#include <chrono>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/deadline.hpp"
#include "common/socket.hpp"
#include "mci/store.hpp"
#include "transport/tcp/tcp_handshake.hpp"

namespace mci::transport {

class PeerLinks {
 public:
  // A stranger that connects and says nothing must not hold a slot forever.
  static constexpr auto kAnswerLimit = std::chrono::seconds(10);
  static constexpr int kAddressPollMs = 5;

  // Listens on `listen_host` and publishes the address under tcp/addr/RANK.
  // `store` must outlive this object (its addresses are read on first use).
  PeerLinks(Store& store, const LinkIdentity& me, const std::string& listen_host);
  ~PeerLinks();
  PeerLinks(const PeerLinks&) = delete;
  PeerLinks& operator=(const PeerLinks&) = delete;

  // Starts connecting to `peer` unless a link or a dial exists. Its address
  // comes from the store; a peer that has not published it yet (still in
  // init) is asked again while the transport waits, so that this rank keeps
  // answering its own callers meanwhile.
  void dial(int peer);
  bool linked(int peer) const { return linked_.count(peer) != 0; }
  // Handshakes or a yielded dial in flight: advance() has work to do.
  bool busy() const { return !dials_.empty() || !answers_.empty() || !yielded_.empty() || !unaddressed_.empty(); }
  // How long a wait may sleep before advance() must look again (the store
  // is polled for addresses not published yet).
  int max_sleep_ms() const { return unaddressed_.empty() ? -1 : kAddressPollMs; }

  // The listener and every handshake, with the events they wait for.
  void add_poll_fds(std::vector<pollfd>& fds) const;
  // Accepts what is waiting, moves every handshake as far as it goes, and
  // hands each new link to `up(peer, fd)`. Throws PeerError for a dial that
  // failed (it names the peer and what to check).
  template <class Up>
  void advance(Up&& up) {
    new_links_.clear();
    advance_all();
    for (auto& [peer, fd] : new_links_) up(peer, std::move(fd));
  }
  // What a dial to `peer` waits for, for a timeout message; "" if none.
  std::string waiting_for(int peer) const;
  // Eager mode: dials every lower rank and waits until every other rank is
  // linked; throws TimeoutError naming the ranks that never connected.
  std::vector<std::pair<int, Fd>> connect_all(const Deadline& dl);
  // Stops listening and drops every handshake in flight.
  void close() noexcept;

  const std::string& address() const { return address_; }

 private:
  void advance_all();
  void accept_waiting();
  // Starts the dial if the peer's address is in the store; false if not yet.
  bool try_dial(int peer);

  Store& store_;
  LinkIdentity me_;
  Fd listener_;
  std::string address_;
  std::vector<Handshake> dials_;
  std::vector<Handshake> answers_;
  std::unordered_set<int> yielded_;  // dials we gave up for the peer's own
  std::vector<int> unaddressed_;     // dials waiting for the peer's address
  Clock::time_point last_lookup_{};
  std::unordered_set<int> linked_;
  std::vector<std::pair<int, Fd>> new_links_;
};

}  // namespace mci::transport
