// MCI_REPRODUCIBLE's all-reduce across hosts (host_chain): the rank-ordered
// fold ((x0 + x1) + x2) + ... that every reproducible algorithm computes,
// host after host, when each host holds a run of consecutive ranks (the
// usual placement). Host 0 folds its ranks in shared memory; the next
// host's leader (its lowest rank) adds its own value to that partial sum,
// and its host folds its other ranks onto the result, in rank order: the
// same operations in the same order as the flat fold (`ordered`), so the
// same bits. The last host's leader ends with the result, which goes back
// along the chain, each host broadcasting it in shared memory.
//
// Why: `ordered` sends every rank's block to its owner, so a host's link
// carries its ranks' data, twice the bytes of the default's hierarchical
// exchange, which sums each host first and sends one host's worth. A
// partial sum is a prefix of the fold only if it starts at rank 0, hence
// the chain: each link carries the buffer once each way, as the default's
// two-host exchange does. Large buffers go in pieces of 512 KiB, so that
// while one host folds piece k the next works on piece k-1: half the
// default's pieces, since the chain's pipeline is two hops deep (measured
// on 2 hosts x 2 ranks, 2 to 128 MiB: 1 MiB pieces ran at 0.6-0.9x the
// default mode's busbw, 512 KiB at 0.98-1.2x, 256 KiB at 0.85-1.0x;
// pieces of an eighth of the buffer, 64 to 512 KiB, did worse below 8 MiB).
//
// 16-bit floats are folded in f32 and rounded once (fold_ranks): a prefix
// sent as half or bfloat16 would be rounded in between, so they take the
// flat `ordered` algorithm; so does a placement whose hosts do not hold
// consecutive ranks.
#include <cstring>
#include <vector>

#include "collectives/hierarchical/steps.hpp"
#include "collectives/kernels/reduce.hpp"

namespace mci::coll {

namespace {

constexpr std::size_t kChainPieceBytes = 512 << 10;

// Whether host 0 holds ranks 0..a-1, host 1 the next ones, and so on.
bool consecutive(const HostMap& hosts) {
  int next = 0;
  for (int h = 0; h < hosts.hosts(); ++h) {
    for (int r : hosts.members(h)) {
      if (r != next++) return false;
    }
  }
  return true;
}

class Chain {
 public:
  Chain(const HierCtx& c, ReduceOp op)
      : c_(c),
        op_(op),
        es_(dtype_size(c.d.dtype)),
        pieces_{c.d.count, kChainPieceBytes / es_},
        me_(c.t.rank()),
        h_(c.hosts.host_of(me_)),
        last_(c.hosts.hosts() - 1),
        leader_(me_ == c.hosts.leaders()[static_cast<std::size_t>(h_)]),
        fp_(c.d.fingerprint()) {
    if (leader_) {
      // Where the partial sum from the host before and the result from the
      // host after arrive.
      prefix_ = c.packed.get(2 * c.d.bytes());
      result_ = prefix_ + c.d.bytes();
    }
  }

  void run() {
    const std::size_t n = pieces_.count();
    for (std::size_t k = 0; k < n; ++k) {
      forward(k);
      if (k > 0) back(k - 1);
    }
    back(n - 1);
    if (leader_) c_.t.wait_all(c_.dl);
  }

 private:
  std::uint8_t* out(std::size_t k) const { return at(c_.d.out, pieces_.begin(k), es_); }
  std::size_t bytes(std::size_t k) const { return pieces_.size(k) * es_; }
  int leader_of(int h) const { return c_.hosts.leaders()[static_cast<std::size_t>(h)]; }

  // Piece k's fold through this host: onto the partial sum of the hosts
  // before (host 0: from nothing), then on to the next host.
  void forward(std::size_t k) {
    const void* mine = at(c_.d.in, pieces_.begin(k), es_);
    if (leader_ && h_ > 0) {
      const std::size_t off = pieces_.begin(k) * es_;
      c_.t.wait(c_.t.post_recv(leader_of(h_ - 1), fp_, prefix_ + off, bytes(k)), c_.dl);
      // The prefix, then this rank: the fold's next term. The host's fold
      // goes on from it (this rank is its local rank 0).
      reduce_to(out(k), prefix_ + off, mine, pieces_.size(k), c_.d.dtype, op_);
      mine = out(k);
    }
    CollectiveDesc r = hier::phase(c_.d, pieces_.size(k), 0, mine, out(k), Algo::unset);
    r.op = op_;
    hier::host_reduce(c_, r);
    if (leader_ && h_ < last_) sent_.push_back(c_.t.post_send(leader_of(h_ + 1), fp_, out(k), bytes(k)));
  }

  // Piece k's result, from the last host back to the first, and to every
  // rank of each host.
  void back(std::size_t k) {
    if (leader_ && h_ < last_) {
      const std::size_t off = pieces_.begin(k) * es_;
      c_.t.wait(c_.t.post_recv(leader_of(h_ + 1), fp_, result_ + off, bytes(k)), c_.dl);
      // Our partial sum of piece k must have left before the result takes
      // its place (a completed receive says nothing of our send: issue 49).
      c_.t.wait(sent_[k], c_.dl);
      std::memcpy(out(k), result_ + off, bytes(k));
    }
    if (leader_ && h_ > 0) c_.t.post_send(leader_of(h_ - 1), fp_, out(k), bytes(k));
    hier::on_host(c_, hier::phase(c_.d, pieces_.size(k), 0, out(k), out(k), Algo::shm_staged), shm_broadcast);
  }

  const HierCtx& c_;
  const ReduceOp op_;
  const std::size_t es_;
  const Chunks pieces_;
  const int me_, h_, last_;
  const bool leader_;
  const Fingerprint fp_;
  std::uint8_t* prefix_ = nullptr;
  std::uint8_t* result_ = nullptr;
  std::vector<transport::OpHandle> sent_;  // the partial sums sent on, by piece
};

}  // namespace

void hierarchical_all_reduce_chain(const HierCtx& c) {
  const CollectiveDesc& d = c.d;
  if (d.dtype == DType::f16 || d.dtype == DType::bf16 || !consecutive(c.hosts)) {
    all_reduce_ordered(Ctx{c.t, d, c.dl, c.scratch});
    return;
  }
  // avg: the fold's sum, then one division on every rank, as fold_ranks
  // does for these types.
  Chain(c, d.op == ReduceOp::avg ? ReduceOp::sum : d.op).run();
  if (d.op == ReduceOp::avg) finish_avg(d.out, d.count, d.dtype, c.t.size());
}

}  // namespace mci::coll
