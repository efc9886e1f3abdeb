// BackendMCI's half of torch 2.15's reconfigure contract (reconfigure.hpp
// has the handles and the meeting).
#include <algorithm>
#include <cstdlib>
#include <random>

#include "backend.hpp"
#include "mci/errors.hpp"
#include "mci/init.hpp"
#include "reconfigure.hpp"
#include "tensor_views.hpp"

#if MCI_TORCH_HAS_RECONFIGURE
namespace mci_torch {
namespace {

std::string fresh_hex(std::size_t bytes) {
  std::random_device rd;
  std::string s;
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < bytes; ++i) {
    const auto b = rd() & 0xff;
    s += kHex[b >> 4];
    s += kHex[b & 0xf];
  }
  return s;
}

}  // namespace

c10d::ReconfigureHandle BackendMCI::get_reconfigure_handle() const {
  std::lock_guard lock(handle_mu_);
  if (own_handle_.empty()) {
    // A small store of this process's own: the group a reconfigure forms
    // meets on the store of its first member, whoever that is. With
    // MCI_JOB_TOKEN set the handle carries no secret (every member has the
    // job's); otherwise a fresh token, which the handle then carries: pass
    // handles only to the job's own processes.
    const char* job = std::getenv("MCI_JOB_TOKEN");
    reconf::Handle h;
    h.token = job && *job ? std::string() : fresh_hex(16);
    mci::StoreServerOptions o;
    o.host = "0.0.0.0";
    o.token = h.token.empty() ? std::string(job) : h.token;
    own_server_ = std::make_shared<mci::StoreServer>(o);
    h.host = config_.advertise;
    h.port = own_server_->port();
    h.nonce = fresh_hex(8);
    own_handle_ = reconf::format_handle(h);
  }
  return own_handle_;
}

c10::intrusive_ptr<c10d::Work> BackendMCI::reconfigure(const c10d::ReconfigureOptions& opts) {
  const std::string uuid = std::to_string(opts.uuid);
  if (!used_uuids_.insert(opts.uuid).second) {
    fail_config("reconfigure: uuid " + uuid +
                " was already used on this group: pass a fresh uuid on every reconfigure (torch's contract)");
  }
  const std::vector<std::string> handles = reconf::ordered(opts.handles);
  if (handles.empty()) fail_config("reconfigure (uuid " + uuid + "): no handles: pass every member's handle");
  const std::string mine = get_reconfigure_handle();
  const auto me = std::find(handles.begin(), handles.end(), mine);
  if (me == handles.end()) {
    fail_config("reconfigure (uuid " + uuid + "): this process's handle is not among the " +
                std::to_string(handles.size()) +
                " handles given; every member passes the handles of all members, its own included (a member left out "
                "does not call reconfigure, or reconfigures with its own handle alone)");
  }
  for (std::size_t i = 0; i < handles.size(); ++i) {
    reconf::parse_handle(handles[i], "handle " + std::to_string(i));
    if (std::count(handles.begin(), handles.end(), handles[i]) > 1) {
      fail_config("reconfigure (uuid " + uuid + "): handle " + std::to_string(i) +
                  " is given twice; each member's handle once");
    }
  }
  const auto timeout = opts.timeout.value_or(config_.timeout);
  if (timeout.count() <= 0) {
    fail_config("reconfigure (uuid " + uuid + "): timeout " + std::to_string(timeout.count()) +
                " ms: give a positive timeout (or none, for the group's)");
  }
  const int rank = static_cast<int>(me - handles.begin());
  const int size = static_cast<int>(handles.size());

  // The new group first: if it cannot be formed, this one stays as it was.
  mci::InitOptions o;
  o.backend = config_.engine;
  o.rank = rank;
  o.world_size = size;
  o.timeout = timeout;
  // Not this group's own name: a member made with enable_reconfigure has
  // none of the others'.
  o.group_name = reconf::group_name(opts.uuid);
  o.settings = config_.settings;
  o.store = reconf::meet(handles, rank, opts.uuid, timeout);
  std::shared_ptr<mci::ProcessGroup> formed = mci::init_process_group(o);

  // Then the old one goes: aborted (a member still inside one of its
  // operations fails at once, and comes here too), its queued operations
  // failed, not waited on.
  join_abort();
  if (pg_ && !aborted_) pg_->abort("reconfigured into a new group (uuid " + uuid + ")");
  completer_.reset();
  unseen_ = std::make_shared<UnseenFailures>();
  agreed_.reset();
  pg_ = std::move(formed);
  aborted_ = false;
  rank_ = rank;
  size_ = size;
  config_.rank = rank;
  config_.size = size;
  config_.timeout = timeout;
  config_.global_ranks.clear();  // the handles' order is the new numbering
  auto w = c10::make_intrusive<WorkMCI>(rank, c10d::OpType::UNKNOWN, "reconfigure", std::vector<at::Tensor>{}, nullptr,
                                        std::vector<at::Tensor>{});
  w->complete(mci::Work(), unseen_);
  return w;
}

}  // namespace mci_torch

#endif  // MCI_TORCH_HAS_RECONFIGURE
