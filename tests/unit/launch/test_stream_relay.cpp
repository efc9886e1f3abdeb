#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "launch/output/stream_relay.hpp"

namespace mci::launch {
namespace {

using Lines = std::vector<std::string>;

struct Pipe {
  Pipe() {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    read.reset(p[0]);
    write.reset(p[1]);
  }
  Fd read, write;
};

// Every write(2) the relay makes arrives here as one packet, so the test
// sees exactly how the output was cut.
struct PacketSink {
  PacketSink() {
    int s[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s), 0);
    in.reset(s[0]);
    out.reset(s[1]);
    int big = 4 << 20;
    ::setsockopt(in.get(), SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    ::setsockopt(out.get(), SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  }
  Lines packets() {
    Lines p;
    std::vector<char> buf(8 << 20);
    while (true) {
      const ssize_t n = ::recv(out.get(), buf.data(), buf.size(), MSG_DONTWAIT);
      if (n <= 0) break;
      p.emplace_back(buf.data(), static_cast<std::size_t>(n));
    }
    return p;
  }
  Fd in, out;
};

void put(const Fd& fd, std::string_view s) {
  ASSERT_EQ(::write(fd.get(), s.data(), s.size()), static_cast<ssize_t>(s.size()));
}

TEST(StreamRelay, EachWholeLineIsOneWriteWithItsPrefix) {
  Pipe p;
  PacketSink sink;
  std::vector<char> buf(64 * 1024);
  StreamRelay relay(std::move(p.read), sink.in.get(), "[rank 3] ", 2);
  put(p.write, "one\ntw");
  EXPECT_TRUE(relay.read_some(buf));
  EXPECT_EQ(sink.packets(), (Lines{"[rank 3] one\n"}));
  put(p.write, "o\nthree\nfour");
  EXPECT_TRUE(relay.read_some(buf));
  EXPECT_EQ(sink.packets(), (Lines{"[rank 3] two\n", "[rank 3] three\n"}));
  EXPECT_TRUE(relay.read_some(buf));  // nothing there now: not the end
  p.write.reset();
  EXPECT_FALSE(relay.read_some(buf));  // end of stream: the last line gets its newline
  EXPECT_EQ(sink.packets(), (Lines{"[rank 3] four\n"}));
  EXPECT_FALSE(relay.is_open());
  ASSERT_NE(relay.tail(), nullptr);
  EXPECT_EQ(relay.tail()->lines(), (Lines{"three", "four"}));
}

TEST(StreamRelay, ALineLongerThanThePipeStillLeavesInOneWrite) {
  Pipe p;
  PacketSink sink;
  std::vector<char> buf(64 * 1024);
  StreamRelay relay(std::move(p.read), sink.in.get(), "");
  EXPECT_EQ(relay.tail(), nullptr);
  const std::string line(300 * 1024, 'x');
  std::thread writer([&] {
    put(p.write, line + "\nshort\n");
    p.write.reset();
  });
  while (relay.read_some(buf)) {
  }
  writer.join();
  const Lines got = sink.packets();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], line + "\n");
  EXPECT_EQ(got[1], "short\n");
}

TEST(StreamRelay, DrainTakesWhatIsThereAndDoesNotWaitForTheWriter) {
  Pipe p;
  PacketSink sink;
  std::vector<char> buf(16);  // several reads
  StreamRelay relay(std::move(p.read), sink.in.get(), "> ");
  put(p.write, "first line\nsecond line, unfinished");
  relay.drain_and_close(buf);  // p.write is still open, as if a grandchild held it
  EXPECT_FALSE(relay.is_open());
  EXPECT_EQ(sink.packets(), (Lines{"> first line\n", "> second line, unfinished\n"}));
}

TEST(StreamRelay, DrainWithoutClosingKeepsRelayingWhatTheGroupStillWrites) {
  Pipe p;
  PacketSink sink;
  std::vector<char> buf(64 * 1024);
  StreamRelay relay(std::move(p.read), sink.in.get(), "");
  put(p.write, "from the rank\nno newline");
  relay.drain(buf);  // the rank exited; a helper of its group holds the pipe
  EXPECT_TRUE(relay.is_open());
  EXPECT_EQ(sink.packets(), (Lines{"from the rank\n", "no newline\n"}));
  put(p.write, "from the helper\n");
  EXPECT_TRUE(relay.read_some(buf));
  EXPECT_EQ(sink.packets(), (Lines{"from the helper\n"}));
}

TEST(StreamRelay, WriteAllReportsAReaderThatWentAway) {
  struct sigaction ign {
  }, old{};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, &old);
  Pipe p;
  p.read.reset();
  EXPECT_FALSE(write_all(p.write.get(), "lost\n"));
  ::sigaction(SIGPIPE, &old, nullptr);
  Pipe q;
  EXPECT_TRUE(write_all(q.write.get(), "kept\n"));
  char got[8] = {};
  EXPECT_EQ(::read(q.read.get(), got, sizeof got), 5);
  EXPECT_STREQ(got, "kept\n");
}

}  // namespace
}  // namespace mci::launch
