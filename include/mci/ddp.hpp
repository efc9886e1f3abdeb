// DistributedDataParallel for C++ training loops: every rank holds a full
// replica of the model; gradients are averaged across ranks with async
// all-reduces that overlap the rest of backward.
//
//   mci::DistributedDataParallel ddp(pg, {{"weight", mci::view(w), mci::view(dw)}});
//   ... forward, backward; after each parameter's gradient is written:
//   ddp.grad_ready(i);          // optional: starts its bucket's all-reduce early
//   ddp.finish_gradient_sync(); // before the optimizer step: grads are averaged
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mci/process_group.hpp"
#include "mci/types.hpp"

namespace mci {

struct Parameter {
  std::string name;
  BufferView value;  // the weights; broadcast from rank 0 at construction
  BufferView grad;   // same count and dtype as value
};

// Communication hooks (PyTorch's ddp_comm_hooks): how one bucket of
// gradients is averaged across ranks. A hook starts the communication of
// `bucket` (a flat buffer of gradients, the same on every rank in count and
// dtype) and returns what completes it: a function that waits and leaves the
// average in `bucket`. The returned function runs before the gradients are
// written back; it may throw what Work::wait() throws.
using BucketCompletion = std::function<void()>;
using CommHook = std::function<BucketCompletion(ProcessGroup& pg, BufferView bucket)>;
// The default: one async averaging all-reduce (ReduceOp::avg) per bucket.
CommHook allreduce_hook();
// f32 buckets travel as bf16 (half the bytes) and come back as f32; other
// dtypes and device buckets use the default.
CommHook bf16_compress_hook();

struct DdpOptions {
  // Gradients are packed into buckets of about this size; each bucket is one
  // all-reduce. Smaller buckets start earlier, larger ones cost fewer calls.
  std::size_t bucket_cap_bytes = 25u << 20;
  // Broadcast the parameters from rank 0 at construction, so every replica
  // starts from the same weights.
  bool broadcast_parameters = true;
  // How each bucket is averaged; empty: allreduce_hook().
  CommHook comm_hook;
};

class DistributedDataParallel {
 public:
  // Collective: every rank must construct it with the same parameter shapes
  // (checked; a difference is a MismatchError naming the parameter).
  DistributedDataParallel(std::shared_ptr<ProcessGroup> pg, std::vector<Parameter> params, DdpOptions opts = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // The gradient of parameter i is final for this step (the autograd hook).
  // When its bucket is complete, the bucket's all-reduce starts (buckets
  // start in a fixed order, the same on every rank).
  void grad_ready(std::size_t i);
  // Starts what has not started (gradients never marked ready are taken as
  // they are), waits for every bucket and writes the averaged gradients
  // back. After it returns, every rank holds the same gradients.
  void finish_gradient_sync();

  // Going on without a lost rank (docs/fault-tolerance.md, "In place"):
  // after a PeerError anywhere in a step, every surviving rank calls
  // recover(). The group shrinks (ProcessGroup::shrink), this DDP moves to
  // the survivors' group, and every replica is made the same: the survivor
  // that completed the most steps broadcasts its parameters and `state`
  // (the optimizer's buffers, the same shapes on every rank) to the others.
  // A step that some rank finished counts (its average had every rank's
  // gradient); a step nobody finished is redone: its partial sums are
  // dropped (host gradients are zeroed), never reaching the parameters.
  // `steps_done`: the optimizer steps this rank completed.
  struct Recovery {
    std::uint64_t steps_done = 0;  // where the group resumes: redo step steps_done + 1
    std::vector<int> lost;         // ranks of the old group left out
    int source = 0;                // the new group rank whose values everyone took
  };
  Recovery recover(std::uint64_t steps_done, const std::vector<BufferView>& state = {});

  // Replacing lost ranks: at a step boundary, when
  // process_group().joiners_waiting(), every member calls grow(); the
  // processes waiting in join_running_group() build their DDP on the group
  // it returned (DdpOptions::broadcast_parameters = false) and call
  // sync_replicas(0, state). Both sides then hold the replica of the member
  // that completed the most steps. Returns the steps the group resumes
  // after, and how many processes joined.
  struct Growth {
    std::uint64_t steps_done = 0;
    int joined = 0;
  };
  Growth grow(std::uint64_t steps_done, const std::vector<BufferView>& state = {});
  // Collective: every replica takes the parameters and `state` of the rank
  // that completed the most steps (the lowest such rank); gradients are
  // zeroed. Returns that number of steps. recover() and grow() end with it.
  std::uint64_t sync_replicas(std::uint64_t steps_done, const std::vector<BufferView>& state = {});

  std::size_t num_buckets() const;
  const std::vector<Parameter>& parameters() const;
  ProcessGroup& process_group() const;
  std::shared_ptr<ProcessGroup> group() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mci
