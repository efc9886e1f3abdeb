// A real etcd for the store's tests (Debian's etcd-server): one member on
// loopback, on ports the OS gives, its data on tmpfs (etcd syncs every write,
// tens of ms each on a disk), ended and removed when its owner goes.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/deadline.hpp"
#include "mci/errors.hpp"
#include "ports.hpp"
#ifdef MCI_HAVE_ETCD
#include "store/etcd_store.hpp"
#endif

namespace mci::test {

inline std::string find_etcd() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    const std::string p = std::string(dir) + "/etcd";
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// A test's own certificates, made with the openssl command in `dir`: a CA,
// a member's certificate for 127.0.0.1 (server and client use: etcd's
// gateway presents it to its own gRPC server), a client's, and a second CA
// nobody trusts. Empty `error` when made.
struct TestCerts {
  std::string dir, ca, server_cert, server_key, client_cert, client_key, stranger_ca;
  std::string error;
};
inline TestCerts make_test_certs(const std::string& dir) {
  TestCerts c{dir,
              dir + "/ca.pem",
              dir + "/server.pem",
              dir + "/server.key",
              dir + "/client.pem",
              dir + "/client.key",
              dir + "/stranger.pem",
              ""};
  const std::string q = "'" + dir + "'";
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::vector<std::string> steps = {
      fmt::format("printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' > {}/server.ext", q),
      fmt::format("printf 'extendedKeyUsage=clientAuth\n' > {}/client.ext", q),
      fmt::format("openssl req -x509 {} -keyout {}/ca.key -out {}/ca.pem -days 2 -subj /CN=mci-test-ca", key, q, q),
      fmt::format("openssl req -x509 {} -keyout {}/stranger.key -out {}/stranger.pem -days 2 -subj /CN=stranger", key,
                  q, q),
      fmt::format("openssl req {} -keyout {}/server.key -out {}/server.csr -subj /CN=127.0.0.1", key, q, q),
      fmt::format("openssl x509 -req -in {0}/server.csr -CA {0}/ca.pem -CAkey {0}/ca.key -CAcreateserial -days 2 "
                  "-extfile {0}/server.ext -out {0}/server.pem",
                  q),
      fmt::format("openssl req {} -keyout {}/client.key -out {}/client.csr -subj /CN=mci-client", key, q, q),
      fmt::format("openssl x509 -req -in {0}/client.csr -CA {0}/ca.pem -CAkey {0}/ca.key -CAcreateserial -days 2 "
                  "-extfile {0}/client.ext -out {0}/client.pem",
                  q),
  };
  for (const auto& step : steps) {
    if (std::system((step + " >/dev/null 2>&1").c_str()) != 0) {
      c.error = "could not make the test's certificates with: " + step;
      break;
    }
  }
  return c;
}

// One etcd member on loopback, in a folder of its own, ended (and its
// folder removed) when the suite ends; over TLS, with client certificates
// required, when `certs` is given.
class EtcdProcess {
 public:
  explicit EtcdProcess(const std::string& etcd, const TestCerts* certs = nullptr) {
    // On tmpfs: etcd syncs every write to its log, which on this disk costs
    // tens of ms a write (the tests make hundreds). Not named mci-*, which
    // the leak checks of other tests look for.
    char tmpl[] = "/dev/shm/etcd-test-XXXXXX";
    char fallback[] = "/tmp/etcd-test-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    dir_ = made ? made : ::mkdtemp(fallback);
    client_port_ = free_port();
    int peer = free_port();
    while (peer == client_port_) peer = free_port();
    const std::string client = fmt::format("{}://127.0.0.1:{}", certs ? "https" : "http", client_port_);
    const std::string peer_url = fmt::format("http://127.0.0.1:{}", peer);
    std::vector<std::string> args = {etcd,
                                     "--name=t",
                                     "--data-dir=" + dir_ + "/data",
                                     "--listen-client-urls=" + client,
                                     "--advertise-client-urls=" + client,
                                     "--listen-peer-urls=" + peer_url,
                                     "--initial-advertise-peer-urls=" + peer_url,
                                     "--initial-cluster=t=" + peer_url};
    if (certs) {
      for (const std::string& a : {"--cert-file=" + certs->server_cert, "--key-file=" + certs->server_key,
                                   "--trusted-ca-file=" + certs->ca, std::string("--client-cert-auth")}) {
        args.push_back(a);
      }
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = dir_ + "/etcd.log";
    const int out = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      // Ends with the test, however the test ends (a timeout's SIGKILL
      // included): no etcd outlives its test.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::execv(etcd.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(out);
    ::close(err);
  }
  ~EtcdProcess() {
    stop(SIGTERM);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  void stop(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    ::kill(pid_, SIGCONT);  // a member a test stopped must still end
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }
  // SIGSTOP: a member alive but silent (its kernel still accepts
  // connections). Returns once every thread of it is stopped: under load a
  // thread still running when kill() returned answered the test's first
  // read (seen in CI).
  void signal(int sig) const {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    if (sig != SIGSTOP) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!all_threads_stopped() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::string endpoint() const { return fmt::format("127.0.0.1:{}", client_port_); }
  bool started() const { return pid_ > 0; }

 private:
  // Every /proc/PID/task/TID/stat says 'T' (stopped): the state is the
  // field after the command's closing parenthesis.
  bool all_threads_stopped() const {
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid_), ec)) {
      std::ifstream f(t.path() / "stat");
      const std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      const auto paren = stat.rfind(')');
      if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'T') return false;
    }
    return !ec;
  }

 public:
 private:
  std::string dir_;
  int client_port_ = 0;
  pid_t pid_ = -1;
};

#ifdef MCI_HAVE_ETCD
// A client with options `o`, once etcd answers (at most 20 s from start);
// nullptr and `why` set when it never does.
inline std::unique_ptr<EtcdStore> etcd_client_when_up(const EtcdStoreOptions& o, std::string* why) {
  const Deadline dl(std::chrono::milliseconds(20000));
  while (!dl.expired()) {
    try {
      return std::make_unique<EtcdStore>(o);
    } catch (const std::exception& e) {
      if (why) *why = e.what();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return nullptr;
}

// A client of `job` on `etcd`, once it answers.
inline std::unique_ptr<EtcdStore> etcd_client_when_up(const EtcdProcess& etcd, const std::string& job,
                                                      std::string* why) {
  if (!etcd.started()) return nullptr;
  EtcdStoreOptions o;
  o.endpoints = {etcd.endpoint()};
  o.job_id = job;
  o.request_timeout = std::chrono::milliseconds(500);
  return etcd_client_when_up(o, why);
}

// One etcd for the whole test binary, started on first use and ended at
// exit; nullptr where etcd is not installed.
inline EtcdProcess* shared_etcd() {
  static const std::unique_ptr<EtcdProcess> etcd = [] {
    const std::string path = find_etcd();
    return path.empty() ? nullptr : std::make_unique<EtcdProcess>(path);
  }();
  return etcd.get();
}

// Whether the shared etcd serves: `skip` where etcd is not installed (the
// test is skipped), `why` not empty where it is but never answered (the test
// fails).
struct EtcdReady {
  bool skip = false;
  std::string why;
};
inline EtcdReady shared_etcd_ready() {
  if (shared_etcd() == nullptr) return {true, "etcd is not installed (apt-get install etcd-server)"};
  std::string why;
  if (!etcd_client_when_up(*shared_etcd(), "probe", &why)) return {false, "etcd did not start: " + why};
  return {};
}
#endif

}  // namespace mci::test

#ifdef MCI_HAVE_ETCD
// In a fixture's SetUp (it returns from it): skips the test where etcd is not
// installed, fails it where etcd did not come up.
#define MCI_NEEDS_SHARED_ETCD()                           \
  do {                                                    \
    const auto ready_ = ::mci::test::shared_etcd_ready(); \
    if (ready_.skip) GTEST_SKIP() << ready_.why;          \
    ASSERT_TRUE(ready_.why.empty()) << ready_.why;        \
  } while (false)
#endif
