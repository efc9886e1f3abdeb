// The monitor's page: one self-contained HTML document (no script or font
// from elsewhere: the job's network may reach nothing) that polls
// /api/v1/job once a second and draws the ranks' table, the verdict, a
// chart per operation kind and the job's events. Every text it shows comes
// from the JSON through textContent, never as HTML, so a host or program
// name cannot inject markup.
#pragma once

#include <string>

namespace mci::jobview {

const std::string& page_html();

}  // namespace mci::jobview
