#include "launch/config/torch_version.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <regex>

#include "common/deadline.hpp"
#include "launch/ranks/child_process.hpp"

namespace mci::launch {

namespace {

// importlib.util.find_spec locates the package without running it; torch's
// import takes seconds, reading version.py takes none.
constexpr const char* kProbe =
    "import importlib.util as u, os, re\n"
    "s = u.find_spec('torch')\n"
    "if s is not None and s.origin:\n"
    "    try:\n"
    "        t = open(os.path.join(os.path.dirname(s.origin), 'version.py')).read()\n"
    "        m = re.search(r'^__version__\\s*(?::[^=]*)?=\\s*[\\'\"]([^\\'\"]+)', t, re.M)\n"
    "        print(m.group(1) if m else '')\n"
    "    except OSError:\n"
    "        pass\n";

}  // namespace

std::optional<TorchVersion> parse_torch_version(const std::string& text) {
  static const std::regex re(R"(^(\d+)\.(\d+)([.+a-zA-Z0-9_-]*)$)");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return std::nullopt;
  TorchVersion v;
  v.major = std::stoi(m[1].str());
  v.minor = std::stoi(m[2].str());
  v.text = text;
  return v;
}

TorchProbe probe_torch(const std::string& python, const std::vector<std::string>& env, const SignalFd& signals,
                       std::chrono::milliseconds limit) {
  TorchProbe probe;
  StartedChild c;
  try {
    c = start_child(ExecSpec{python, {python, "-c", kProbe}}, env, signals);
  } catch (const std::exception&) {
    return probe;  // the ranks' own start will say why the interpreter cannot run
  }
  const Deadline dl(limit);
  std::string out;
  char buf[4096];
  while ((c.out.valid() || c.err.valid()) && !dl.expired()) {
    pollfd fds[2] = {{c.out.get(), POLLIN, 0}, {c.err.get(), POLLIN, 0}};
    if (::poll(fds, 2, dl.poll_ms()) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      Fd& f = i == 0 ? c.out : c.err;
      const ssize_t r = ::read(f.get(), buf, sizeof buf);
      if (r > 0 && i == 0 && out.size() < 4096) out.append(buf, static_cast<std::size_t>(r));
      if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) f.reset();
    }
  }
  int status = 0;
  if (c.out.valid() || c.err.valid()) {  // out of time, still writing or silent
    probe.timed_out = true;
    ::kill(-c.pid, SIGKILL);
  }
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (probe.timed_out) return probe;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) probe.version = parse_torch_version(out);
  return probe;
}

}  // namespace mci::launch
