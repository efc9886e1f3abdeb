// The mesh factory: a backend asks for "a mesh of kind K" between the ranks
// of a group and gets a Transport (and, when that kind learns arrivals for
// free, its ArrivalLog). Each kind is a row of mesh.cpp that owns its
// MCI_TRANSPORT value (its selector) and reads its own settings: "tcp" (a
// connection per pair of ranks).
//
// To add a transport: a class behind the Transport interface in
// transport/KIND/, its connect function, its row in mesh.cpp and its
// folder's transport.cmake (mci_transport_parts: its sources and
// libraries); MCI_TRANSPORT=KIND then selects it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/deadline.hpp"
#include "common/settings.hpp"
#include "mci/store.hpp"
#include "transport/transport.hpp"

namespace mci::transport {

struct MeshOptions {
  int rank = 0;
  int size = 1;
  std::string listen_host;  // the address peers reach this rank at
  std::string session;      // unique name of the group instance, proven on connect
  std::string token;        // job token, empty if none
  // Every rank of the group on this machine has a core of its own (ranks do
  // not outnumber the CPUs): a wait may spin without stealing the time of
  // the rank it waits for.
  bool core_each = true;
  // The group's settings: a kind reads its own there (MCI_TCP_SPIN_US, ...).
  const Settings& settings;
};

struct Mesh {
  std::unique_ptr<Transport> transport;
  ArrivalLog* arrivals = nullptr;  // owned by transport; nullptr when the kind has none
};

struct MeshKind {
  // Its name, MCI_TRANSPORT's value that selects it (shared memory off), and
  // what that means, for messages.
  SettingChoice selector;
  Mesh (*connect)(Store& store, const MeshOptions& o, const Deadline& dl);
};
// `store` must outlive the mesh: a lazy mesh reads peers' addresses from it.

// The mesh kinds in order of preference: a backend that has no reason to
// choose takes the first (default_mesh_kind()).
std::span<const MeshKind> mesh_kinds() noexcept;
std::string_view default_mesh_kind() noexcept;
// MCI_TRANSPORT's choices after its own (auto, shm): one per kind, in
// order. What resolves or lists settings passes these (Settings::resolve,
// list_settings).
std::span<const MoreChoices> transport_choices() noexcept;
// Throws ConfigError for an unknown kind; the kind's own errors otherwise.
Mesh connect_mesh(std::string_view kind, Store& store, const MeshOptions& o, const Deadline& dl);

}  // namespace mci::transport
