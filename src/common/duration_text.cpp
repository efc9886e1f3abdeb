#include "common/duration_text.hpp"

#include <fmt/format.h>

namespace mci {

std::string seconds_text(std::chrono::milliseconds ms) {
  return ms.count() % 1000 == 0 ? fmt::format("{} s", ms.count() / 1000)
                                : fmt::format("{:.3g} s", static_cast<double>(ms.count()) / 1000);
}

}  // namespace mci
