// A command line mci-perf cannot run: a bad flag or value. main() prints the
// message and exits with status 2, before any rank joins the job.
#pragma once

#include "mci/errors.hpp"

namespace mci::perf {

class UsageError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

}  // namespace mci::perf
