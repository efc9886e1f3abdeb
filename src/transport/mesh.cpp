#include "transport/mesh.hpp"

#include <array>
#include <chrono>

#include <fmt/format.h>

#include "mci/errors.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace mci::transport {

namespace {

Mesh connect_tcp(Store& store, const MeshOptions& o, const Deadline& dl) {
  const Settings& s = o.settings;
  // Spin on the sockets before sleeping only while this machine's ranks
  // each have a core (with more ranks than cores a spinner steals the time
  // of the rank it waits for); then poll and yield the core instead.
  const std::chrono::microseconds spin(o.core_each ? s.integer("MCI_TCP_SPIN_US") : 0);
  const std::chrono::microseconds yield(o.core_each ? 0 : s.integer("MCI_TCP_YIELD_US"));
  const ConnectMode mode = s.is({"MCI_CONNECT", "eager"}) ? ConnectMode::eager : ConnectMode::lazy;
  auto t = connect_tcp_mesh(store, o.rank, o.size, o.listen_host, o.session, o.token, dl, TcpWait{spin, yield}, mode);
  ArrivalLog* arrivals = t.get();
  return Mesh{std::move(t), arrivals};
}

constexpr std::array kKinds{
    MeshKind{{"tcp", "never use shared memory"}, &connect_tcp},
};

constexpr auto kSelectors = [] {
  std::array<SettingChoice, kKinds.size()> out{};
  for (std::size_t i = 0; i < kKinds.size(); ++i) out[i] = kKinds[i].selector;
  return out;
}();
constexpr std::array kTransportChoices{MoreChoices{"MCI_TRANSPORT", kSelectors}};

}  // namespace

std::span<const MeshKind> mesh_kinds() noexcept { return kKinds; }

std::string_view default_mesh_kind() noexcept { return kKinds.front().selector.name; }

std::span<const MoreChoices> transport_choices() noexcept { return kTransportChoices; }

Mesh connect_mesh(std::string_view kind, Store& store, const MeshOptions& o, const Deadline& dl) {
  for (const auto& k : kKinds) {
    if (k.selector.name == kind) return k.connect(store, o, dl);
  }
  std::string names;
  for (const auto& k : kKinds) names += fmt::format("{}{}", names.empty() ? "" : ", ", k.selector.name);
  throw ConfigError(fmt::format("unknown transport '{}': use {}", kind, names));
}

}  // namespace mci::transport
