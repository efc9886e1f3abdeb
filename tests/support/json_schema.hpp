// Checks JSON documents against a JSON Schema in the repository, through
// Debian's python3-jsonschema (tests/python/check_schema.py): the tests
// validate every /api/v1/job answer they read against docs/api/job.schema.json.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mci::test {

// Empty when every document is valid; else the validator's report (each
// error's document, path and message), or why it could not run.
std::string schema_errors(const std::string& schema_path, const std::vector<nlohmann::json>& documents);

// docs/api/job.schema.json
std::string job_api_schema();

}  // namespace mci::test
