#include "transport/tcp/tcp_transport.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/log.hpp"
#include "mci/errors.hpp"

namespace mci::transport {

namespace {

// Unexpected frames are buffered in steps, so a forged length cannot make
// us allocate more than the sender actually sent.
constexpr std::size_t kStashStep = 1u << 20;

bool same_slot(const Fingerprint& want, const FrameHeader& h) {
  if (is_p2p(want.kind)) return is_p2p(h.fp.kind) && h.fp.seq == want.seq;
  return !is_p2p(h.fp.kind) && h.fp.seq == want.seq;
}

std::string mismatch_text(int me, int peer, const Fingerprint& mine, const FrameHeader& theirs, std::size_t my_bytes) {
  if (is_p2p(mine.kind)) {
    return fmt::format(
        "point-to-point mismatch between rank {} and rank {}: rank {} posted {} ({} bytes) but "
        "rank {} sent {} ({} bytes). A recv must use the count and dtype of the matching send.",
        me, peer, me, mine.describe_receive(), my_bytes, peer, theirs.fp.describe(), theirs.payload);
  }
  return collective_mismatch_text(me, peer, mine, theirs.fp);
}

// "recv tag 7 (f32 x 8) from any source": a p2p fingerprint says send.
std::string any_source_text(const Fingerprint& fp) {
  Fingerprint recv = fp;
  recv.kind = OpKind::recv;
  return recv.describe() + " from any source";
}

}  // namespace

TcpTransport::TcpTransport(int rank, int size, std::vector<Fd> peers, TcpWait wait)
    : rank_(rank),
      size_(size),
      peers_(static_cast<std::size_t>(size)),
      spin_ns_(wait.spin.count()),
      yield_ns_(wait.yield.count()),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  for (int i = 0; i < size; ++i) {
    if (peers[i].valid()) attach(i, std::move(peers[i]));
  }
}

TcpTransport::TcpTransport(int rank, int size, std::vector<std::pair<int, Fd>> peers, std::unique_ptr<PeerLinks> links,
                           TcpWait wait)
    : rank_(rank),
      size_(size),
      peers_(static_cast<std::size_t>(size)),
      links_(std::move(links)),
      spin_ns_(wait.spin.count()),
      yield_ns_(wait.yield.count()),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  for (auto& [p, fd] : peers) attach(p, std::move(fd));
}

void TcpTransport::attach(int p, Fd fd) {
  auto& slot = peers_[static_cast<std::size_t>(p)];
  if (!slot) {
    slot = std::make_unique<Peer>();
    active_.push_back(p);
  }
  slot->fd = std::move(fd);
  set_nonblocking(slot->fd.get());
  set_nodelay(slot->fd.get());
}

TcpTransport::Peer& TcpTransport::open(int p) {
  if (p < 0 || p >= size_ || p == rank_) {
    throw Error(fmt::format("mci tcp transport: rank {} cannot talk to rank {} (group of {})", rank_, p, size_));
  }
  if (!links_) {
    broken_ = true;
    throw PeerError(fmt::format("rank {} has no connection to rank {} and cannot make one (the group is closed)", rank_,
                                p),
                    p);
  }
  auto& slot = peers_[static_cast<std::size_t>(p)];
  slot = std::make_unique<Peer>();
  active_.push_back(p);
  try {
    links_->dial(p);
  } catch (...) {
    broken_ = true;
    throw;
  }
  return *slot;
}

// New links join as they come; a failed dial breaks the transport like any
// lost peer.
void TcpTransport::advance_links() {
  try {
    links_->advance([this](int p, Fd fd) {
      attach(p, std::move(fd));
      if (!peers_[static_cast<std::size_t>(p)]->sends.empty()) progress_send(p);
    });
  } catch (...) {
    broken_ = true;
    throw;
  }
}

TcpTransport::~TcpTransport() { close(); }

void TcpTransport::check_usable() const {
  if (broken_) throw Error(kTransportBroken);
}

void TcpTransport::interrupt(const std::string& reason) noexcept {
  {
    std::lock_guard lk(interrupt_mu_);
    if (interrupted_.load()) return;
    interrupt_reason_ = reason;
  }
  interrupted_.store(true, std::memory_order_release);
  const std::uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

void TcpTransport::throw_if_interrupted() {
  if (!interrupted_.load(std::memory_order_acquire)) return;
  broken_ = true;
  std::lock_guard lk(interrupt_mu_);
  throw Error(interrupt_reason_);
}

OpHandle TcpTransport::post_send(int peer, const Fingerprint& fp, const void* data, std::size_t bytes) {
  check_usable();
  Peer& p = this->peer(peer);
  SendOp op;
  op.fp = fp;
  op.data = static_cast<const std::uint8_t*>(data);
  op.bytes = bytes;
  FrameHeader h;
  h.type = FrameType::data;
  h.fp = fp;
  h.payload = bytes;
  h.latest_ns = latest_.ns;
  h.latest_rank = latest_.rank;
  encode(h, op.hdr);
  p.sends.push_back(op);
  const OpHandle handle{peer, false, p.sends_posted++};
  if (p.sends.size() == 1 && p.fd.valid()) progress_send(peer);  // small messages leave at once
  return handle;
}

OpHandle TcpTransport::post_recv(int peer, const Fingerprint& fp, void* data, std::size_t bytes) {
  check_usable();
  Peer& p = this->peer(peer);
  p.recvs.push_back(RecvOp{fp, static_cast<std::uint8_t*>(data), bytes, false, false, recvs_posted_++});
  ++p.recvs_left;
  const OpHandle handle{peer, true, p.recv_base + p.recvs.size() - 1};
  match_stash(peer, p.recvs.back());
  return handle;
}

OpHandle TcpTransport::post_recv_any(const Fingerprint& fp, void* data, std::size_t bytes) {
  check_usable();
  if (!is_p2p(fp.kind)) {
    throw Error(
        fmt::format("mci tcp transport: {} cannot take its frames from any source (only a point-to-point "
                    "receive can)",
                    fp.describe()));
  }
  any_.push_back(AnyRecv{RecvOp{fp, static_cast<std::uint8_t*>(data), bytes, false, false, recvs_posted_++}, -1});
  ++any_left_;
  const OpHandle handle{kAnyPeer, true, any_base_ + any_.size() - 1};
  match_any_stash();
  if (any_left_ > 0) check_any_sender_left();
  return handle;
}

int TcpTransport::source(const OpHandle& op) const {
  if (!op.is_recv) return -1;
  if (op.peer != kAnyPeer) return op.peer;
  if (op.index < any_base_) return -1;  // reaped
  const AnyRecv& a = any_[op.index - any_base_];
  return a.op.done ? a.source : -1;
}

const TcpTransport::AnyRecv* TcpTransport::first_pending_any() const {
  for (const auto& a : any_) {
    if (!a.op.done) return &a;
  }
  return nullptr;
}

void TcpTransport::match_any_stash() {
  for (auto& a : any_) {
    if (a.op.done || a.op.active) continue;
    // Each peer's oldest matching frame, and of those the one stashed first:
    // the sender that came first, and from one sender its sends in order.
    int from = -1;
    std::deque<Stashed>::iterator best;
    for (const int i : active_) {
      Peer& p = *peers_[static_cast<std::size_t>(i)];
      for (auto it = p.stash.begin(); it != p.stash.end(); ++it) {
        if (!same_slot(a.op.fp, it->h)) continue;
        if (from < 0 || it->order < best->order) {
          from = i;
          best = it;
        }
        break;
      }
    }
    if (from < 0) continue;
    if (!a.op.fp.matches(best->h.fp) || best->h.payload != a.op.bytes) {
      broken_ = true;
      throw MismatchError(mismatch_text(rank_, from, a.op.fp, best->h, a.op.bytes));
    }
    if (a.op.bytes) std::memcpy(a.op.data, best->payload.data(), a.op.bytes);
    a.op.done = true;
    a.source = from;
    --any_left_;
    peers_[static_cast<std::size_t>(from)]->stash.erase(best);
  }
}

void TcpTransport::match_stash(int peer, RecvOp& op) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  for (auto it = p.stash.begin(); it != p.stash.end(); ++it) {
    if (!same_slot(op.fp, it->h)) {
      // A collective frame of another sequence number, while this rank waits
      // for a collective frame from the same peer: the ranks disagree.
      if (!is_p2p(op.fp.kind) && !is_p2p(it->h.fp.kind)) {
        broken_ = true;
        throw MismatchError(mismatch_text(rank_, peer, op.fp, it->h, op.bytes));
      }
      continue;
    }
    if (!op.fp.matches(it->h.fp) || it->h.payload != op.bytes) {
      broken_ = true;
      throw MismatchError(mismatch_text(rank_, peer, op.fp, it->h, op.bytes));
    }
    if (op.bytes) std::memcpy(op.data, it->payload.data(), op.bytes);
    op.done = true;
    --p.recvs_left;
    p.stash.erase(it);
    return;
  }
}

int TcpTransport::rest_of_frame(const SendOp& op, iovec iov[2]) {
  int n = 0;
  if (op.done < kFrameHeaderSize) {
    iov[n++] = {const_cast<std::uint8_t*>(op.hdr.data()) + op.done, kFrameHeaderSize - op.done};
    if (op.bytes) iov[n++] = {const_cast<std::uint8_t*>(op.data), op.bytes};
  } else {
    const std::size_t off = op.done - kFrameHeaderSize;
    iov[n++] = {const_cast<std::uint8_t*>(op.data) + off, op.bytes - off};
  }
  return n;
}

bool TcpTransport::progress_send(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  while (!p.sends.empty()) {
    SendOp& op = p.sends.front();
    iovec iov[2];
    const int n = rest_of_frame(op, iov);
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<std::size_t>(n);
    ssize_t w = ::sendmsg(p.fd.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      // The peer is gone; read what it left (an abort reason) before saying so.
      try {
        progress_recv(peer, true);
      } catch (const PeerError&) {
        throw;
      } catch (...) {
      }
      peer_gone(peer, "reset the connection");
    }
    op.done += static_cast<std::size_t>(w);
    if (op.done == kFrameHeaderSize + op.bytes) {
      p.sends.pop_front();
      ++p.sends_done;
    }
  }
  return true;
}

// Reads frames from a peer. With drain=false it stops once nothing more is
// expected from that peer; with drain=true it reads everything the socket
// holds (used when the peer hung up, to find its bye or abort).
void TcpTransport::progress_recv(int peer, bool drain) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  const bool was_eof = p.eof;
  while (!p.eof && (drain || reading(p))) {
    ssize_t r;
    if (!p.cur) {
      r = ::recv(p.fd.get(), p.hdr.data() + p.hdr_got, kFrameHeaderSize - p.hdr_got, MSG_DONTWAIT);
    } else if (p.target) {
      r = ::recv(p.fd.get(), p.target->data + p.got, p.cur->payload - p.got, MSG_DONTWAIT);
    } else {
      const std::size_t want = std::min<std::size_t>(p.cur->payload - p.got, kStashStep);
      if (p.partial.size() < p.got + want) p.partial.resize(p.got + want);
      r = ::recv(p.fd.get(), p.partial.data() + p.got, want, MSG_DONTWAIT);
    }
    if (r == 0) {
      p.eof = true;
      break;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      p.eof = true;  // ECONNRESET and friends
      break;
    }
    if (!p.cur) {
      p.hdr_got += static_cast<std::size_t>(r);
      if (p.hdr_got == kFrameHeaderSize) on_header(peer);
    } else {
      p.got += static_cast<std::size_t>(r);
      if (p.got == p.cur->payload) on_frame_complete(peer);
    }
  }
  if (p.eof && (p.cur || p.hdr_got > 0 || p.recvs_left > 0)) {
    peer_gone(peer, p.bye ? "left the group" : "closed its connection");
  }
  if (p.eof && !p.bye) peer_gone(peer, "closed its connection");
  if (p.eof && !was_eof && any_left_ > 0) check_any_sender_left();
}

// A rank that left on purpose sends nothing more: once every other rank
// has, a receive from any source can only time out, so it fails now. (Lazy
// mode: a rank never connected may still come.)
void TcpTransport::check_any_sender_left() {
  int last_peer = -1;
  for (int i = 0; i < size_; ++i) {
    if (i == rank_) continue;
    const Peer* p = peers_[static_cast<std::size_t>(i)].get();
    if (!p || !p->eof) return;
    last_peer = i;
  }
  if (last_peer < 0) return;
  broken_ = true;
  throw PeerError(
      fmt::format("every other rank left the group (rank {} among them) while rank {} waited for {} ({} bytes); "
                  "the send it waits for never came",
                  last_peer, rank_, any_source_text(first_pending_any()->op.fp), first_pending_any()->op.bytes),
      last_peer);
}

void TcpTransport::on_header(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  p.hdr_got = 0;
  auto h = decode(std::span<const std::uint8_t, kFrameHeaderSize>(p.hdr));
  if (!h) {
    broken_ = true;
    throw PeerError(fmt::format("rank {} received a malformed frame from rank {}: the connection "
                                "is corrupted or the peer is not an mci process of this job",
                                rank_, peer),
                    peer);
  }
  if (h->type == FrameType::bye) {
    p.bye = true;
    return;
  }
  if (h->latest_rank >= 0 && h->latest_rank < size_ && h->latest_ns > latest_.ns) {
    latest_ = Arrival{h->latest_rank, h->latest_ns};
  }
  p.cur = *h;
  p.got = 0;
  p.target = nullptr;
  p.any_target = nullptr;
  p.partial.clear();
  if (h->type == FrameType::data) {
    // The frame goes to the first receive posted for its slot: this peer's
    // own, or one from any source posted before it.
    RecvOp* own = first_unclaimed(p, *h);
    AnyRecv* any = first_unclaimed_any(*h);
    if (any && own && own->posted < any->op.posted) any = nullptr;
    if (RecvOp* to = any ? &any->op : own) {
      if (!to->fp.matches(h->fp) || h->payload != to->bytes) {
        broken_ = true;
        throw MismatchError(mismatch_text(rank_, peer, to->fp, *h, to->bytes));
      }
      to->active = true;
      p.target = to;
      p.any_target = any;
    }
    if (!p.target && !is_p2p(h->fp.kind)) {
      for (auto& op : p.recvs) {
        if (!op.done && !is_p2p(op.fp.kind)) {
          broken_ = true;
          throw MismatchError(mismatch_text(rank_, peer, op.fp, *h, op.bytes));
        }
      }
    }
  }
  if (h->payload == 0) on_frame_complete(peer);
}

void TcpTransport::on_frame_complete(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  FrameHeader h = *p.cur;
  p.cur.reset();
  if (h.type == FrameType::abort) {
    p.abort_reason.assign(p.partial.begin(), p.partial.begin() + static_cast<std::ptrdiff_t>(h.payload));
    broken_ = true;
    throw PeerError(fmt::format("rank {} aborted the group: {}", peer, p.abort_reason), peer);
  }
  if (p.target) {
    p.target->done = true;
    p.target->active = false;
    p.target = nullptr;
    if (p.any_target) {
      p.any_target->source = peer;
      p.any_target = nullptr;
      --any_left_;
    } else {
      --p.recvs_left;
    }
    return;
  }
  p.partial.resize(h.payload);
  p.stash.push_back(Stashed{h, std::move(p.partial), stash_order_++});
  p.partial = std::vector<std::uint8_t>();
  // A recv posted while this frame was arriving may be waiting for it: the
  // first posted, this peer's own or one from any source.
  RecvOp* own = first_unclaimed(p, h);
  const AnyRecv* any = first_unclaimed_any(h);
  if (any && (!own || any->op.posted < own->posted)) match_any_stash();
  if (own && !own->done) match_stash(peer, *own);
  if (any) match_any_stash();
}

TcpTransport::RecvOp* TcpTransport::first_unclaimed(Peer& p, const FrameHeader& h) {
  for (auto& op : p.recvs) {
    if (!op.done && !op.active && same_slot(op.fp, h)) return &op;
  }
  return nullptr;
}

TcpTransport::AnyRecv* TcpTransport::first_unclaimed_any(const FrameHeader& h) {
  if (any_left_ == 0 || !is_p2p(h.fp.kind)) return nullptr;
  for (auto& a : any_) {
    if (!a.op.done && !a.op.active && same_slot(a.op.fp, h)) return &a;
  }
  return nullptr;
}

void TcpTransport::peer_gone(int peer, const char* how) {
  broken_ = true;
  const Peer& p = *peers_[static_cast<std::size_t>(peer)];
  std::string what;
  for (const auto& op : p.recvs) {
    if (!op.done) {
      what = fmt::format(" while rank {} waited for {} bytes of {} from it", rank_, op.bytes, op.fp.describe_receive());
      break;
    }
  }
  if (what.empty() && any_left_ > 0) {
    const AnyRecv& a = *first_pending_any();
    what = fmt::format(" while rank {} waited for {} bytes of {}", rank_, a.op.bytes, any_source_text(a.op.fp));
  }
  if (what.empty()) {
    for (const auto& op : p.sends) {
      what = fmt::format(" while rank {} sent {} bytes of {} to it", rank_, op.bytes, op.fp.describe());
      break;
    }
  }
  if (p.bye) {
    throw PeerError(fmt::format("rank {} {} (it destroyed its process group or exited normally){}", peer, how, what),
                    peer);
  }
  throw PeerError(fmt::format("rank {} {} unexpectedly{}: the process exited or crashed. Check "
                              "that rank's output for the cause.",
                              peer, how, what),
                  peer);
}

std::string TcpTransport::pending_desc() const {
  std::string out;
  if (const AnyRecv* a = first_pending_any()) {
    out = fmt::format("waiting for {} bytes of tag {} from any rank", a->op.bytes, a->op.fp.seq);
  }
  for (const int i : active_) {
    const Peer& p = *peers_[static_cast<std::size_t>(i)];
    if (!p.fd.valid() && links_ && (p.recvs_left > 0 || !p.sends.empty())) {
      out += fmt::format("{}{}", out.empty() ? "" : "; ", links_->waiting_for(i));
    }
    for (const auto& op : p.recvs) {
      if (op.done) continue;
      out += fmt::format("{}waiting for {} bytes from rank {}", out.empty() ? "" : "; ", op.bytes, i);
      break;
    }
    if (!p.sends.empty()) {
      out += fmt::format("{}sending {} bytes to rank {} (it is not reading)", out.empty() ? "" : "; ",
                         p.sends.front().bytes, i);
    }
  }
  return out;
}

void TcpTransport::timeout(const Deadline& dl) {
  broken_ = true;
  Fingerprint fp;
  bool receiving = false;  // fp is a receive's (a p2p one then says "recv")
  std::string peers;
  for (const int i : active_) {
    const Peer& p = *peers_[static_cast<std::size_t>(i)];
    bool owed = p.recvs_left > 0 || !p.sends.empty();
    if (!owed) continue;
    peers += fmt::format("{}{}", peers.empty() ? "" : ", ", i);
    for (const auto& op : p.recvs) {
      if (!op.done) {
        fp = op.fp;
        receiving = true;
      }
    }
    if (!p.sends.empty()) {
      fp = p.sends.front().fp;
      receiving = false;
    }
  }
  if (peers.empty()) {
    if (const AnyRecv* a = first_pending_any()) {
      throw TimeoutError(fmt::format(
          "Timed out waiting {}ms for {} on rank {}: no rank sent it ({}). The sender never reached its send, sent "
          "with another tag, or is much slower: raise the timeout only if it is a slow step, not a hang.",
          dl.budget().count(), any_source_text(a->op.fp), rank_, pending_desc()));
    }
  }
  throw TimeoutError(
      fmt::format("Timed out waiting {}ms for {} on rank {}: no answer from rank {} ({}). The peer never "
                  "entered this operation, is stuck elsewhere, or is much slower: raise the timeout only if "
                  "it is a slow step, not a hang.",
                  dl.budget().count(), receiving ? fp.describe_receive() : fp.describe(), rank_, peers,
                  pending_desc()));
}

bool TcpTransport::pending() const {
  if (any_left_ > 0) return true;
  for (const int i : active_) {
    const Peer& p = *peers_[static_cast<std::size_t>(i)];
    if (p.recvs_left > 0 || !p.sends.empty()) return true;
  }
  return false;
}

void TcpTransport::step(int poll_ms) {
  if (links_ && links_->busy()) advance_links();
  for (const int i : active_) {
    Peer& p = *peers_[static_cast<std::size_t>(i)];
    if (!p.fd.valid()) continue;  // still connecting
    if (!p.sends.empty()) progress_send(i);
    if (reading(p)) progress_recv(i, false);
  }
  if (poll_ms <= 0 || !pending()) return;
  std::vector<pollfd>& fds = poll_fds_;
  std::vector<int>& who = poll_who_;
  fds.clear();
  who.clear();
  for (const int i : active_) {
    Peer& p = *peers_[static_cast<std::size_t>(i)];
    if (p.eof || !p.fd.valid()) continue;
    short ev = POLLRDHUP;
    if (reading(p)) ev |= POLLIN;
    if (!p.sends.empty()) ev |= POLLOUT;
    fds.push_back({p.fd.get(), ev, 0});
    who.push_back(i);
  }
  const std::size_t data_fds = fds.size();
  // interrupt() from another thread ends the sleep.
  if (wake_.valid()) fds.push_back({wake_.get(), POLLIN, 0});
  // While it waits, a rank answers the peers that connect to it.
  if (links_) {
    links_->add_poll_fds(fds);
    if (const int cap = links_->max_sleep_ms(); cap >= 0) poll_ms = std::min(poll_ms, cap);
  }
  int n = ::poll(fds.data(), fds.size(), poll_ms);
  if (n < 0 && errno != EINTR) {
    broken_ = true;
    throw Error(fmt::format("mci tcp transport: poll failed: {}", std::strerror(errno)));
  }
  if (links_) advance_links();
  for (std::size_t k = 0; k < data_fds; ++k) {
    const short re = fds[k].revents;
    Peer& p = *peers_[static_cast<std::size_t>(who[k])];
    // A hang-up from a peer we owe nothing to: learn whether it left on
    // purpose (bye) or died; a death fails the operation at once.
    if ((re & (POLLRDHUP | POLLHUP | POLLERR)) && !reading(p)) {
      progress_recv(who[k], true);
    }
  }
}

template <class Done>
bool TcpTransport::spin(Done done, const Deadline& dl) {
  const std::int64_t ns = spin_ns_ > 0 ? spin_ns_ : yield_ns_;
  if (ns <= 0) return false;
  // Without spin (ranks outnumber cores) every check yields the core. With
  // spin, checks never yield: a TCP sender does not need this core to
  // deliver, and yielding here let a background process's timeslice in
  // (64 KiB broadcast over TCP, 2 ranks, a niced build running: 2.5-3.5 GB/s
  // yielding against 4.2-6.8 without).
  const bool yielding = spin_ns_ <= 0;
  const auto until = std::min(dl.at(), std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns));
  do {
    if (yielding) sched_yield();
    step(0);
    if (done()) return true;
    if (interrupted_.load(std::memory_order_relaxed)) return false;
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

template <class Done>
void TcpTransport::progress_until(Done done, const Deadline& dl) {
  check_usable();
  while (true) {
    throw_if_interrupted();
    step(0);
    if (done()) return;
    if (spin(done, dl)) return;
    throw_if_interrupted();
    if (dl.expired()) timeout(dl);
    step(dl.poll_ms());
    if (done()) return;
  }
}

bool TcpTransport::done(const OpHandle& op) const {
  if (op.peer == kAnyPeer) return op.index < any_base_ || any_[op.index - any_base_].op.done;
  const Peer& p = *peers_[static_cast<std::size_t>(op.peer)];
  if (op.is_recv) return op.index < p.recv_base || p.recvs[op.index - p.recv_base].done;
  return op.index < p.sends_done;
}

void TcpTransport::progress(std::chrono::milliseconds max_wait, const Deadline& dl) {
  check_usable();
  throw_if_interrupted();
  step(0);
  if (!pending()) return;
  if (dl.expired()) timeout(dl);
  step(std::max(0, std::min(dl.poll_ms(), static_cast<int>(max_wait.count()))));
  throw_if_interrupted();
}

void TcpTransport::reap() {
  for (const int i : active_) {
    Peer& p = *peers_[static_cast<std::size_t>(i)];
    while (!p.recvs.empty() && p.recvs.front().done && !p.recvs.front().active) {
      p.recvs.pop_front();
      ++p.recv_base;
    }
  }
  while (!any_.empty() && any_.front().op.done && !any_.front().op.active) {
    any_.pop_front();
    ++any_base_;
  }
}

void TcpTransport::wait(const OpHandle& op, const Deadline& dl) {
  progress_until([&] { return done(op); }, dl);
}

void TcpTransport::wait_all(const Deadline& dl) {
  progress_until([&] { return !pending(); }, dl);
  for (const int i : active_) {
    Peer& p = *peers_[static_cast<std::size_t>(i)];
    p.recv_base += p.recvs.size();
    p.recvs.clear();
  }
  any_base_ += any_.size();
  any_.clear();
}

namespace {

// Writes iov fully to a non-blocking socket, waiting for room until `until`.
// False if the socket failed or stayed full.
bool write_until(int fd, iovec* iov, int n, Clock::time_point until) noexcept {
  while (n > 0) {
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<std::size_t>(n);
    const ssize_t w = ::sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return false;
      pollfd pfd{fd, POLLOUT, 0};
      if (::poll(&pfd, 1, static_cast<int>(left)) <= 0) return false;
      continue;
    }
    auto done = static_cast<std::size_t>(w);
    while (n > 0 && done >= iov->iov_len) {
      done -= iov->iov_len;
      ++iov;
      --n;
    }
    if (n > 0) {
      iov->iov_base = static_cast<std::uint8_t*>(iov->iov_base) + done;
      iov->iov_len -= done;
    }
  }
  return true;
}

}  // namespace

void TcpTransport::abort(const std::string& reason) noexcept {
  broken_ = true;
  FrameHeader h;
  h.type = FrameType::abort;
  const std::string text = reason.substr(0, kMaxAbortReason);
  h.payload = text.size();
  std::array<std::uint8_t, kFrameHeaderSize> hdr{};
  encode(h, hdr);
  // Telling the peers why costs at most this long in all: a frame half sent
  // must be finished before the abort frame can follow it (the peer is
  // reading it, so the rest usually fits its socket buffer at once).
  const auto until = Clock::now() + kAbortFlush;
  // Peers not connected yet learn it when their dial is refused.
  if (links_) links_->close();
  for (const int i : active_) {
    Peer& p = *peers_[static_cast<std::size_t>(i)];
    if (!p.fd.valid() || p.eof) continue;
    bool clean = p.sends.empty() || p.sends.front().done == 0;
    if (!clean) {
      iovec rest[2];
      const int n = rest_of_frame(p.sends.front(), rest);
      clean = write_until(p.fd.get(), rest, n, until);
    }
    // Otherwise the peer sees the connection close, without the reason.
    if (clean) {
      iovec iov[2] = {{hdr.data(), hdr.size()}, {const_cast<char*>(text.data()), text.size()}};
      write_until(p.fd.get(), iov, 2, until);
    }
    ::shutdown(p.fd.get(), SHUT_RDWR);
    p.fd.reset();
  }
}

void TcpTransport::close() noexcept {
  FrameHeader h;
  h.type = FrameType::bye;
  std::array<std::uint8_t, kFrameHeaderSize> hdr{};
  encode(h, hdr);
  if (links_) links_->close();
  for (const int i : active_) {
    Peer& p = *peers_[static_cast<std::size_t>(i)];
    if (!p.fd.valid()) continue;
    if (!broken_ && (p.sends.empty() || p.sends.front().done == 0)) {
      ssize_t w = ::send(p.fd.get(), hdr.data(), hdr.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)w;
    }
    ::shutdown(p.fd.get(), SHUT_WR);
    // Unread bytes at close() would turn our FIN into a reset; discard them.
    std::uint8_t sink[4096];
    while (::recv(p.fd.get(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
    p.fd.reset();
  }
}

}  // namespace mci::transport
