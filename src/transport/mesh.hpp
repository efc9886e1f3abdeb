// The mesh factory: a backend asks for "a mesh of kind K" between the ranks
// of a group and gets a Transport (and, when that kind learns arrivals for
// free, its ArrivalLog). Kinds: "tcp" (a connection per pair of ranks).
//
// To add a transport: a class behind the Transport interface in
// transport/KIND/, its connect function, and a row in mesh.cpp.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/deadline.hpp"
#include "mci/store.hpp"
#include "transport/connect_mode.hpp"
#include "transport/transport.hpp"

namespace mci::transport {

struct MeshOptions {
  int rank = 0;
  int size = 1;
  std::string listen_host;            // the address peers reach this rank at
  std::string session;                // unique name of the group instance, proven on connect
  std::string token;                  // job token, empty if none
  std::chrono::nanoseconds spin{0};   // poll without sleeping this long before a wait sleeps
  std::chrono::nanoseconds yield{0};  // then poll and give the core away this long (ranks outnumber cores)
  ConnectMode connect = ConnectMode::lazy;
};

struct Mesh {
  std::unique_ptr<Transport> transport;
  ArrivalLog* arrivals = nullptr;  // owned by transport; nullptr when the kind has none
};

struct MeshKind {
  std::string_view name;
  Mesh (*connect)(Store& store, const MeshOptions& o, const Deadline& dl);
};
// `store` must outlive the mesh: a lazy mesh reads peers' addresses from it.

// The mesh kinds in order of preference: a backend that has no reason to
// choose takes the first (default_mesh_kind()).
std::span<const MeshKind> mesh_kinds() noexcept;
std::string_view default_mesh_kind() noexcept;
// Throws ConfigError for an unknown kind; the kind's own errors otherwise.
Mesh connect_mesh(std::string_view kind, Store& store, const MeshOptions& o, const Deadline& dl);

}  // namespace mci::transport
