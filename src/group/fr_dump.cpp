// The group's side of the flight recorder in torch's format
// (diag/dump_registry.hpp): registering the group for its process's dumps,
// the dump asked for, and the one written when an operation times out.
#include <fmt/format.h>

#include "group/group_impl.hpp"
#include "mci/errors.hpp"

namespace mci {

void ProcessGroup::Impl::register_for_dumps(const FrDumpPlace& place, const std::string& name) {
  diag::DumpGroup g;
  g.name = name;
  g.job_ranks = diag::identity_ranks(size);  // until told otherwise (shrink, mci_torch)
  g.rank = rank;
  g.size = size;
  g.backend = backend_name;
  g.timeout = timeout();
  dump_ = std::make_unique<diag::DumpRegistration>(std::move(g), *recorder_, place.prefix);
  if (place.signal != 0) diag::dump_on_signal(place.signal);
}

std::string ProcessGroup::Impl::dump_flight_recorder(const std::string& prefix) const {
  if (!dump_) throw Error("mci: this group keeps no flight recorder to dump");
  return dump_->dump(prefix);
}

void ProcessGroup::Impl::name_for_dumps(const std::string& name, const std::string& desc,
                                        const std::vector<int>& job_ranks) {
  if (dump_) dump_->rename(name, desc, job_ranks);
}

std::string ProcessGroup::Impl::dump_after(std::string_view why) {
  if (!dump_) return {};
  const std::string path = diag::dump_automatically(*recorder_, why);
  return path.empty() ? std::string() : diag::dump_hint(path, dump_->prefix()) + "\n";
}

std::string ProcessGroup::dump_flight_recorder(const std::string& path_prefix) const {
  return impl_->dump_flight_recorder(path_prefix);
}

void ProcessGroup::name_for_dumps(const std::string& name, const std::string& desc, const std::vector<int>& job_ranks) {
  impl_->name_for_dumps(name, desc, job_ranks);
}

}  // namespace mci
