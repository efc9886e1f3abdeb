#include "transport/loopback/loopback_transport.hpp"

#include <algorithm>
#include <cstring>
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
        me, peer, me, mine.describe(), my_bytes, peer, theirs.describe(), their_bytes);
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

LoopbackHub::LoopbackHub(int size)
    : size_(size),
      channels_(static_cast<std::size_t>(size) * static_cast<std::size_t>(size)),
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

std::uint64_t LoopbackTransport::step() {
  const int n = size();
  // Copy the payloads before taking the hub's lock: the copy is the slow part.
  std::vector<std::vector<LoopbackHub::Frame>> outgoing(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (const SendOp& s : peers_[i].sends) {
      outgoing[i].push_back(LoopbackHub::Frame{s.fp, std::vector<std::uint8_t>(s.data, s.data + s.bytes)});
    }
  }
  std::uint64_t seen;
  {
    std::lock_guard lock(hub_->mu_);
    bool sent = false;
    for (int i = 0; i < n; ++i) {
      Peer& p = peers_[i];
      const LoopbackHub::RankState& theirs = hub_->ranks_[i];
      if (i != rank_) {
        p.left = theirs.left;
        if (theirs.abort_reason && !p.abort_reason) p.abort_reason = theirs.abort_reason;
      }
      auto& in = hub_->channel(i, rank_);
      std::move(in.begin(), in.end(), std::back_inserter(p.inbox));
      in.clear();
      // Nobody would read frames to a rank that is gone: those sends stay
      // pending and fail below.
      if (outgoing[i].empty() || p.left || p.abort_reason) continue;
      auto& out = hub_->channel(rank_, i);
      std::move(outgoing[i].begin(), outgoing[i].end(), std::back_inserter(out));
      p.sends_done += p.sends.size();
      p.sends.clear();
      sent = true;
    }
    if (sent) {
      ++hub_->generation_;
      hub_->changed_.notify_all();
    }
    seen = hub_->generation_;
  }
  for (int i = 0; i < n; ++i) {
    if (peers_[i].recvs_left > 0) match(i);
  }
  if (pending()) check_peers();
  return seen;
}

void LoopbackTransport::match(int peer) {
  Peer& p = peers_[peer];
  // Takes the oldest frame of op's slot; a collective frame of another
  // sequence number ahead of it means the ranks disagree.
  auto take = [&](RecvOp& op) {
    for (auto it = p.inbox.begin(); it != p.inbox.end(); ++it) {
      if (same_slot(op.fp, it->fp)) {
        if (!op.fp.matches(it->fp) || it->bytes.size() != op.bytes) {
          fail(MismatchError(mismatch_text(rank_, peer, op.fp, op.bytes, it->fp, it->bytes.size())));
        }
        if (op.bytes) std::memcpy(op.data, it->bytes.data(), op.bytes);
        op.done = true;
        --p.recvs_left;
        p.inbox.erase(it);
        return;
      }
      if (!is_p2p(op.fp.kind) && !is_p2p(it->fp.kind)) {
        fail(MismatchError(mismatch_text(rank_, peer, op.fp, op.bytes, it->fp, it->bytes.size())));
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
        what = fmt::format("waited for {} bytes of {} from it", op.bytes, op.fp.describe());
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
  std::string ranks, desc;
  for (int i = 0; i < size(); ++i) {
    const Peer& p = peers_[i];
    const auto op = std::find_if(p.recvs.begin(), p.recvs.end(), [](const RecvOp& o) { return !o.done; });
    if (op == p.recvs.end() && p.sends.empty()) continue;
    ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", i);
    if (op != p.recvs.end()) {
      fp = op->fp;
      desc += fmt::format("{}waiting for {} bytes from rank {}", desc.empty() ? "" : "; ", op->bytes, i);
    }
    if (!p.sends.empty()) {
      fp = p.sends.front().fp;
      desc += fmt::format("{}sending {} bytes to rank {}", desc.empty() ? "" : "; ", p.sends.front().bytes, i);
    }
  }
  fail(TimeoutError(
      fmt::format("Timed out waiting {}ms for {} on rank {}: no answer from rank {} ({}). The peer never "
                  "entered this operation, is stuck elsewhere, or is much slower: raise the timeout only if "
                  "it is a slow step, not a hang.",
                  dl.budget().count(), fp.describe(), rank_, ranks, desc)));
}

template <class Done>
void LoopbackTransport::progress_until(Done done, const Deadline& dl) {
  check_usable();
  while (true) {
    const std::uint64_t seen = step();
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
