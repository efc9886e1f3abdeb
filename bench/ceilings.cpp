// The physical limits mci-perf's numbers are read against, on this machine:
// how fast one core copies memory (a shared-memory transport copies every
// byte at least into and out of the segment), and how fast loopback TCP
// moves bytes and answers a ping (what the tcp transport rides on).
// Google Benchmark prints bytes_per_second in binary units (1 G/s = 2^30
// B/s); docs/performance.md converts to the 1e9-based GB/s of mci-perf.
//
//   build/bin/bench_ceilings
//   build/bin/bench_ceilings --benchmark_filter=Memcpy
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <utility>

namespace {

struct AlignedFree {
  void operator()(void* p) const noexcept { std::free(p); }
};
using Buffer = std::unique_ptr<char, AlignedFree>;

Buffer make_buffer(std::size_t n) {
  auto* p = static_cast<char*>(std::aligned_alloc(64, (n + 63) / 64 * 64));
  if (!p) throw std::bad_alloc();
  std::memset(p, 1, n);  // fault the pages in before timing
  return Buffer(p);
}

// One core copying a buffer.
void BM_Memcpy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Buffer src = make_buffer(n), dst = make_buffer(n);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), n);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Memcpy)->RangeMultiplier(8)->Range(4 << 10, 64 << 20);

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// A connected loopback TCP pair with Nagle off, as mci's tcp transport has.
std::pair<Fd, Fd> tcp_pair() {
  Fd l(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(l.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(l.get(), 1) != 0 ||
      ::getsockname(l.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("loopback listen failed");
  }
  Fd c(::socket(AF_INET, SOCK_STREAM, 0));
  if (::connect(c.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) throw std::runtime_error("connect failed");
  Fd s(::accept(l.get(), nullptr, nullptr));
  const int one = 1;
  ::setsockopt(c.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return {std::move(c), std::move(s)};
}

bool send_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool recv_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// One direction, a sender thread streaming while this thread receives: the
// bandwidth a tcp transport could reach between two ranks of this host.
void BM_LoopbackTcpStream(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto [tx, rx] = tcp_pair();
  Buffer out = make_buffer(n), in = make_buffer(n);
  std::thread sender([fd = tx.get(), p = out.get(), n] {
    while (send_all(fd, p, n)) {
    }
  });
  for (auto _ : state) {
    if (!recv_all(rx.get(), in.get(), n)) state.SkipWithError("recv failed");
  }
  // Closing the receiving end makes the sender's next send fail.
  ::shutdown(rx.get(), SHUT_RDWR);
  ::shutdown(tx.get(), SHUT_RDWR);
  sender.join();
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_LoopbackTcpStream)->RangeMultiplier(8)->Range(4 << 10, 16 << 20)->UseRealTime();

// Ping-pong of n bytes: half the round trip is the one-way latency a small
// tcp collective pays per step.
void BM_LoopbackTcpPingPong(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto [a, b] = tcp_pair();
  Buffer pa = make_buffer(n), pb = make_buffer(n);
  std::thread echo([fd = b.get(), p = pb.get(), n] {
    while (recv_all(fd, p, n) && send_all(fd, p, n)) {
    }
  });
  for (auto _ : state) {
    if (!send_all(a.get(), pa.get(), n) || !recv_all(a.get(), pa.get(), n)) state.SkipWithError("ping failed");
  }
  ::shutdown(a.get(), SHUT_RDWR);
  echo.join();
  state.counters["one_way_us"] = benchmark::Counter(static_cast<double>(state.iterations()) * 2,
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_LoopbackTcpPingPong)->Arg(8)->Arg(4096)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
