#include "launch/output/stream_relay.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace mci::launch {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t w = ::write(fd, data.data(), data.size());
    if (w >= 0) {
      data.remove_prefix(static_cast<std::size_t>(w));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    return false;
  }
  return true;
}

void say(const std::string& line) { write_all(STDERR_FILENO, line + "\n"); }

namespace {

RelaySinks console_only(int to, std::string prefix) {
  RelaySinks s;
  s.console = to;
  s.prefix = std::move(prefix);
  return s;
}

}  // namespace

StreamRelay::StreamRelay(Fd from, int to, std::string prefix, std::size_t tail_lines)
    : StreamRelay(std::move(from), console_only(to, std::move(prefix)), tail_lines) {}

StreamRelay::StreamRelay(Fd from, RelaySinks sinks, std::size_t tail_lines)
    : from_(std::move(from)), sinks_(std::move(sinks)) {
  set_nonblocking(from_.get());
  if (tail_lines > 0) tail_.emplace(tail_lines);
}

void StreamRelay::emit(std::string_view line) {
  if (sinks_.console >= 0) {
    out_.assign(sinks_.prefix);
    out_.append(line);
    out_.push_back('\n');
    write_all(sinks_.console, out_);
  }
  if (sinks_.filtered >= 0) {
    for (const auto& needle : sinks_.filters) {
      if (line.find(needle) == std::string_view::npos) continue;
      out_.assign(sinks_.filtered_prefix);
      out_.append(line);
      out_.push_back('\n');
      write_all(sinks_.filtered, out_);
      break;
    }
  }
  if (tail_) tail_->add(line);
}

void StreamRelay::feed(std::string_view bytes) {
  // A log file that cannot take more (disk full) loses what follows; the
  // console and the job go on.
  if (sinks_.file.valid() && !write_all(sinks_.file.get(), bytes)) sinks_.file.reset();
  split_.feed(bytes, [this](std::string_view l) { emit(l); });
}

void StreamRelay::close() {
  split_.finish([this](std::string_view l) { emit(l); });
  from_.reset();
}

bool StreamRelay::read_some(std::vector<char>& buf) {
  if (!from_.valid()) return false;
  const ssize_t r = ::read(from_.get(), buf.data(), buf.size());
  if (r > 0) {
    feed(std::string_view(buf.data(), static_cast<std::size_t>(r)));
    return true;
  }
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
  close();  // EOF, or an error that no retry fixes
  return false;
}

void StreamRelay::drain(std::vector<char>& buf) {
  // What the exited child wrote fits in the pipe; reading no more than that
  // keeps a process that writes without end from holding us here.
  const int cap = from_.valid() ? ::fcntl(from_.get(), F_GETPIPE_SZ) : 0;
  long long budget = cap > 0 ? cap : (1 << 20);
  while (from_.valid() && budget > 0) {
    const ssize_t r = ::read(from_.get(), buf.data(), buf.size());
    if (r > 0) {
      budget -= r;
      feed(std::string_view(buf.data(), static_cast<std::size_t>(r)));
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      close();
      return;
    }
  }
  split_.finish([this](std::string_view l) { emit(l); });
}

void StreamRelay::drain_and_close(std::vector<char>& buf) {
  drain(buf);
  close();
}

}  // namespace mci::launch
