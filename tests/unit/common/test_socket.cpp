#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "common/deadline.hpp"
#include "common/net_interfaces.hpp"
#include "common/socket.hpp"

namespace mci {
namespace {

TEST(Socket, RouteTowardLoopbackIsTheLoopbackInterface) {
  const auto route = route_toward("127.0.0.1");
  ASSERT_TRUE(route.has_value());
  const std::string lo = route->interface;
  ASSERT_FALSE(lo.empty());
  EXPECT_NE(::if_nametoindex(lo.c_str()), 0u) << lo << " is an interface of this host";
  EXPECT_TRUE(is_loopback_address(route->address)) << route->address;
  const auto by_name = route_toward("localhost");
  ASSERT_TRUE(by_name.has_value());
  EXPECT_EQ(by_name->interface, lo);
}

TEST(Socket, RouteTowardNowhereIsNone) { EXPECT_FALSE(route_toward("no-such-host.invalid").has_value()); }

// A dial whose source port is its destination port (what the kernel may pick
// when a peer's listener just closed) connects to itself by TCP's
// simultaneous open: made here on purpose by binding first.
TEST(Socket, ASocketConnectedToItselfIsToldFromARealConnection) {
  Fd self(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(self.valid());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(self.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  a.sin_port = htons(static_cast<std::uint16_t>(local_port(self.get())));
  ASSERT_EQ(::connect(self.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  EXPECT_TRUE(connected_to_itself(self.get()));

  Fd listener = listen_tcp("127.0.0.1", 0);
  Fd dial = connect_tcp("127.0.0.1", local_port(listener.get()), Deadline(std::chrono::seconds(5)), "the listener");
  EXPECT_FALSE(connected_to_itself(dial.get()));
  Fd unconnected(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_FALSE(connected_to_itself(unconnected.get()));
}

}  // namespace
}  // namespace mci

namespace mci {
namespace {

// What a process in a UTS namespace of its own (a container, a network-
// namespace "host" started by Slurm) sees: its own host name, one kernel.
std::pair<std::string, std::string> identities_under_hostname(const char* name) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    std::string out = "!";
    if (::unshare(CLONE_NEWUTS) == 0 && ::sethostname(name, std::strlen(name)) == 0) {
      out = machine_identity() + "\n" + kernel_identity();
    }
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  const auto nl = got.find('\n');
  if (nl == std::string::npos) return {};
  return {got.substr(0, nl), got.substr(nl + 1)};
}

TEST(MachineIdentity, HostsOfOneKernelShareTheKernelIdentityButNotTheMachineIdentity) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a child its own host name (unshare CLONE_NEWUTS)";
  const auto [machine, kernel] = identities_under_hostname("mci-test-other-host");
  ASSERT_FALSE(kernel.empty()) << "the child could not take a host name of its own";
  EXPECT_EQ(kernel, kernel_identity()) << "ranks on one kernel share its cores, whatever their host names";
  EXPECT_NE(machine, machine_identity()) << "another host name is another host for shared memory";
}

}  // namespace
}  // namespace mci
