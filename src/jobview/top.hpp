// mci-top: the job's ranks as a table in a terminal, refreshed, read from
// the JSON that mcirun --monitor serves (GET /api/v1/job), for people on
// ssh without a browser.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mci::jobview {

// The table for one snapshot of /api/v1/job (plain text, no colours).
std::string render_top(const nlohmann::json& job);

int top_main(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err);

}  // namespace mci::jobview
