// Setting up shared memory for a group: which ranks share this host
// (hostname and boot id, as each rank publishes them in the store — not
// LOCAL_WORLD_SIZE, which says nothing about containers or namespaces), and,
// when all of them do, one segment that every rank maps.
#pragma once

#include <memory>
#include <string>

#include "common/deadline.hpp"
#include "mci/store.hpp"
#include "transport/shm/shm_world.hpp"

namespace mci::transport {

enum class ShmMode { automatic, required, off };

// Returns nullptr when shared memory is off or not possible (then `why` says
// why); throws ConfigError if it was required and is not possible.
std::unique_ptr<ShmWorld> connect_shm(Store& store, int rank, int size, ShmMode mode,
                                      std::size_t buffer_bytes, const Deadline& dl, std::string& why);

// This host's identity for same-host detection.
std::string host_identity();

}  // namespace mci::transport
