#include "common/log.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "common/rank_variables.hpp"
#include "common/socket.hpp"

namespace mci::log {

namespace {

// Read once: the environment of a process does not change under mci. The
// logger cannot throw, so a bad value logs at warn; init says so.
Level level_from_env() {
  const char* v = std::getenv("MCI_LOG_LEVEL");
  return v ? level_named(v).value_or(Level::warn) : Level::warn;
}

const char* name(Level l) {
  switch (l) {
    case Level::error: return "ERROR";
    case Level::warn: return "WARN";
    case Level::info: return "INFO";
    case Level::debug: return "DEBUG";
  }
  return "?";
}

}  // namespace

std::optional<Level> level_named(std::string_view v) {
  if (v == "error") return Level::error;
  if (v == "warn") return Level::warn;
  if (v == "info" || v == "INFO") return Level::info;
  if (v == "debug" || v == "DEBUG" || v == "trace") return Level::debug;
  return std::nullopt;
}

bool enabled(Level l) {
  static const Level threshold = level_from_env();
  return static_cast<int>(l) <= static_cast<int>(threshold);
}

void write(Level l, std::string_view msg) {
  static const std::string host = host_name();
  // RANK, or the rank a launcher gave this process (srun, mpirun).
  const char* rank = nullptr;
  for (const char* v : kRankVariables) {
    if ((rank = std::getenv(v))) break;
  }
  std::string line = fmt::format("{}:{}:{} [{}] mci {} {}\n", host, ::getpid(),
                                 static_cast<long>(::syscall(SYS_gettid)), rank ? rank : "-", name(l), msg);
  // One write per line keeps lines whole when threads and ranks share stderr.
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
}

}  // namespace mci::log
