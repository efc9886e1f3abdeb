// A duration as an error message says it: "8 s", or "1.5 s" when it is not
// whole seconds.
#pragma once

#include <chrono>
#include <string>

namespace mci {

std::string seconds_text(std::chrono::milliseconds ms);

}  // namespace mci
