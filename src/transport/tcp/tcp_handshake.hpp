// One data connection's handshake, moved forward without blocking so that a
// rank keeps answering its peers while its own connections are being made
// (connections made on first use would otherwise deadlock in a ring, each
// rank waiting for the next to answer).
//
// The acceptor sends a nonce; the connector answers with its rank, a hash of
// the group session, an HMAC of the nonce under the job token and a nonce of
// its own; the acceptor answers with its rank, its proof and a verdict:
// accepted, or "mine wins" when both ranks dialled each other at once (the
// higher rank's dial wins, see tcp_links.hpp). Strangers are refused.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "common/auth.hpp"
#include "common/deadline.hpp"
#include "common/socket.hpp"

namespace mci::transport {

// Who this rank is, as it proves it.
struct LinkIdentity {
  int rank = 0;
  int size = 1;
  std::array<std::uint8_t, 32> session{};  // SHA-256 of the group session
  std::string token;                       // job token, empty if none
};
LinkIdentity link_identity(int rank, int size, const std::string& session, const std::string& token);

class Handshake {
 public:
  enum class Result {
    pending,  // call advance() again when events() are ready
    up,       // the link is made: take_fd()
    yielded,  // (dial) the peer dials us instead; (answer) we told the peer so
    refused,  // (answer) a stranger, or a peer that gave up its dial: drop it
    failed,   // (dial) error() says why, naming the peer
  };

  // Connector side: starts connecting to `peer` at "host:port".
  static Handshake dial(const LinkIdentity& me, int peer, const std::string& addr);
  // Acceptor side, for a connection just accepted.
  static Handshake answer(const LinkIdentity& me, Fd fd);

  // `dial_wins(peer)` is asked once the acceptor knows who calls: true if
  // this rank has its own dial to that peer in flight and that dial wins.
  Result advance(const std::function<bool(int)>& dial_wins);

  int fd() const { return fd_.get(); }
  short events() const;
  int peer() const { return peer_; }
  bool dialled() const { return dialled_; }
  Clock::time_point started() const { return started_; }
  Fd take_fd() { return std::move(fd_); }
  const std::string& error() const { return error_; }
  // (answer) refused because its hello did not prove it belongs to the job.
  bool stranger() const { return stranger_; }
  const std::string& addr() const { return addr_; }
  // "no answer to the handshake yet", for timeout messages.
  std::string stage() const;

 private:
  enum class Stage { connecting, send, recv, done };
  enum class Msg { challenge, hello, welcome };
  void expect(Msg m);
  void put(Msg m, const void* data, std::size_t n);
  Result on_received(const std::function<bool(int)>& dial_wins);
  Result on_sent();
  Result fail(std::string why);

  LinkIdentity me_;
  Fd fd_;
  int peer_ = -1;
  bool dialled_ = false;
  bool stranger_ = false;
  Stage stage_ = Stage::send;
  std::string addr_;
  std::string error_;
  Clock::time_point started_ = Clock::now();
  auth::Nonce my_nonce_{};
  auth::Nonce their_nonce_{};
  // The message being sent or received, and how far.
  std::array<std::uint8_t, 160> buf_{};
  std::size_t len_ = 0;
  std::size_t off_ = 0;
  Msg msg_ = Msg::challenge;
};

}  // namespace mci::transport
