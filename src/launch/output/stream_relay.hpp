// One child stream (its stdout or its stderr) relayed to mcirun's own, line
// by line: each whole line, with its optional "[rank N] " prefix, goes out in
// one write(2) as soon as its newline arrives. With --log-dir, -r or -t the
// stream also goes (or only goes) to its log file, byte for byte.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/socket.hpp"
#include "launch/output/line_splitter.hpp"

namespace mci::launch {

// Writes all of data to fd, waiting when fd is non-blocking and full.
// Returns false when fd cannot take it (closed pipe, bad fd): output that
// nobody reads is dropped, the job goes on.
bool write_all(int fd, std::string_view data);

// One line of mcirun's own on its stderr, in one write.
void say(const std::string& line);

// Where a relayed stream goes besides the failure summary's tail.
struct RelaySinks {
  int console = -1;    // whole lines, prefixed; -1: not shown (-r, --local-ranks-filter)
  std::string prefix;  // of each console line
  Fd file;             // the bytes as the program wrote them (-r, -t)
  int filtered = -1;   // lines holding one of `filters`, prefixed (--duplicate-*-filters)
  std::string filtered_prefix;
  std::vector<std::string> filters;
};

class StreamRelay {
 public:
  // from: the read end of the child's pipe (made non-blocking here).
  // tail_lines > 0 keeps that many last lines for the failure summary.
  StreamRelay(Fd from, int to, std::string prefix, std::size_t tail_lines = 0);
  StreamRelay(Fd from, RelaySinks sinks, std::size_t tail_lines);

  int fd() const { return from_.get(); }
  bool is_open() const { return from_.valid(); }

  // One read of what the pipe holds now. Returns false at end of stream,
  // after relaying a last line that had no newline and closing the pipe.
  bool read_some(std::vector<char>& buf);
  // Everything the pipe holds now (the child has exited, so that is all it
  // wrote), a last line without newline included. The pipe stays open: what
  // the child left running in its process group may still write to it.
  void drain(std::vector<char>& buf);
  // The same, then close: whoever still holds the pipe (a process that left
  // the group) cannot make mcirun wait for it.
  void drain_and_close(std::vector<char>& buf);

  const LineTail* tail() const { return tail_ ? &*tail_ : nullptr; }

 private:
  void emit(std::string_view line);
  void feed(std::string_view bytes);
  void close();

  Fd from_;
  RelaySinks sinks_;
  LineSplitter split_;
  std::optional<LineTail> tail_;
  std::string out_;  // prefix + line + '\n', reused
};

}  // namespace mci::launch
