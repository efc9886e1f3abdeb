// What a backend does, from its row of the backend table: code that must
// act on it (init and the group's front end, mci-perf, the examples, the
// torch backend) reads these instead of comparing backend names.
// list_backends() and find_backend_info() (mci/init.hpp) hand them out.
#pragma once

#include "mci/op_kind.hpp"

namespace mci {

struct BackendCaps {
  bool host_memory = false;       // takes buffers in host memory
  bool cuda_memory = false;       // takes buffers in CUDA memory (the cpu backend stages them)
  bool gpu_per_rank = false;      // each rank drives a GPU of its own: local rank i on cuda:i
  bool mci_algorithms = false;    // runs mci's algorithms: honours MCI_ALGO (mci-perf --algo)
  bool mci_transports = false;    // runs on mci's transports: honours MCI_TRANSPORT (mci-perf --transport)
  bool fingerprints = false;      // ranks calling different collectives get a MismatchError, not a timeout
  bool reports_arrivals = false;  // a timeout's hang report says which rank arrived last, and when
  bool aborts_running = false;    // abort() ends an operation already running on the peers too
  bool shrinks = false;           // survivors of a lost rank go on in place (ProcessGroup::shrink, grow)
  bool any_source = false;        // recv(data, any_source, tag): whichever rank sends first
  OpKindSet kinds;  // the operations it runs; a call of another kind is a ConfigError naming those that do
};

}  // namespace mci
