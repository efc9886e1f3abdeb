#include "launch/output/line_splitter.hpp"

namespace mci::launch {

void LineTail::add(std::string_view line) {
  if (max_lines_ == 0) return;
  if (lines_.size() == max_lines_) lines_.pop_front();
  if (line.size() > max_chars_) {
    lines_.emplace_back(std::string(line.substr(0, max_chars_)) + " [...]");
  } else {
    lines_.emplace_back(line);
  }
}

}  // namespace mci::launch
