// GPU checks: they skip with a reason where no GPU is visible, so CI stays
// green on machines without one; scripts/gpu-check.sh runs them where one is.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <numeric>

#include "../../support/thread_ranks.hpp"
#include "mci/mci.hpp"

namespace mci {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (visible_gpu_count() == 0) GTEST_SKIP() << "no GPU visible to this process (CUDA)"
#define SKIP_WITHOUT_NCCL() \
  SKIP_WITHOUT_GPU();       \
  if (!backend_available("nccl")) GTEST_SKIP() << "this build has no NCCL"

// Runs body on an NCCL group of one rank (one GPU holds no bigger group).
void on_nccl_world_of_one(const std::function<void(std::shared_ptr<ProcessGroup>)>& body) {
  const auto errors = test::run_ranks(1, body, "nccl");
  EXPECT_EQ(errors[0], "");
}

template <class T>
struct DeviceArray {
  T* p = nullptr;
  std::size_t n = 0;
  explicit DeviceArray(const std::vector<T>& host) : n(host.size()) {
    EXPECT_EQ(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)), cudaSuccess);
    if (n) cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceArray() { cudaFree(p); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    if (n) cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
  BufferView view(int device = 0) { return BufferView{p, n, dtype_of<T>::value, Device::cuda(device)}; }
};

TEST(Gpu, NcclWorldOfOneRunsEveryCollectiveOnDeviceMemory) {
  SKIP_WITHOUT_NCCL();
  on_nccl_world_of_one([](std::shared_ptr<ProcessGroup> pg) {
    std::vector<float> h(1000);
    std::iota(h.begin(), h.end(), 1.0f);
    DeviceArray<float> a(h), b(std::vector<float>(1000, 0.0f));
    pg->all_reduce(a.view(), ReduceOp::sum);
    EXPECT_EQ(a.host(), h);
    pg->all_reduce(a.view(), b.view(), ReduceOp::avg);
    EXPECT_EQ(b.host(), h);
    pg->broadcast(a.view(), 0);
    pg->all_gather(a.view(), b.view());
    EXPECT_EQ(b.host(), h);
    pg->reduce_scatter(a.view(), b.view(), ReduceOp::max);
    pg->all_to_all(a.view(), b.view());
    EXPECT_EQ(b.host(), h);
    pg->gather(a.view(), b.view(), 0);
    pg->scatter(a.view(), b.view(), 0);
    pg->barrier();
    const double ms = time_ms(*pg, Device::cuda(0), [&] { pg->all_reduce(a.view()); });
    EXPECT_GT(ms, 0.0);
    // Host memory is refused with a message that says what to do.
    std::vector<float> host(4);
    try {
      pg->all_reduce(view(host));
      ADD_FAILURE() << "host memory accepted by nccl";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("works on GPU memory"), std::string::npos);
    }
  });
}

TEST(Gpu, CpuBackendStagesDeviceBuffersForSeveralRanksOnOneGpu) {
  SKIP_WITHOUT_GPU();
  auto errors = test::run_ranks(2, [](std::shared_ptr<ProcessGroup> pg) {
    cudaSetDevice(0);
    const int r = pg->rank();
    DeviceArray<float> a(std::vector<float>(4096, static_cast<float>(r + 1)));
    pg->all_reduce(a.view(), ReduceOp::sum);
    for (float x : a.host()) ASSERT_EQ(x, 3.0f);
    DeviceArray<float> in(std::vector<float>(8, static_cast<float>(r))), out(std::vector<float>(16, -1.0f));
    pg->all_gather(in.view(), out.view());
    const auto got = out.host();
    for (int i = 0; i < 16; ++i) ASSERT_EQ(got[i], static_cast<float>(i / 8));
    const double ms = time_ms(*pg, Device::cpu(), [&] { pg->all_reduce(a.view()); });
    EXPECT_GE(ms, 0.0);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

// n elements of dtype t holding small integers (exact in every dtype).
std::vector<std::uint8_t> small_integers(DType t, std::size_t n) {
  std::vector<std::uint8_t> b(n * dtype_size(t));
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<int>(i % 61);
    void* at = b.data() + i * dtype_size(t);
    auto put = [&](auto x) { std::memcpy(at, &x, sizeof x); };
    switch (t) {
      case DType::f32: put(static_cast<float>(v)); break;
      case DType::f64: put(static_cast<double>(v)); break;
      case DType::f16: put(to_half(static_cast<float>(v))); break;
      case DType::bf16: put(to_bfloat16(static_cast<float>(v))); break;
      case DType::i8: put(static_cast<std::int8_t>(v)); break;
      case DType::u8: put(static_cast<std::uint8_t>(v)); break;
      case DType::i32: put(static_cast<std::int32_t>(v)); break;
      case DType::i64: put(static_cast<std::int64_t>(v)); break;
    }
  }
  return b;
}

TEST(Gpu, NcclEveryDtypeAndOpOutOfPlace) {
  SKIP_WITHOUT_NCCL();
  on_nccl_world_of_one([](std::shared_ptr<ProcessGroup> pg) {
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
        const std::size_t n = 1001;
        const auto h = small_integers(t, n);
        DeviceArray<std::uint8_t> in(h), out(std::vector<std::uint8_t>(h.size(), 0xEE));
        pg->all_reduce(BufferView{in.p, n, t, Device::cuda(0)}, BufferView{out.p, n, t, Device::cuda(0)}, op);
        EXPECT_EQ(out.host(), h) << dtype_name(t) << " " << reduce_op_name(op);
        EXPECT_EQ(in.host(), h) << "input changed: " << dtype_name(t);
      }
    }
  });
}

// The group's stream is ordered after the legacy default stream: a buffer
// filled there by an asynchronous memset is reduced as filled.
TEST(Gpu, NcclIsOrderedAfterTheDefaultStream) {
  SKIP_WITHOUT_NCCL();
  on_nccl_world_of_one([](std::shared_ptr<ProcessGroup> pg) {
    const std::size_t n = std::size_t{64} << 20;  // 256 MiB: the memset takes a while
    DeviceArray<float> a(std::vector<float>(n, 1.0f)), b(std::vector<float>(n, 2.0f));
    ASSERT_EQ(cudaMemsetAsync(a.p, 0, n * sizeof(float), nullptr), cudaSuccess);
    pg->all_reduce(a.view(), b.view());
    const auto got = b.host();
    std::size_t wrong = 0;
    for (float x : got) wrong += x != 0.0f;
    EXPECT_EQ(wrong, 0u) << "NCCL read the buffer before the memset on the default stream ended";
  });
}

// Work::wait_stream orders a user's non-blocking stream after an async
// collective without the host waiting for the GPU.
TEST(Gpu, NcclAsyncWorkOrdersAUserStream) {
  SKIP_WITHOUT_NCCL();
  on_nccl_world_of_one([](std::shared_ptr<ProcessGroup> pg) {
    const std::size_t n = std::size_t{64} << 20;
    std::vector<float> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<float>(i % 1000);
    DeviceArray<float> a(h), b(std::vector<float>(n, -1.0f));
    cudaStream_t user{};
    ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
    float* pinned = nullptr;
    ASSERT_EQ(cudaMallocHost(&pinned, n * sizeof(float)), cudaSuccess);
    for (int round = 0; round < 3; ++round) {
      Work w = pg->all_reduce(a.view(), b.view(), ReduceOp::sum, Exec::async);
      w.wait_stream(user);
      ASSERT_EQ(cudaMemcpyAsync(pinned, b.p, n * sizeof(float), cudaMemcpyDeviceToHost, user), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(user), cudaSuccess);
      EXPECT_EQ(std::memcmp(pinned, h.data(), n * sizeof(float)), 0) << "round " << round;
      w.wait();
      EXPECT_TRUE(w.is_success());
      ASSERT_EQ(cudaMemset(b.p, 0xFF, n * sizeof(float)), cudaSuccess);
    }
    // A finished operation and host work return at once.
    Work done = pg->barrier();
    done.wait_stream(user);
    cudaFreeHost(pinned);
    cudaStreamDestroy(user);
  });
}

// The nccl backend times each collective on the GPU, between CUDA events
// around it on the group's stream: one queued behind a long memset on the
// default stream waits for it on the host, and its duration leaves it out
// (blocking and async calls alike).
TEST(Gpu, NcclTimesTheCollectiveOnTheGpuNotTheWorkQueuedBeforeIt) {
  SKIP_WITHOUT_NCCL();
  on_nccl_world_of_one([](std::shared_ptr<ProcessGroup> pg) {
    const std::size_t big = std::size_t{4} << 30;  // 4 GiB: about a millisecond of memset on a recent GPU
    void* fill = nullptr;
    ASSERT_EQ(cudaMalloc(&fill, big), cudaSuccess);
    DeviceArray<float> small(std::vector<float>(2, 1.0f));
    for (Exec e : {Exec::blocking, Exec::async}) {
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_EQ(cudaMemsetAsync(fill, 0, big, nullptr), cudaSuccess);
      Work w = pg->all_reduce(small.view(), ReduceOp::sum, e);
      w.wait();
      const auto host = std::chrono::steady_clock::now() - t0;
      const char* how = e == Exec::blocking ? "blocking" : "async";
      EXPECT_GT(w.duration().count(), 0) << how;
      // The host waited for the memset; the GPU's time for 8 bytes in a
      // world of one is microseconds.
      EXPECT_LT(w.duration() * 4, host) << how << ": GPU time " << w.duration().count() << " ns, host window "
                                        << std::chrono::nanoseconds(host).count() << " ns";
    }
    cudaFree(fill);
  });
}

TEST(Gpu, NcclTwoRanksOnOneGpuAreRefusedWithAClearMessage) {
  SKIP_WITHOUT_NCCL();
  // Both ranks take GPU 0 (InitOptions::device).
  auto errors = test::run_ranks(
      2, [](std::shared_ptr<ProcessGroup>) {}, "nccl", std::chrono::seconds(20), [](InitOptions& o) { o.device = 0; });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("ranks 0 and 1 both use GPU 0"), std::string::npos) << e;
    EXPECT_NE(e.find("backend 'cpu'"), std::string::npos) << e;
  }
}

TEST(Gpu, NcclRankWithoutItsGpuStopsTheOthersAtOnce) {
  SKIP_WITHOUT_NCCL();
  const int missing = visible_gpu_count();  // one past the last GPU
  auto errors = test::run_ranks(
      2, [](std::shared_ptr<ProcessGroup>) {}, "nccl", std::chrono::seconds(60),
      [missing](InitOptions& o) { o.device = o.rank == 1 ? missing : 0; });
  EXPECT_NE(errors[1].find(fmt::format("would use GPU {} (InitOptions::device)", missing)), std::string::npos)
      << errors[1];
  EXPECT_NE(errors[0].find("rank 1 could not join the nccl group"), std::string::npos) << errors[0];
  // Not by the group timeout: rank 0 never entered NCCL.
  EXPECT_EQ(errors[0].find("Timed out"), std::string::npos) << errors[0];
}

TEST(Gpu, DeviceCountMatchesCuda) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  EXPECT_EQ(visible_gpu_count(), n);
}

}  // namespace
}  // namespace mci

namespace mci {
namespace {

TEST(DeviceMemoryTest, HostMemoryRoundTripsAndDeviceMemoryNeedsAGpu) {
  DeviceMemory host(Device::cpu(), 16);
  const float in[4] = {1, 2, 3, 4};
  float out[4] = {};
  host.copy_from_host(in, sizeof in);
  host.copy_to_host(out, sizeof out);
  EXPECT_EQ(out[3], 4.0f);
  EXPECT_THROW(host.copy_to_host(out, 32), ConfigError);
  if (visible_gpu_count() == 0) {
    try {
      DeviceMemory d(Device::cuda(0), 16);
      ADD_FAILURE() << "device memory without a GPU";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("sees 0 GPU(s)"), std::string::npos) << e.what();
    }
    return;
  }
  DeviceMemory d(Device::cuda(0), 16);
  d.copy_from_host(in, sizeof in);
  std::fill(out, out + 4, 0.0f);
  d.copy_to_host(out, sizeof out);
  EXPECT_EQ(out[2], 3.0f);
}

}  // namespace
}  // namespace mci
