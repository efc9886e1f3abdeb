#include "support/loopback_transport.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci::transport {

namespace {

// The same rule as TcpTransport: a recv takes the oldest frame of its
// collective sequence number, or of its tag for point-to-point.
bool same_slot(const Fingerprint& want, const Fingerprint& got) {
  return is_p2p(want.kind) == is_p2p(got.kind) && want.seq == got.seq;
}

std::string mismatch_text(int me, int peer, const Fingerprint& mine, std::size_t my_bytes, const Fingerprint& theirs,
                          std::size_t their_bytes) {
  if (is_p2p(mine.kind)) {
    return fmt::format(
        "point-to-point mismatch between rank {} and rank {}: rank {} posted {} ({} bytes) but "
        "rank {} sent {} ({} bytes). A recv must use the count and dtype of the matching send.",
        me, peer, me, mine.describe_receive(), my_bytes, peer, theirs.describe(), their_bytes);
  }
  if (mine.matches(theirs)) {
    return fmt::format(
        "size mismatch between rank {} and rank {} in {}: rank {} expected {} bytes but rank {} sent "
        "{} bytes (the ranks cut the operation into different pieces: an mci bug)",
        me, peer, mine.describe(), me, my_bytes, peer, their_bytes);
  }
  return collective_mismatch_text(me, peer, mine, theirs);
}

}  // namespace

LoopbackHub::LoopbackHub(int size, std::size_t window_bytes)
    : size_(size),
      window_(window_bytes),
      channels_(static_cast<std::size_t>(size) * static_cast<std::size_t>(size)),
      in_flight_(channels_.size(), 0),
      ranks_(static_cast<std::size_t>(size)) {}

LoopbackTransport::LoopbackTransport(std::shared_ptr<LoopbackHub> hub, int rank)
    : hub_(std::move(hub)), rank_(rank), peers_(static_cast<std::size_t>(hub_->size())) {}

LoopbackTransport::~LoopbackTransport() { close(); }

template <class E>
void LoopbackTransport::fail(const E& e) {
  broken_ = true;
  throw e;
}

void LoopbackTransport::check_usable() const {
  if (broken_) throw Error(kTransportBroken);
}

OpHandle LoopbackTransport::post_send(int peer, const Fingerprint& fp, const void* data, std::size_t bytes) {
  check_usable();
  Peer& p = peers_.at(static_cast<std::size_t>(peer));
  p.sends.push_back(SendOp{fp, static_cast<const std::uint8_t*>(data), bytes});
  return OpHandle{peer, false, p.sends_posted++};
}

OpHandle LoopbackTransport::post_recv(int peer, const Fingerprint& fp, void* data, std::size_t bytes) {
  check_usable();
  Peer& p = peers_.at(static_cast<std::size_t>(peer));
  p.recvs.push_back(RecvOp{fp, static_cast<std::uint8_t*>(data), bytes, false});
  ++p.recvs_left;
  return OpHandle{peer, true, p.recv_base + p.recvs.size() - 1};
}

std::uint64_t LoopbackTransport::step(const std::function<bool()>& enough) {
  // Whole frames are copied before taking the hub's lock: the copy is the
  // slow part.
  std::vector<std::vector<LoopbackHub::Frame>> outgoing(static_cast<std::size_t>(size()));
  if (!hub_->window_) {
    for (int i = 0; i < size(); ++i) {
      for (const SendOp& s : peers_[i].sends) {
        outgoing[i].push_back(
            LoopbackHub::Frame{s.fp, std::vector<std::uint8_t>(s.data, s.data + s.bytes), s.bytes, false});
      }
    }
  }
  auto announce = [&](bool moved) {
    if (moved) {
      ++hub_->generation_;
      hub_->changed_.notify_all();
    }
    return hub_->generation_;
  };
  std::uint64_t seen;
  {
    std::lock_guard lock(hub_->mu_);
    for (int i = 0; i < size(); ++i) {
      if (i == rank_) continue;
      Peer& p = peers_[i];
      const LoopbackHub::RankState& theirs = hub_->ranks_[i];
      p.left = theirs.left;
      if (theirs.abort_reason && !p.abort_reason) p.abort_reason = theirs.abort_reason;
    }
    seen = announce(hub_->window_ ? drain_windowed() : exchange_whole(outgoing));
  }
  for (int i = 0; i < size(); ++i) {
    if (peers_[i].recvs_left > 0) match(i);
  }
  // With a window, what was asked for may be done before our own sends
  // move on, as a socket's receive completes whatever its sends still hold:
  // nothing more is pushed then.
  if (hub_->window_ && !(enough && enough())) {
    std::lock_guard lock(hub_->mu_);
    // What another rank did since we drained is news we have not seen: our
    // own push may count as seen only when nothing else happened between.
    const bool others = hub_->generation_ != seen;
    const std::uint64_t now = announce(push_windowed());
    if (!others) seen = now;
  }
  if (pending()) check_peers();
  return seen;
}

bool LoopbackTransport::exchange_whole(std::vector<std::vector<LoopbackHub::Frame>>& outgoing) {
  bool sent = false;
  for (int i = 0; i < size(); ++i) {
    Peer& p = peers_[i];
    auto& in = hub_->channel(i, rank_);
    std::move(in.begin(), in.end(), std::back_inserter(p.inbox));
    in.clear();
    // Nobody would read frames to a rank that is gone: those sends stay
    // pending and fail in check_peers().
    if (outgoing[i].empty() || p.left || p.abort_reason) continue;
    auto& out = hub_->channel(rank_, i);
    std::move(outgoing[i].begin(), outgoing[i].end(), std::back_inserter(out));
    p.sends_done += p.sends.size();
    p.sends.clear();
    sent = true;
  }
  return sent;
}

bool LoopbackTransport::drain_windowed() {
  bool moved = false;
  for (int i = 0; i < size(); ++i) {
    Peer& p = peers_[i];
    // Parts join the frame they continue (always the newest of this
    // peer's, since a direction is in order).
    for (LoopbackHub::Frame& part : hub_->channel(i, rank_)) {
      if (part.continues) {
        auto& whole = p.inbox.back().bytes;
        whole.insert(whole.end(), part.bytes.begin(), part.bytes.end());
      } else {
        p.inbox.push_back(std::move(part));
      }
      moved = true;
    }
    hub_->channel(i, rank_).clear();
    hub_->in_flight_[static_cast<std::size_t>(i * size() + rank_)] = 0;
  }
  return moved;
}

bool LoopbackTransport::push_windowed() {
  bool moved = false;
  const std::size_t window = hub_->window_;
  for (int i = 0; i < size(); ++i) {
    Peer& p = peers_[i];
    if (p.left || p.abort_reason) continue;
    // From the caller's buffers, as far as the window lets.
    std::size_t& used = hub_->in_flight_[static_cast<std::size_t>(rank_ * size() + i)];
    while (!p.sends.empty() && (used < window || p.sends.front().bytes == 0)) {
      const SendOp& s = p.sends.front();
      const std::size_t take = std::min(window - std::min(window, used), s.bytes - p.front_sent);
      const std::uint8_t* at = s.data + p.front_sent;
      hub_->channel(rank_, i).push_back(
          LoopbackHub::Frame{s.fp, std::vector<std::uint8_t>(at, at + take), s.bytes, p.front_sent > 0});
      used += take;
      p.front_sent += take;
      moved = true;
      if (p.front_sent < s.bytes) break;
      p.sends.pop_front();
      ++p.sends_done;
      p.front_sent = 0;
    }
  }
  return moved;
}

void LoopbackTransport::match(int peer) {
  Peer& p = peers_[peer];
  // Takes the oldest frame of op's slot; a collective frame of another
  // sequence number ahead of it means the ranks disagree. A frame still
  // arriving (window mode) is the one an earlier receive waits for: the
  // receives after it skip it, as they would skip a frame taken.
  std::vector<const LoopbackHub::Frame*> claimed;
  auto take = [&](RecvOp& op) {
    for (auto it = p.inbox.begin(); it != p.inbox.end(); ++it) {
      if (std::find(claimed.begin(), claimed.end(), &*it) != claimed.end()) continue;
      if (same_slot(op.fp, it->fp)) {
        if (!op.fp.matches(it->fp) || it->total != op.bytes) {
          fail(MismatchError(mismatch_text(rank_, peer, op.fp, op.bytes, it->fp, it->total)));
        }
        if (it->bytes.size() < it->total) {  // still arriving
          claimed.push_back(&*it);
          return;
        }
        if (op.bytes) std::memcpy(op.data, it->bytes.data(), op.bytes);
        op.done = true;
        --p.recvs_left;
        p.inbox.erase(it);
        return;
      }
      if (!is_p2p(op.fp.kind) && !is_p2p(it->fp.kind)) {
        fail(MismatchError(mismatch_text(rank_, peer, op.fp, op.bytes, it->fp, it->total)));
      }
    }
  };
  for (RecvOp& op : p.recvs) {
    if (!op.done) take(op);
  }
}

void LoopbackTransport::check_peers() {
  for (int i = 0; i < size(); ++i) {
    if (peers_[i].abort_reason) {
      fail(PeerError(fmt::format("rank {} aborted the group: {}", i, *peers_[i].abort_reason), i));
    }
  }
  for (int i = 0; i < size(); ++i) {
    const Peer& p = peers_[i];
    if (!p.left) continue;
    std::string what;
    for (const RecvOp& op : p.recvs) {
      if (!op.done) {
        what = fmt::format("waited for {} bytes of {} from it", op.bytes, op.fp.describe_receive());
        break;
      }
    }
    if (what.empty() && !p.sends.empty()) {
      what = fmt::format("sent {} bytes of {} to it", p.sends.front().bytes, p.sends.front().fp.describe());
    }
    if (what.empty()) continue;  // it owes us nothing: leaving is not an error
    fail(PeerError(fmt::format("rank {} left the group (it destroyed its process group or exited "
                               "normally) while rank {} {}",
                               i, rank_, what),
                   i));
  }
}

bool LoopbackTransport::pending() const {
  return std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) { return p.recvs_left > 0 || !p.sends.empty(); });
}

void LoopbackTransport::sleep(std::uint64_t seen, Clock::time_point until) {
  std::unique_lock lock(hub_->mu_);
  hub_->changed_.wait_until(lock, until, [&] { return hub_->generation_ != seen; });
}

void LoopbackTransport::timeout(const Deadline& dl) {
  Fingerprint fp;
  bool receiving = false;  // fp is a receive's (a p2p one then says "recv")
  std::string ranks, desc;
  for (int i = 0; i < size(); ++i) {
    const Peer& p = peers_[i];
    const auto op = std::find_if(p.recvs.begin(), p.recvs.end(), [](const RecvOp& o) { return !o.done; });
    if (op == p.recvs.end() && p.sends.empty()) continue;
    ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", i);
    if (op != p.recvs.end()) {
      fp = op->fp;
      receiving = true;
      desc += fmt::format("{}waiting for {} bytes from rank {}", desc.empty() ? "" : "; ", op->bytes, i);
    }
    if (!p.sends.empty()) {
      fp = p.sends.front().fp;
      receiving = false;
      desc += fmt::format("{}sending {} bytes to rank {}", desc.empty() ? "" : "; ", p.sends.front().bytes, i);
    }
  }
  fail(TimeoutError(
      fmt::format("Timed out waiting {}ms for {} on rank {}: no answer from rank {} ({}). The peer never "
                  "entered this operation, is stuck elsewhere, or is much slower: raise the timeout only if "
                  "it is a slow step, not a hang.",
                  dl.budget().count(), receiving ? fp.describe_receive() : fp.describe(), rank_, ranks, desc)));
}

template <class Done>
void LoopbackTransport::progress_until(Done done, const Deadline& dl) {
  check_usable();
  while (true) {
    const std::uint64_t seen = step(done);
    if (done()) return;
    if (dl.expired()) timeout(dl);
    sleep(seen, dl.at());
  }
}

void LoopbackTransport::wait(const OpHandle& op, const Deadline& dl) {
  progress_until([&] { return done(op); }, dl);
}

void LoopbackTransport::wait_all(const Deadline& dl) {
  progress_until([&] { return !pending(); }, dl);
  for (Peer& p : peers_) {
    p.recv_base += p.recvs.size();
    p.recvs.clear();
  }
}

bool LoopbackTransport::done(const OpHandle& op) const {
  const Peer& p = peers_.at(static_cast<std::size_t>(op.peer));
  if (op.is_recv) return op.index < p.recv_base || p.recvs[op.index - p.recv_base].done;
  return op.index < p.sends_done;
}

void LoopbackTransport::progress(std::chrono::milliseconds max_wait, const Deadline& dl) {
  check_usable();
  const std::uint64_t seen = step();
  if (!pending()) return;
  if (dl.expired()) timeout(dl);
  sleep(seen, std::min(dl.at(), Clock::now() + max_wait));
  step();
}

void LoopbackTransport::reap() {
  for (Peer& p : peers_) {
    while (!p.recvs.empty() && p.recvs.front().done) {
      p.recvs.pop_front();
      ++p.recv_base;
    }
  }
}

void LoopbackTransport::abort(const std::string& reason) noexcept {
  broken_ = true;
  std::lock_guard lock(hub_->mu_);
  auto& mine = hub_->ranks_[rank_].abort_reason;
  if (!mine) mine = reason;
  ++hub_->generation_;
  hub_->changed_.notify_all();
}

void LoopbackTransport::close() noexcept {
  broken_ = true;
  std::lock_guard lock(hub_->mu_);
  if (hub_->ranks_[rank_].left) return;
  hub_->ranks_[rank_].left = true;
  ++hub_->generation_;
  hub_->changed_.notify_all();
}

}  // namespace mci::transport
