// All-to-all accepts an input that overlaps its output (other collectives
// refuse it): every path must read the input before writing over it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "mci/mci.hpp"
#include "support/thread_ranks.hpp"

namespace mci {
namespace {

// Rank r sends value r*1000 + j*100 + i (element i of block j) to rank j;
// in is buf[0, n*block), out is buf[shift, shift + n*block).
void expect_all_to_all_with_overlap(int world, std::size_t block, std::size_t shift) {
  auto errors = test::run_ranks(world, [&](std::shared_ptr<ProcessGroup> pg) {
    const int n = pg->size(), r = pg->rank();
    std::vector<float> buf(block * n + shift);
    for (int j = 0; j < n; ++j) {
      for (std::size_t i = 0; i < block; ++i) buf[j * block + i] = static_cast<float>(r * 1000 + j * 100 + i % 97);
    }
    pg->all_to_all(BufferView{buf.data(), block * n, DType::f32},
                   BufferView{buf.data() + shift, block * n, DType::f32});
    for (int src = 0; src < n; ++src) {
      for (std::size_t i = 0; i < block; ++i) {
        ASSERT_EQ(buf[shift + src * block + i], static_cast<float>(src * 1000 + r * 100 + i % 97))
            << "rank " << r << " block from " << src << " element " << i;
      }
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(Overlap, AllToAllInSharedMemoryReadsItsInputBeforeOverwritingIt) {
  for (int world : {2, 3}) {
    expect_all_to_all_with_overlap(world, 1000, 1000);  // out starts at in's block 1
    expect_all_to_all_with_overlap(world, 300000, 7);   // several chunks, odd shift
  }
}

TEST(Overlap, AllToAllOverTcpReadsItsInputBeforeOverwritingIt) {
  ::setenv("MCI_TRANSPORT", "tcp", 1);
  for (int world : {2, 3}) {
    expect_all_to_all_with_overlap(world, 1000, 1000);
    expect_all_to_all_with_overlap(world, 300000, 7);
  }
  ::unsetenv("MCI_TRANSPORT");
}

}  // namespace
}  // namespace mci
