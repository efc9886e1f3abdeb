#include "job.hpp"

namespace mci::test {

Job::Job(int world, const std::vector<std::string>& argv, std::map<std::string, std::string> env) {
  server_ = std::make_unique<StoreServer>(StoreServerOptions{"127.0.0.1", 0, ""});
  std::vector<std::string> args = argv;
  if (args[0].find('/') == std::string::npos) args[0] = built(args[0]);
  for (int r = 0; r < world; ++r) {
    std::map<std::string, std::string> e = env;
    e.emplace("RANK", std::to_string(r));
    e.emplace("LOCAL_RANK", std::to_string(r));
    e.emplace("WORLD_SIZE", std::to_string(world));
    e.emplace("LOCAL_WORLD_SIZE", std::to_string(world));
    e.emplace("MASTER_ADDR", "127.0.0.1");
    e.emplace("MASTER_PORT", std::to_string(server_->port()));
    e.emplace("MCI_STORE_HOSTED", "1");
    e.emplace("MCI_JOB_TOKEN", "\x01");
    spawner_.spawn(args, e);
  }
}

void Job::wait(std::chrono::milliseconds limit) { spawner_.wait_all(limit); }

std::string Job::all_output() {
  std::string s;
  for (std::size_t i = 0; i < spawner_.children().size(); ++i) {
    s += "--- rank " + std::to_string(i) + " ---\n" + spawner_.child(i).output();
  }
  return s;
}

}  // namespace mci::test
