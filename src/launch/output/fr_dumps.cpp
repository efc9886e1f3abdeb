#include "launch/output/fr_dumps.hpp"

#include <cstdlib>
#include <filesystem>

#include "mci/errors.hpp"

namespace mci::launch {

FrDumps::FrDumps(const EnvLookup& env) {
  auto set = [&](const char* name) {
    const auto v = env(name);
    return v && !v->empty() ? v : std::nullopt;
  };
  if (!set("MCI_FR_DUMP_ON_SIGNAL")) env_.push_back("MCI_FR_DUMP_ON_SIGNAL=SIGUSR2");
  if (const auto dir = set("MCI_FR_DUMP_DIR")) {
    where_ = *dir + "/mci_trace_rank_N";
  } else if (const auto prefix = set("TORCH_FR_DUMP_TEMP_FILE")) {
    where_ = *prefix + "N";
  } else {
    const auto tmp = set("TMPDIR");
    std::string tmpl = (tmp ? *tmp : std::string("/tmp")) + "/mcirun-fr-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw ConfigError("mcirun --monitor: cannot make a folder for the flight-recorder dumps in " +
                        (tmp ? *tmp : std::string("/tmp")) + ": set MCI_FR_DUMP_DIR to one");
    }
    made_ = tmpl;
    where_ = made_ + "/mci_trace_rank_N";
    env_.push_back("MCI_FR_DUMP_DIR=" + made_);
  }
}

FrDumps::~FrDumps() {
  if (made_.empty()) return;
  std::error_code ec;
  if (std::filesystem::is_empty(made_, ec) && !ec) std::filesystem::remove(made_, ec);
}

}  // namespace mci::launch
