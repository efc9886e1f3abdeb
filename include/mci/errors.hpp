// One exception hierarchy. Each message names what went wrong (rank, the
// collective and its sequence number, bytes) and what to do next.
#pragma once

#include <stdexcept>
#include <string>

namespace mci {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad environment, bad arguments, bad configuration: fix the call or the job.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A tool's command line it cannot make sense of (mcirun, mci-perf): the tool
// prints the message and exits with status 2 (as argparse does), before
// anything starts.
class UsageError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// A bounded wait expired. The text contains "Timed out waiting", the timeout
// in ms, the operation and its sequence number, and who never answered.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// A peer died, closed its connection, or aborted the group.
class PeerError : public Error {
 public:
  PeerError(const std::string& what, int peer) : Error(what), peer_(peer) {}
  int peer() const noexcept { return peer_; }

 private:
  int peer_;
};

// Ranks called different collectives, counts, dtypes, roots or ops at the
// same sequence number.
class MismatchError : public Error {
 public:
  using Error::Error;
};

}  // namespace mci
