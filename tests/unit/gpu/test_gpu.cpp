// GPU checks: they skip with a reason where no GPU is visible, so CI stays
// green on machines without one; scripts/gpu-check.sh runs them where one is.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <numeric>

#include "../../support/thread_ranks.hpp"
#include "mci/mci.hpp"

namespace mci {
namespace {

#define SKIP_WITHOUT_GPU()                                                              \
  if (visible_gpu_count() == 0) GTEST_SKIP() << "no GPU visible to this process (CUDA)"

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
  SKIP_WITHOUT_GPU();
  if (!backend_available("nccl")) GTEST_SKIP() << "this build has no NCCL";
  auto errors = test::run_ranks(
      1,
      [](std::shared_ptr<ProcessGroup> pg) {
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
      },
      "nccl");
  EXPECT_EQ(errors[0], "");
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
