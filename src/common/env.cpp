#include "common/env.hpp"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci {

std::optional<std::string> env_str(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

std::optional<long long> parse_int(const std::string& s) {
  if (s.empty()) return std::nullopt;
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  std::size_t end = s.size();
  while (end > i && (s[end - 1] == ' ' || s[end - 1] == '\t')) --end;
  if (i == end) return std::nullopt;
  const std::string t = s.substr(i, end - i);
  errno = 0;
  char* stop = nullptr;
  long long v = std::strtoll(t.c_str(), &stop, 10);
  if (errno != 0 || stop != t.c_str() + t.size()) return std::nullopt;
  return v;
}

std::optional<long long> env_int(const char* name, const std::string& context) {
  return env_int(process_env(), name, context);
}

std::optional<long long> env_int(const EnvLookup& env, const char* name, const std::string& context) {
  auto s = env(name);
  if (!s) return std::nullopt;
  auto v = parse_int(*s);
  if (!v) {
    throw ConfigError(
        fmt::format("Error initializing mci using {}: environment variable {} is '{}', which is not an "
                    "integer. Set it to a whole number (the launcher sets it for you).",
                    context, name, *s));
  }
  return v;
}

std::optional<long long> env_int(const char* name) {
  auto s = env_str(name);
  if (!s) return std::nullopt;
  auto v = parse_int(*s);
  if (!v) throw ConfigError(fmt::format("{}='{}' is not an integer: set it to a whole number, or unset it", name, *s));
  return v;
}

void throw_env_missing(const char* name, const std::string& context, const std::string& hint) {
  throw ConfigError(
      fmt::format("Error initializing mci using {} rendezvous: environment variable {} expected, but not "
                  "set. Start the program with a launcher (mcirun --nproc_per_node=N prog, or srun), or "
                  "export {}.{}{}",
                  context, name, name, hint.empty() ? "" : " ", hint));
}

}  // namespace mci
