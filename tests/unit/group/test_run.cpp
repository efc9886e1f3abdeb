// ProcessGroup::run: any kind from its row gives what its named call gives.
#include <gtest/gtest.h>

#include <vector>

#include "mci/mci.hpp"
#include "support/thread_ranks.hpp"

namespace mci {
namespace {

constexpr std::size_t kCount = 6;  // elements per block

std::size_t extent(BufferExtent e, int size) {
  return e == BufferExtent::none ? 0 : e == BufferExtent::per_rank ? kCount * static_cast<std::size_t>(size) : kCount;
}

// The named call of a collective kind, for comparison.
Work named(ProcessGroup& pg, OpKind k, BufferView in, BufferView out) {
  switch (k) {
    case OpKind::all_reduce: return pg.all_reduce(in, out, ReduceOp::max);
    case OpKind::broadcast: return pg.broadcast(in, out, 1);
    case OpKind::reduce: return pg.reduce(in, out, 1, ReduceOp::max);
    case OpKind::all_gather: return pg.all_gather(in, out);
    case OpKind::gather: return pg.gather(in, out, 1);
    case OpKind::scatter: return pg.scatter(in, out, 1);
    case OpKind::reduce_scatter: return pg.reduce_scatter(in, out, ReduceOp::max);
    case OpKind::all_to_all: return pg.all_to_all(in, out);
    case OpKind::barrier: return pg.barrier();
    default: break;
  }
  ADD_FAILURE() << op_name(k) << ": give this test its named call";
  return Work();
}

TEST(ProcessGroupRun, EveryCollectiveKindGivesWhatItsNamedCallGives) {
  auto errors = test::run_ranks(3, [](std::shared_ptr<ProcessGroup> pg) {
    for (OpKind k : kAllOpKinds) {
      const OpShape& s = op_shape(k);
      if (s.p2p) continue;
      const int size = pg->size();
      std::vector<float> in(extent(s.in, size));
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(100 * pg->rank() + i);
      std::vector<float> by_run(extent(s.out, size), -1.0f), by_name(by_run.size(), -1.0f);
      auto v = [](std::vector<float>& b) { return b.empty() ? BufferView{} : view(b); };
      pg->run(OpCall{.kind = k, .in = v(in), .out = v(by_run), .op = ReduceOp::max, .root = s.rooted ? 1 : -1},
              Exec::async)
          .wait();
      named(*pg, k, v(in), v(by_name)).wait();
      EXPECT_EQ(by_run, by_name) << op_name(k) << " on rank " << pg->rank();
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(ProcessGroupRun, SendAndRecvRunFromTheirRows) {
  auto errors = test::run_ranks(2, [](std::shared_ptr<ProcessGroup> pg) {
    std::vector<int> data(4, pg->rank() == 0 ? 42 : 0);
    if (pg->rank() == 0) {
      pg->run(OpCall{.kind = OpKind::send, .in = view(data), .peer = 1, .tag = 7});
    } else {
      Work w = pg->run(OpCall{.kind = OpKind::recv, .out = view(data), .peer = any_source, .tag = 7});
      EXPECT_EQ(w.source(), 0);
      EXPECT_EQ(data, std::vector<int>(4, 42));
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(ProcessGroupRun, AMisuseIsTheNamedCallsConfigError) {
  auto errors = test::run_ranks(1, [](std::shared_ptr<ProcessGroup> pg) {
    std::vector<float> a(4);
    EXPECT_THROW(pg->run(OpCall{.kind = OpKind::broadcast, .in = view(a), .out = view(a), .root = 3}), ConfigError);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace mci
