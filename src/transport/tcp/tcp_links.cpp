#include "transport/tcp/tcp_links.hpp"

#include <sys/socket.h>

#include <algorithm>

#include <fmt/format.h>

#include "common/log.hpp"
#include "mci/errors.hpp"

namespace mci::transport {

namespace {

// Answers in flight at once; beyond, the oldest goes (a stranger's flood
// of silent connections must not grow without bound).
constexpr std::size_t kMaxAnswers = 4096;
// Enough for every rank of a large job dialling one rank at once (the
// kernel caps it at net.core.somaxconn).
constexpr int kBacklog = 4096;

std::string addr_key(int rank) { return fmt::format("tcp/addr/{}", rank); }

}  // namespace

PeerLinks::PeerLinks(Store& store, const LinkIdentity& me, const std::string& listen_host)
    : store_(store), me_(me), listener_(listen_tcp(listen_host, 0, kBacklog)) {
  set_nonblocking(listener_.get());
  address_ = fmt::format("{}:{}", listen_host, local_port(listener_.get()));
  store_.set(addr_key(me_.rank), to_bytes(address_));
}

PeerLinks::~PeerLinks() { close(); }

void PeerLinks::dial(int peer) {
  if (linked(peer) || yielded_.count(peer)) return;
  for (const auto& d : dials_) {
    if (d.peer() == peer) return;
  }
  if (std::find(unaddressed_.begin(), unaddressed_.end(), peer) != unaddressed_.end()) return;
  if (!try_dial(peer)) unaddressed_.push_back(peer);
}

bool PeerLinks::try_dial(int peer) {
  // One short request: the lookup runs inside an operation's wait, which
  // must keep its own deadline even when the store's host cannot be reached.
  std::string addr;
  try {
    addr = to_string(store_.get(addr_key(peer), std::chrono::milliseconds(1)));
  } catch (const TimeoutError&) {
    return false;  // not published yet (or the store is slow): asked again later
  }
  dials_.push_back(Handshake::dial(me_, peer, addr));
  return true;
}

void PeerLinks::add_poll_fds(std::vector<pollfd>& fds) const {
  if (listener_.valid()) fds.push_back({listener_.get(), POLLIN, 0});
  for (const auto& d : dials_) {
    if (d.fd() >= 0) fds.push_back({d.fd(), d.events(), 0});
  }
  for (const auto& a : answers_) fds.push_back({a.fd(), a.events(), 0});
}

void PeerLinks::accept_waiting() {
  if (!listener_.valid()) return;
  while (true) {
    const int c = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) return;
    if (answers_.size() >= kMaxAnswers) {
      log::warn("rank {}: dropped a connection from {} that had not finished its handshake ({} pending)", me_.rank,
                peer_address(answers_.front().fd()), answers_.size());
      answers_.erase(answers_.begin());
    }
    Fd fd(c);
    set_nodelay(fd.get());
    answers_.push_back(Handshake::answer(me_, std::move(fd)));
  }
}

void PeerLinks::advance_all() {
  accept_waiting();
  if (!unaddressed_.empty() && Clock::now() - last_lookup_ >= std::chrono::milliseconds(kAddressPollMs)) {
    last_lookup_ = Clock::now();
    // A peer may have dialled us meanwhile: then there is nothing to do.
    std::erase_if(unaddressed_, [this](int peer) { return linked(peer) || try_dial(peer); });
  }
  for (std::size_t i = 0; i < dials_.size();) {
    Handshake& d = dials_[i];
    const auto r = d.advance([](int) { return false; });
    if (r == Handshake::Result::pending) {
      ++i;
      continue;
    }
    const int peer = d.peer();
    if (r == Handshake::Result::up) {
      linked_.insert(peer);
      new_links_.emplace_back(peer, d.take_fd());
    } else if (r == Handshake::Result::yielded) {
      yielded_.insert(peer);
    } else {
      const std::string why = d.error();
      dials_.erase(dials_.begin() + static_cast<std::ptrdiff_t>(i));
      throw PeerError(why, peer);
    }
    dials_.erase(dials_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  // The higher rank's dial wins; a rank already linked sends a duplicate away.
  const auto dial_wins = [this](int peer) {
    if (linked(peer)) return true;
    if (me_.rank < peer) return false;
    return std::any_of(dials_.begin(), dials_.end(), [&](const Handshake& d) { return d.peer() == peer; });
  };
  const auto now = Clock::now();
  for (std::size_t i = 0; i < answers_.size();) {
    Handshake& a = answers_[i];
    const auto r = a.advance(dial_wins);
    if (r == Handshake::Result::pending) {
      if (now - a.started() < kAnswerLimit) {
        ++i;
        continue;
      }
      log::warn("rank {}: dropped a connection from {} that did not finish its handshake within {}s", me_.rank,
                peer_address(a.fd()), std::chrono::seconds(kAnswerLimit).count());
    } else if (r == Handshake::Result::up) {
      const int peer = a.peer();
      // Our own dial to a higher rank loses: drop it (the peer answers it
      // with "mine wins", or sees it close).
      std::erase_if(dials_, [&](const Handshake& d) { return d.peer() == peer; });
      std::erase(unaddressed_, peer);
      yielded_.erase(peer);
      linked_.insert(peer);
      new_links_.emplace_back(peer, a.take_fd());
    } else if (r == Handshake::Result::refused && a.peer() < 0) {
      if (a.stranger()) {
        log::warn("rank {}: refused a connection from {} that did not prove it belongs to this job", me_.rank,
                  peer_address(a.fd()));
      }
    }
    answers_.erase(answers_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

std::string PeerLinks::waiting_for(int peer) const {
  for (const auto& d : dials_) {
    if (d.peer() == peer) return d.stage();
  }
  if (yielded_.count(peer)) {
    return fmt::format("waiting for rank {} to connect (both dialled; its connection wins)", peer);
  }
  if (std::find(unaddressed_.begin(), unaddressed_.end(), peer) != unaddressed_.end()) {
    return fmt::format("rank {} never published its address (it did not start, or is still joining the group)", peer);
  }
  return {};
}

std::vector<std::pair<int, Fd>> PeerLinks::connect_all(const Deadline& dl) {
  new_links_.clear();
  for (int p = 0; p < me_.rank; ++p) dial(p);
  std::vector<pollfd> fds;
  while (linked_.size() + 1 < static_cast<std::size_t>(me_.size)) {
    if (dl.expired()) {
      std::string who;
      for (int p = 0; p < me_.size; ++p) {
        if (p != me_.rank && !linked(p)) who += fmt::format("{}{}", who.empty() ? "" : ", ", p);
      }
      throw TimeoutError(fmt::format(
          "Timed out waiting {}ms for ranks {} to connect to rank {} at {} (MCI_CONNECT=eager): they did not start, "
          "crashed before joining, or cannot reach this address",
          dl.budget().count(), who, me_.rank, address_));
    }
    fds.clear();
    add_poll_fds(fds);
    ::poll(fds.data(), fds.size(), std::min(dl.poll_ms(), unaddressed_.empty() ? 100 : kAddressPollMs));
    advance_all();
  }
  return std::move(new_links_);
}

void PeerLinks::close() noexcept {
  listener_.reset();
  dials_.clear();
  answers_.clear();
  yielded_.clear();
  unaddressed_.clear();
}

}  // namespace mci::transport
