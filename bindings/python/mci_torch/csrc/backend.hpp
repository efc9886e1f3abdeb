// BackendMCI: torch.distributed's backend "mci" as a c10d::Backend over
// mci's public C++ API. Every operation checks its tensors (the texts of
// the pure-Python backend), hands mci views of their memory (no copy for
// contiguous CPU tensors) and returns a WorkMCI. An op whose options say
// asyncOp=false (torch's functions with async_op=False) runs on the
// caller's thread and raises at once; the others are queued on mci's
// progress thread and completed by the group's Completer.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "mci/process_group.hpp"
#include "mci/store.hpp"
#include "work_mci.hpp"

// torch 2.15 brought the reconfigure contract (c10d::ReconfigureOptions);
// the extension builds against earlier 2.x without it.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 15)
#define MCI_TORCH_HAS_RECONFIGURE 1
#else
#define MCI_TORCH_HAS_RECONFIGURE 0
#endif
// Backend::setTimeout (torch.distributed.set_timeout): overridden from the
// torch the extension is tested against (2.15) on.
#define MCI_TORCH_HAS_SET_TIMEOUT MCI_TORCH_HAS_RECONFIGURE

namespace mci_torch {

struct BackendConfig {
  // mci's store for this group (group rank 0 hosts it: server).
  std::string host;
  int port = 0;
  std::string token;
  std::shared_ptr<mci::StoreServer> server;
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  std::string engine = "cpu";  // mci's backend under this one
  std::string group_name = "torch";
  // torch's global_ranks_in_group: the job rank of each group rank, for
  // flight-recorder dumps; empty: 0 .. size-1 (the default group).
  std::vector<int> global_ranks;
  std::map<std::string, std::string> settings;
  // torch's enable_reconfigure: no group until reconfigure() forms one.
  bool enable_reconfigure = false;
  // This host's address as the other ranks reach it (for the handle).
  std::string advertise = "127.0.0.1";
  // torch's store for this group, for monitoredBarrier.
  c10::intrusive_ptr<c10d::Store> torch_store;
  // Makes the backend of a group of `size` ranks, this process its `rank`,
  // meeting through `store` (torch's split_group): mci_torch._ext's
  // create_backend, the one rendezvous of every group.
  std::function<c10::intrusive_ptr<c10d::Backend>(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  std::chrono::milliseconds timeout)>
      make_group;
  // Called with each backend shrink() makes, so the module can close it at
  // exit like the ones it made itself.
  std::function<void(const c10::intrusive_ptr<c10d::Backend>&)> track;
};

class BackendMCI final : public c10d::Backend {
 public:
  explicit BackendMCI(BackendConfig config);
  // Over a group already formed (shrink's survivors' group).
  BackendMCI(BackendConfig config, std::shared_ptr<mci::ProcessGroup> pg);
  ~BackendMCI() override;

  const std::string getBackendName() const override { return "mci"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  // torch.distributed.split_group: the ranks listed (parent group ranks, in
  // the new group's order) form a new mci group through the store torch
  // gives (scoped to the new group); the others get none.
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  // torch.distributed.shrink_group: the ranks left (not excluded) agree
  // through mci's store and go on in a group of their own
  // (mci::ProcessGroup::shrink; the ranks torch excludes are every
  // survivor's exclusions). Only the ranks that stay call it.
  // Whether the engine under it can (its row of mci's backend table).
  bool supportsShrinking() const override;
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
                                           const c10::intrusive_ptr<Options>& opts_override) override;
  // mci_torch.shrink_group: the survivors agree on who is lost (the ranks
  // whose process ended, as mci's store saw it) and form their group now;
  // returns the lost ranks, which torch's shrink_group is then given: its
  // shrink() hands over that group instead of agreeing again.
  std::vector<int64_t> agree_lost();
  // torch 2.15's reconfigure contract (reconfigure.hpp): a handle per
  // process; reconfigure() forms the group its handles name (rank and size
  // change), from any state: a group made with enable_reconfigure=True,
  // a working group (shrink, grow, split, merge), or after abort(). A uuid
  // is taken once.
#if MCI_TORCH_HAS_RECONFIGURE
  bool supportsReconfigure() const override { return true; }
  c10d::ReconfigureHandle get_reconfigure_handle() const override;
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
#endif
  // Completes the queued operations, then closes the group. Later calls
  // raise ConfigError.
  void shutdown() override;
  // Returns at once, from any thread: mci's abort (operations queued or
  // running fail with its reason, peers notice at once) runs on a thread
  // of its own. Later calls raise ConfigError, until reconfigure().
  void abort() override;
#if MCI_TORCH_HAS_SET_TIMEOUT
  // torch.distributed.set_timeout: the operations issued after take it,
  // and so do the groups this one splits or reconfigures into.
  void setTimeout(std::chrono::milliseconds timeout) override;
#endif
  // At the interpreter's exit (mci_torch._ext registers it with atexit):
  // operations still running are aborted, since nobody will wait on them
  // (a recv whose send never comes would hold the exit for the group's
  // timeout), then the group is closed while Python still runs.
  void close_at_exit();

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  // Several all_gather_into_tensor in one: the inputs packed into one
  // buffer, one all_gather, the rows unpacked. torch 2.15's functional
  // collectives (all_gather_tensor, DTensor) come here even for one tensor;
  // it names this all_gather_single_coalesced and forwards that to this
  // older name, which torch before the rename calls directly.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts = {}) override;
  // all_gather_coalesced: several tensors of any shapes (and dtypes) in one
  // all_gather; outputs[r][k] takes rank r's input k.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  // Several reduce_scatter_tensor in one (one dtype): the functional
  // reduce_scatter_tensor's path, as the all-gather's above
  // (reduce_scatter_single_coalesced forwards here).
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  // The collectives this group has run (mci numbers them alike on every
  // rank; torch compares them to find ranks that called different ones).
  uint64_t getSequenceNumberForGroup() override { return group().last_seq(); }
  // mci_torch.dump_flight_recorder: every mci group of this process in
  // torch's flight-recorder format, to <prefix><global rank>; the path.
  std::string dump_flight_recorder(const std::string& prefix);

 private:
  // What one operation hands the submit path.
  struct Call {
    c10d::OpType type;
    const char* what;
    bool async = true;
    std::function<mci::Work(mci::Exec)> run;  // starts it on mci
    std::vector<at::Tensor> outputs;          // the Work's result()
    std::function<void()> finish;             // after success: copies back
    std::vector<at::Tensor> keep;             // alive until done
  };
  c10::intrusive_ptr<c10d::Work> submit(Call call);
  mci::ProcessGroup& group() const;
  // torch names a group (setGroupUid, setGroupDesc) after making its
  // backend: mci's group takes torch's names and global ranks for its
  // dumps before its first operation (nothing can time out sooner), and
  // again after reconfigure() replaced it.
  void name_for_dumps();
  std::vector<int> global_ranks() const;  // config_.global_ranks, or 0 .. size-1
  std::atomic<const mci::ProcessGroup*> named_{nullptr};
  // Waits for an abort() still running (reconfigure, shutdown).
  void join_abort();
  void check_root(int64_t root, const char* what) const;
  void one_per_rank(const at::Tensor& ref, const std::vector<at::Tensor>& tensors, const std::string& what,
                    const std::string& side) const;
  void check_whole(const std::string& op, const std::string& whole_name, const at::Tensor& whole,
                   const at::Tensor& share) const;
  // all_reduce of one sparse COO tensor (SUM), as gloo does it: every
  // rank's indices and values gathered, then summed by coalescing.
  c10::intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor& t, const c10d::AllreduceOptions& opts);
  c10::intrusive_ptr<c10d::Work> reduce_scatter_flat(at::Tensor out, at::Tensor flat, const c10d::ReduceOp& op,
                                                     bool async, std::vector<at::Tensor> result);
  c10::intrusive_ptr<c10d::Work> uneven_all_to_all(std::vector<at::Tensor> pieces, at::Tensor output,
                                                   std::vector<int64_t> out_counts, bool async,
                                                   std::function<void()> after, std::vector<at::Tensor> result);

  BackendConfig config_;
  std::shared_ptr<mci::ProcessGroup> pg_;
  std::shared_ptr<UnseenFailures> unseen_ = std::make_shared<UnseenFailures>();
  std::unique_ptr<Completer> completer_;             // made at the first async call
  std::optional<mci::ProcessGroup::Shrunk> agreed_;  // agree_lost()'s group, until shrink() takes it
  int monitored_rounds_ = 0;
  // Reconfigure: this process's handle and the store behind it (made at
  // the first get_reconfigure_handle), the uuids taken, abort()'s thread.
  mutable std::mutex handle_mu_;
  mutable std::shared_ptr<mci::StoreServer> own_server_;
  mutable std::string own_handle_;
  std::set<int64_t> used_uuids_;
  std::mutex abort_mu_;
  std::thread abort_thread_;
  std::atomic<bool> aborted_{false};  // read by group() on any thread
};

}  // namespace mci_torch
