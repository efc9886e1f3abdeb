#include "diag/dump_registry.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "common/log.hpp"
#include "mci/errors.hpp"
#include "monitor/status_block.hpp"

namespace mci::diag {

namespace {

struct Registered {
  int id;
  DumpGroup group;
  const FlightRecorder* fr;
  std::string prefix;
};

// The process's groups. Never destroyed: a group held by a static of the
// program may be destroyed after any destructor of ours has run.
struct Registry {
  std::mutex mu;  // held for a whole dump, so the file last written holds the latest records
  std::vector<Registered> groups;
  int next_id = 0;
  std::map<std::string, std::size_t> written;  // path -> hash of the bytes last written there

  static Registry& get() {
    static auto* r = new Registry;
    return *r;
  }

  Registered* find(int id) {
    for (auto& g : groups) {
      if (g.id == id) return &g;
    }
    return nullptr;
  }
};

std::int64_t wall_minus_steady_ns() {
  const auto wall = std::chrono::system_clock::now().time_since_epoch();
  const auto steady = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(wall - steady).count();
}

// The process's dump as bytes; reg.mu held.
std::string dump_bytes(const Registry& reg) {
  std::vector<GroupRecords> groups;
  groups.reserve(reg.groups.size());
  for (const Registered& g : reg.groups) {
    groups.push_back(GroupRecords{g.group, g.id, g.fr->last(g.fr->capacity())});
  }
  return torch_dump(groups, wall_minus_steady_ns());
}

// Written beside, then renamed: a reader (torchfrtrace, a test waiting for
// the files) never sees half a pickle.
void write_file(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(fmt::format("mci: cannot write the flight recorder to {}: {}", tmp, std::strerror(errno)));
    }
  }
  fs::rename(tmp, p, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("mci: cannot write the flight recorder to {}: {}", path, ec.message()));
  }
}

// Writes unless `path` already holds these bytes (automatic dumps only: a
// dump asked for is always written). reg.mu held.
bool write_if_new(Registry& reg, const std::string& path, const std::string& bytes) {
  const std::size_t h = std::hash<std::string>{}(bytes);
  if (auto it = reg.written.find(path); it != reg.written.end() && it->second == h && std::filesystem::exists(path)) {
    return false;
  }
  write_file(path, bytes);
  reg.written[path] = h;
  return true;
}

}  // namespace

DumpRegistration::DumpRegistration(DumpGroup group, const FlightRecorder& fr, std::string prefix)
    : prefix_(std::move(prefix)) {
  if (group.job_ranks.size() != static_cast<std::size_t>(group.size)) group.job_ranks = identity_ranks(group.size);
  Registry& reg = Registry::get();
  std::lock_guard lk(reg.mu);
  id_ = reg.next_id++;
  reg.groups.push_back(Registered{id_, std::move(group), &fr, prefix_});
}

DumpRegistration::~DumpRegistration() {
  Registry& reg = Registry::get();
  std::lock_guard lk(reg.mu);
  std::erase_if(reg.groups, [this](const Registered& g) { return g.id == id_; });
}

void DumpRegistration::rename(const std::string& name, const std::string& desc, const std::vector<int>& job_ranks) {
  Registry& reg = Registry::get();
  std::lock_guard lk(reg.mu);
  Registered* g = reg.find(id_);
  if (!g) return;
  if (!job_ranks.empty() && job_ranks.size() != static_cast<std::size_t>(g->group.size)) {
    throw ConfigError(
        fmt::format("mci: a group of {} ranks named for dumps with {} job ranks", g->group.size, job_ranks.size()));
  }
  if (!name.empty()) g->group.name = name;
  if (!desc.empty()) g->group.desc = desc;
  if (!job_ranks.empty()) g->group.job_ranks = job_ranks;
}

DumpGroup DumpRegistration::group() const {
  Registry& reg = Registry::get();
  std::lock_guard lk(reg.mu);
  const Registered* g = reg.find(id_);
  return g ? g->group : DumpGroup{};
}

std::string DumpRegistration::dump(const std::string& prefix) const {
  const std::string& where = prefix.empty() ? prefix_ : prefix;
  if (where.empty()) {
    throw ConfigError(
        "mci: no destination for the flight recorder: pass a path prefix, or set MCI_FR_DUMP_DIR (a folder) or "
        "TORCH_FR_DUMP_TEMP_FILE (a prefix, as for torch)");
  }
  Registry& reg = Registry::get();
  std::lock_guard lk(reg.mu);
  const Registered* g = reg.find(id_);
  const std::string path = where + std::to_string(g ? g->group.job_rank() : 0);
  const std::string bytes = dump_bytes(reg);
  write_file(path, bytes);
  reg.written[path] = std::hash<std::string>{}(bytes);
  return path;
}

std::string dump_automatically(const FlightRecorder& fr, std::string_view why) {
  try {
    Registry& reg = Registry::get();
    std::lock_guard lk(reg.mu);
    const Registered* g = nullptr;
    for (const auto& r : reg.groups) {
      if (r.fr == &fr) g = &r;
    }
    if (!g || g->prefix.empty()) return {};
    const std::string path = g->prefix + std::to_string(g->group.job_rank());
    if (write_if_new(reg, path, dump_bytes(reg))) log::info("flight recorder written to {} ({})", path, why);
    return path;
  } catch (const std::exception& e) {
    log::warn("the flight recorder could not be written ({}): {}", why, e.what());
    return {};
  }
}

std::string dump_hint(const std::string& path, const std::string& prefix) {
  namespace fs = std::filesystem;
  const fs::path p(prefix);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  return fmt::format(
      "Flight recorder written in torch's format to {} (each rank writes its own beside it): torchfrtrace {} -p {} "
      "reads them all (docs/troubleshooting.md)",
      path, dir, p.filename().string());
}

namespace {

// The signal handler's end of the pipe, -1 once the watcher is gone.
std::atomic<int> g_wake_fd{-1};
// The handlers the program had, called after ours. Written before ours is
// installed, read only by it.
struct sigaction g_previous[NSIG];

void on_signal(int signo, siginfo_t* info, void* context) {
  const int saved = errno;  // a handler must leave errno as it found it
  const int fd = g_wake_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const auto b = static_cast<unsigned char>(signo);
    [[maybe_unused]] const auto n = ::write(fd, &b, 1);  // non-blocking: a full pipe already has a dump coming
  }
  errno = saved;
  const struct sigaction& old = g_previous[signo];
  if ((old.sa_flags & SA_SIGINFO) != 0) {
    if (old.sa_sigaction != nullptr) old.sa_sigaction(signo, info, context);
  } else if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN && old.sa_handler != nullptr) {
    old.sa_handler(signo);
  }
}

const char* signal_name(int signo) {
  if (signo == SIGUSR1) return "SIGUSR1";
  if (signo == SIGUSR2) return "SIGUSR2";
  return "a signal";
}

// Dumps every group that has a destination, once per destination; on the
// watcher's thread.
void dump_everywhere(int signo) {
  Registry& reg = Registry::get();
  std::lock_guard lk(reg.mu);
  std::set<std::string> done;
  for (const Registered& g : reg.groups) {
    if (g.prefix.empty() || !done.insert(g.prefix).second) continue;
    const std::string path = g.prefix + std::to_string(g.group.job_rank());
    try {
      const std::string bytes = dump_bytes(reg);
      write_file(path, bytes);
      reg.written[path] = std::hash<std::string>{}(bytes);
      log::warn("{}: flight recorder written to {}", signal_name(signo), path);
    } catch (const std::exception& e) {
      log::warn("{}: flight recorder not written: {}", signal_name(signo), e.what());
    }
  }
}

// The thread that dumps when a signal arrived. Made on the first
// dump_on_signal; at exit the program's handlers are put back and the
// thread is joined.
class SignalWatcher {
 public:
  static SignalWatcher& get() {
    static SignalWatcher w;
    return w;
  }

  void watch(int signo) {
    std::lock_guard lk(mu_);
    if (signo <= 0 || signo >= NSIG || installed_.contains(signo)) return;
    if (!thread_.joinable()) start();
    struct sigaction sa {};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(signo, nullptr, &g_previous[signo]) != 0 || ::sigaction(signo, &sa, nullptr) != 0) {
      throw Error(fmt::format("mci: cannot install the flight recorder's handler for signal {}: {}", signo,
                              std::strerror(errno)));
    }
    installed_.insert(signo);
  }

  ~SignalWatcher() {
    std::lock_guard lk(mu_);
    for (int s : installed_) ::sigaction(s, &g_previous[s], nullptr);
    g_wake_fd.store(-1);
    if (write_fd_ >= 0) ::close(write_fd_);  // the thread reads end-of-file and ends
    if (thread_.joinable()) thread_.join();
    if (read_fd_ >= 0) ::close(read_fd_);
  }

 private:
  SignalWatcher() = default;

  void start() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw Error(fmt::format("mci: cannot make the flight recorder's signal pipe: {}", std::strerror(errno)));
    }
    read_fd_ = fds[0];
    write_fd_ = fds[1];
    // The handler must never block.
    ::fcntl(write_fd_, F_SETFL, ::fcntl(write_fd_, F_GETFL) | O_NONBLOCK);
    thread_ = std::thread([fd = read_fd_] {
      for (;;) {
        unsigned char b = 0;
        const auto n = ::read(fd, &b, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        dump_everywhere(b);
      }
    });
    g_wake_fd.store(write_fd_);
  }

  std::mutex mu_;
  std::set<int> installed_;
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::thread thread_;
};

}  // namespace

void dump_on_signal(int signo) {
  SignalWatcher::get().watch(signo);
  // Under mcirun --monitor, the page's "dump" button sends it.
  if (auto* block = monitor::BlockWriter::of_process()) block->set_dump_signal(signo);
}

}  // namespace mci::diag
