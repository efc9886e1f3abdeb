// A job of N worker processes for integration tests: the test hosts the
// store on a port the OS picked, starts the ranks with the launcher's
// variables, and collects their exit statuses and output.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mci/store.hpp"
#include "scenario.hpp"
#include "spawn.hpp"

namespace mci::test {

class Job {
 public:
  // Starts `world` ranks of `argv` (argv[0] resolved with built()).
  Job(int world, const std::vector<std::string>& argv, std::map<std::string, std::string> env = {});
  // Starts `world` ranks of a scenario of this program.
  Job(int world, const Scenario& s, std::map<std::string, std::string> env = {})
      : Job(world, scenario_command(s.name), std::move(env)) {}
  // Waits for every rank (SIGKILL after `limit`).
  void wait(std::chrono::milliseconds limit = std::chrono::seconds(120));
  ExitStatus wait_rank(int rank, std::chrono::milliseconds limit) { return spawner_.wait(rank, limit); }
  ExitStatus status(int rank) { return spawner_.child(rank).status.value(); }
  std::string output(int rank) { return spawner_.child(rank).output(); }
  pid_t pid(int rank) { return spawner_.child(rank).pid; }
  int port() const { return server_->port(); }
  std::string all_output();

 private:
  std::unique_ptr<StoreServer> server_;
  Spawner spawner_;
};

}  // namespace mci::test
