#include "scenario.hpp"

#include <unistd.h>

#include <iostream>
#include <map>

#include <fmt/format.h>

#include "mci/errors.hpp"
#include "rank.hpp"

namespace mci::test {

namespace {
// Filled before main() by the static registrations of the test files, read
// only afterwards.
std::map<std::string, ScenarioBody>& scenarios() {
  static std::map<std::string, ScenarioBody> all;
  return all;
}
}  // namespace

bool add_scenario(const char* name, ScenarioBody body) {
  if (!scenarios().emplace(name, body).second) {
    std::cerr << "scenario '" << name << "' is defined twice\n";
    std::abort();
  }
  return true;
}

int run_scenario(const std::string& name) {
  const auto it = scenarios().find(name);
  if (it == scenarios().end()) {
    std::cerr << "unknown scenario '" << name << "'\n";
    return exit_code::unknown_scenario;
  }
  try {
    return it->second();
  } catch (const TimeoutError& e) {
    say(fmt::format("TimeoutError: {}", e.what()));
    return exit_code::timeout;
  } catch (const PeerError& e) {
    say(fmt::format("PeerError(peer {}): {}", e.peer(), e.what()));
    return exit_code::peer;
  } catch (const MismatchError& e) {
    say(fmt::format("MismatchError: {}", e.what()));
    return exit_code::mismatch;
  } catch (const ConfigError& e) {
    say(fmt::format("ConfigError: {}", e.what()));
    return exit_code::config;
  } catch (const Error& e) {
    say(fmt::format("Error: {}", e.what()));
    return exit_code::other_error;
  }
}

std::string self_program() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(buf, static_cast<std::size_t>(n));
}

std::vector<std::string> scenario_command(const std::string& name) { return {self_program(), "--scenario=" + name}; }

}  // namespace mci::test
