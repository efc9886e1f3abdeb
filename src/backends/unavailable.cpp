// Factories for backends this build does not contain. init_process_group
// checks availability first; these are the backstop.
#include <fmt/format.h>

#include "backends/backend.hpp"
#include "mci/errors.hpp"

namespace mci {

#ifndef MCI_HAVE_GLOO
std::unique_ptr<Backend> make_gloo_backend(const BackendContext&) {
  throw ConfigError("backend 'gloo' is not part of this build of mci (libgloo-dev was not found "
                    "when it was configured); use backend 'cpu', mci's own engine");
}
#endif

#ifndef MCI_HAVE_NCCL
std::unique_ptr<Backend> make_nccl_backend(const BackendContext&) {
  throw ConfigError("backend 'nccl' is not part of this build of mci (the CUDA toolkit and NCCL "
                    "were not found when it was configured); use backend 'cpu' or 'gloo'");
}
#endif

}  // namespace mci
