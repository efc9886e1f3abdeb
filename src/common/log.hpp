// Debug logging switched by MCI_LOG_LEVEL (error, warn, info, debug; default
// warn). Every line: "host:pid:tid [rank] mci LEVEL message", on stderr, in
// one write so lines from threads and processes never interleave.
#pragma once

#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace mci::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

bool enabled(Level l);
// The level a value of MCI_LOG_LEVEL names (also INFO, DEBUG and trace, as
// other tools spell them); nullopt for anything else, which logs at warn.
std::optional<Level> level_named(std::string_view v);
void write(Level l, std::string_view msg);

template <class... A>
void error(fmt::format_string<A...> f, A&&... a) {
  if (enabled(Level::error)) write(Level::error, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void warn(fmt::format_string<A...> f, A&&... a) {
  if (enabled(Level::warn)) write(Level::warn, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void info(fmt::format_string<A...> f, A&&... a) {
  if (enabled(Level::info)) write(Level::info, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void debug(fmt::format_string<A...> f, A&&... a) {
  if (enabled(Level::debug)) write(Level::debug, fmt::format(f, std::forward<A>(a)...));
}

}  // namespace mci::log
