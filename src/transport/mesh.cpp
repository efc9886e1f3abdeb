#include "transport/mesh.hpp"

#include <array>

#include <fmt/format.h>

#include "mci/errors.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace mci::transport {

namespace {

Mesh connect_tcp(Store& store, const MeshOptions& o, const Deadline& dl) {
  auto t = connect_tcp_mesh(store, o.rank, o.size, o.listen_host, o.session, o.token, dl, TcpWait{o.spin, o.yield},
                            o.connect);
  ArrivalLog* arrivals = t.get();
  return Mesh{std::move(t), arrivals};
}

constexpr std::array kKinds{MeshKind{"tcp", &connect_tcp}};

}  // namespace

std::span<const MeshKind> mesh_kinds() noexcept { return kKinds; }

std::string_view default_mesh_kind() noexcept { return kKinds.front().name; }

Mesh connect_mesh(std::string_view kind, Store& store, const MeshOptions& o, const Deadline& dl) {
  for (const auto& k : kKinds) {
    if (k.name == kind) return k.connect(store, o, dl);
  }
  std::string names;
  for (const auto& k : kKinds) names += fmt::format("{}{}", names.empty() ? "" : ", ", k.name);
  throw ConfigError(fmt::format("unknown transport '{}': use {}", kind, names));
}

}  // namespace mci::transport
