#include <cstring>
#include <vector>

#include "collectives/hierarchical/steps.hpp"
#include "collectives/kernels/reduce.hpp"
#include "collectives/select.hpp"

namespace mci::coll {

namespace {

// Large messages between two hosts, in pieces: while the network carries
// piece k, the host reduces piece k+1 and hands out piece k-1, so the link
// (the bottleneck) never waits for shared memory. Two leaders exchange
// their hosts' sums whole (the same bytes each way as a ring of two) and
// add them in either order: x + y == y + x bit for bit, so every rank ends
// with the same bits.
//
// A leader sends piece k from its output and later adds the other host's
// piece k into that same output. The receive being complete says nothing
// of the send: we can hold all of the peer's bytes while part of ours still
// waits for room in the socket. So the piece's send is waited for
// before the piece is overwritten; otherwise the rest of it leaves already
// summed, and the other host counts our sum twice (issue 49: 13 instead of
// 10 in the tail of the first piece, on the first call of a job, while TCP's
// buffers are still small).
using hier::kPieceBytes;

bool pipelined_between_two(const HierCtx& c) { return c.hosts.hosts() == 2 && hier::pipelined(c.d.bytes()); }

void all_reduce_two_hosts_pipelined(const HierCtx& c, ReduceOp op) {
  const CollectiveDesc& d = c.d;
  const std::size_t es = dtype_size(d.dtype);
  const Chunks pieces{d.count, kPieceBytes / es};
  const int me = c.t.rank(), h = c.hosts.host_of(me);
  const bool leader = me == c.hosts.leaders()[h];
  const int other = c.hosts.leaders()[1 - h];
  const Fingerprint fp = d.fingerprint();
  std::uint8_t* theirs = leader ? c.packed.get(d.bytes()) : nullptr;
  std::vector<transport::OpHandle> arriving, leaving;

  auto reduce_piece = [&](std::size_t k) {
    const std::size_t off = pieces.begin(k) * es, len = pieces.size(k) * es;
    CollectiveDesc r =
        hier::phase(d, pieces.size(k), 0, at(d.in, pieces.begin(k), es), at(d.out, pieces.begin(k), es), Algo::unset);
    r.op = op;
    hier::host_reduce(c, r);
    if (leader) {
      leaving.push_back(c.t.post_send(other, fp, at(d.out, pieces.begin(k), es), len));
      arriving.push_back(c.t.post_recv(other, fp, theirs + off, len));
    }
  };
  auto finish_piece = [&](std::size_t k) {
    if (leader) {
      c.t.wait(arriving[k], c.dl);
      c.t.wait(leaving[k], c.dl);  // our piece k has left: now it may change
      reduce_into(at(d.out, pieces.begin(k), es), theirs + pieces.begin(k) * es, pieces.size(k), d.dtype, op);
    }
    std::uint8_t* piece = at(d.out, pieces.begin(k), es);
    hier::on_host(c, hier::phase(d, pieces.size(k), 0, piece, piece, Algo::shm_staged), shm_broadcast);
  };

  for (std::size_t k = 0; k < pieces.count(); ++k) {
    reduce_piece(k);
    if (k > 0) finish_piece(k - 1);
  }
  finish_piece(pieces.count() - 1);
  if (leader) c.t.wait_all(c.dl);
}

// Small messages when every host holds as many ranks: every rank gets its
// host's sum in one shared-memory step, then all-reduces it with the ranks
// of the same local index on the other hosts (as Open MPI's recursive
// doubling does across its shared-memory and TCP pairs). One network round
// trip and no third phase: the leader's broadcast back was a wake-up of
// every other rank. It sends the message once per rank instead of once per
// host, so only while latency, not the link, decides.
constexpr std::size_t kCounterpartMaxBytes = 4096;

bool by_counterparts(const HierCtx& c) {
  if (c.d.bytes() > kCounterpartMaxBytes) return false;
  for (int h = 1; h < c.hosts.hosts(); ++h) {
    if (c.hosts.members(h).size() != c.hosts.members(0).size()) return false;
  }
  return true;
}

void all_reduce_by_counterparts(const HierCtx& c, ReduceOp op) {
  const CollectiveDesc& d = c.d;
  CollectiveDesc a = d;
  a.op = op;
  // Every rank reduces every staged input in the same order: the same bits
  // on every rank of the host.
  a.algo = Algo::shm_direct;
  hier::on_host_or_copy(c, a, shm_all_reduce_direct);
  const int local = c.hosts.local_of(c.t.rank());
  std::vector<int> counterparts;
  for (int h = 0; h < c.hosts.hosts(); ++h) counterparts.push_back(c.hosts.members(h)[static_cast<std::size_t>(local)]);
  a.in = d.out;
  hier::among(c, counterparts, a);
}

}  // namespace

void hierarchical_all_reduce(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  // avg: sums all the way, one division at the end on every rank (the same
  // bits everywhere, since every rank divides the same sum).
  const ReduceOp op = d.op == ReduceOp::avg ? ReduceOp::sum : d.op;
  if (by_counterparts(c)) {
    all_reduce_by_counterparts(c, op);
    if (d.op == ReduceOp::avg) finish_avg(d.out, d.count, d.dtype, c.t.size());
    return;
  }
  if (c.hosts.hosts() > 2 && hier::pipelined(d.bytes())) {
    hier::all_reduce_ring_of_hosts(c, op);
    if (d.op == ReduceOp::avg) finish_avg(d.out, d.count, d.dtype, c.t.size());
    return;
  }
  if (pipelined_between_two(c)) {
    all_reduce_two_hosts_pipelined(c, op);
    if (d.op == ReduceOp::avg) finish_avg(d.out, d.count, d.dtype, c.t.size());
    return;
  }

  // 1. Inside the host: the host's result at its leader (local rank 0).
  CollectiveDesc r = hier::phase(d, d.count, 0, d.in, d.out, Algo::unset);
  r.op = op;
  hier::host_reduce(c, r);

  // 2. Between hosts: the leaders all-reduce their hosts' results in place.
  CollectiveDesc a = d;
  a.in = a.out;
  a.op = op;
  hier::among(c, c.hosts.leaders(), a);

  // 3. Inside the host: the leader's result to every rank.
  hier::on_host(c, hier::phase(d, d.count, 0, d.out, d.out, Algo::shm_staged), shm_broadcast);
  if (d.op == ReduceOp::avg) finish_avg(d.out, d.count, d.dtype, c.t.size());
}

}  // namespace mci::coll
