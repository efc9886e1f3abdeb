// Cutting a child's byte stream into whole lines, whatever sizes its writes
// had: the relay writes each line with one write(2), so lines of different
// processes can never be glued together or cut in the middle.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace mci::launch {

class LineSplitter {
 public:
  // A line longer than this (no newline for 1 MiB) is passed on in pieces of
  // this size: holding an endless line would hold the memory too.
  static constexpr std::size_t kMaxLine = std::size_t{1} << 20;

  explicit LineSplitter(std::size_t max_line = kMaxLine) : max_line_(max_line) {}

  // Calls emit(line) for every line completed by data, without its '\n'.
  template <class Emit>
  void feed(std::string_view data, Emit&& emit) {
    while (!data.empty()) {
      const std::size_t nl = data.find('\n');
      const std::string_view piece = data.substr(0, nl);
      if (nl != std::string_view::npos && partial_.empty() && piece.size() <= max_line_) {
        emit(piece);  // the common case: no copy
      } else {
        partial_.append(piece);
        spill(emit);
        if (nl != std::string_view::npos) {
          emit(std::string_view(partial_));
          partial_.clear();
        }
      }
      if (nl == std::string_view::npos) break;
      data.remove_prefix(nl + 1);
    }
  }

  // At end of stream: a last line without newline still counts as a line.
  template <class Emit>
  void finish(Emit&& emit) {
    if (!partial_.empty()) emit(std::string_view(partial_));
    partial_.clear();
  }

  std::size_t pending() const { return partial_.size(); }

 private:
  template <class Emit>
  void spill(Emit& emit) {
    std::size_t off = 0;
    while (partial_.size() - off > max_line_) {
      emit(std::string_view(partial_).substr(off, max_line_));
      off += max_line_;
    }
    partial_.erase(0, off);
  }

  std::size_t max_line_;
  std::string partial_;
};

// The last lines of a stream (a failed rank's stderr, for the summary).
class LineTail {
 public:
  explicit LineTail(std::size_t lines = 20, std::size_t max_chars = 1000) : max_lines_(lines), max_chars_(max_chars) {}

  void add(std::string_view line);
  std::vector<std::string> lines() const { return {lines_.begin(), lines_.end()}; }

 private:
  std::size_t max_lines_;
  std::size_t max_chars_;
  std::deque<std::string> lines_;
};

}  // namespace mci::launch
