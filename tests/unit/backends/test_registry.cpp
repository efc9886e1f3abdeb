// The backend table: what init, the messages and list_backends() read.
#include <gtest/gtest.h>

#include <string>

#include "backends/registry.hpp"
#include "mci/errors.hpp"
#include "mci/init.hpp"

namespace mci {
namespace {

TEST(BackendTable, KnowsEveryBackendAndWhichAreBuilt) {
  const auto all = list_backends();
  ASSERT_EQ(all.size(), backend_table().size());
  EXPECT_EQ(all[0].name, "cpu");
  EXPECT_TRUE(all[0].built);
  for (const auto& b : all) {
    const BackendEntry* e = find_backend(b.name);
    ASSERT_NE(e, nullptr) << b.name;
    EXPECT_EQ(e->built, backend_available(b.name));
    EXPECT_EQ(e->built, e->make != nullptr) << b.name;
    EXPECT_FALSE(b.description.empty());
  }
  EXPECT_FALSE(backend_available("mpi-someday"));
}

// The public view of a row is the row: its needs and capabilities, built
// or not.
TEST(BackendTable, FindBackendInfoGivesEachRowsCapabilities) {
  for (const auto& e : backend_table()) {
    const auto info = find_backend_info(std::string(e.name));
    ASSERT_TRUE(info) << e.name;
    EXPECT_EQ(info->needs, e.needs);
    EXPECT_EQ(info->built, e.built);
    EXPECT_EQ(info->caps.host_memory, e.caps.host_memory) << e.name;
    EXPECT_EQ(info->caps.cuda_memory, e.caps.cuda_memory) << e.name;
    EXPECT_EQ(info->caps.gpu_per_rank, e.caps.gpu_per_rank) << e.name;
    EXPECT_EQ(info->caps.mci_algorithms, e.caps.mci_algorithms) << e.name;
    EXPECT_EQ(info->caps.fingerprints, e.caps.fingerprints) << e.name;
    EXPECT_EQ(info->caps.any_source, e.caps.any_source) << e.name;
    EXPECT_EQ(info->caps.kinds, e.caps.kinds) << e.name;
    // Every backend takes some memory.
    EXPECT_TRUE(e.caps.host_memory || e.caps.cuda_memory) << e.name;
  }
  EXPECT_FALSE(find_backend_info("mpi-someday"));
  // mci's own engine is the one that runs mci's algorithms and transports.
  EXPECT_TRUE(find_backend_info("cpu")->caps.mci_algorithms);
  EXPECT_EQ(backends_with(&BackendCaps::mci_transports), "cpu (MCI_BACKEND=cpu)");
}

// A host-memory backend given a GPU buffer names the backends that take one.
TEST(BackendTable, HostMemoryBackendsNameTheOnesThatTakeGpuMemory) {
  coll::CollectiveDesc d;
  d.kind = OpKind::all_reduce;
  d.device = Device::cuda(0);
  try {
    require_host_memory("gloo", d);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the gloo backend works on host memory, and this all_reduce buffer is on cuda:0; use a backend "
                     "that takes GPU memory: cpu (MCI_BACKEND=cpu) or nccl (MCI_BACKEND=nccl)"),
              std::string::npos)
        << m;
  }
}

TEST(BackendTable, UnknownAndUnbuiltBackendsGetMessagesFromTheTable) {
  try {
    make_backend("fast", BackendContext{});
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown backend 'fast': use cpu ("), std::string::npos) << m;
    for (const auto& b : backend_table()) EXPECT_NE(m.find(std::string(b.name) + " ("), std::string::npos) << m;
  }
  for (const auto& b : backend_table()) {
    if (b.built) continue;
    try {
      make_backend(b.name, BackendContext{});
      ADD_FAILURE() << b.name;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("is not part of this build of mci"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string(b.needs)), std::string::npos) << e.what();
    }
  }
}

TEST(BackendTable, InitRefusesAnUnknownBackendBeforeConnecting) {
  InitOptions o;
  o.backend = "fast";
  o.init_method = "tcp://127.0.0.1:1";  // never reached
  o.rank = 0;
  o.world_size = 1;
  try {
    init_process_group(o);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown backend 'fast'"), std::string::npos) << e.what();
  }
}

// A recv from any source: the cpu backend matches the first sender; the
// others name the peer, so they refuse it with what to do instead.
TEST(BackendTable, OnlyTheCpuBackendReceivesFromAnySource) {
  coll::CollectiveDesc d;
  d.kind = OpKind::recv;
  d.peer = any_source;
  EXPECT_NO_THROW(require_any_source("cpu", d));
  for (const char* name : {"gloo", "nccl", "mpi"}) {
    try {
      require_any_source(name, d);
      ADD_FAILURE() << name << " took a recv from any source";
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string("the ") + name + " backend cannot receive from any source"), std::string::npos) << m;
      EXPECT_NE(m.find("pass src=<the sending rank>, or use a backend that can: cpu (MCI_BACKEND=cpu)"),
                std::string::npos)
          << m;
    }
  }
  d.peer = 1;  // a recv naming its source is every backend's
  EXPECT_NO_THROW(require_any_source("gloo", d));
}

// Every kind of the list (mci/op_kind.hpp) is known by name and run by some
// backend; a backend whose row lacks a kind refuses it at the call, naming
// itself, the kind and the backends that run it.
TEST(BackendTable, EveryKindIsRunSomewhereAndRefusedByNameWhereNot) {
  ASSERT_EQ(kAllOpKinds.size(), kOpKindCount);
  for (OpKind k : kAllOpKinds) {
    const std::string name(op_name(k));
    EXPECT_EQ(op_kind_named(name), k) << name;
    EXPECT_NE(backends_running(k).find("cpu (MCI_BACKEND=cpu)"), std::string::npos) << name;
    for (const auto& e : backend_table()) {
      if (e.caps.kinds.contains(k)) {
        EXPECT_NO_THROW(require_kind(e, k)) << e.name << " " << name;
      }
    }
    BackendEntry lacking = backend_table()[0];
    lacking.name = "lacking";
    lacking.caps.kinds = OpKindSet::all().without(k);
    EXPECT_FALSE(lacking.caps.kinds.contains(k));
    try {
      require_kind(lacking, k);
      ADD_FAILURE() << "a row without " << name << " ran it";
    } catch (const ConfigError& err) {
      const std::string m = err.what();
      EXPECT_NE(m.find("the lacking backend does not run " + name), std::string::npos) << m;
      EXPECT_NE(m.find("use a backend that does: " + backends_running(k)), std::string::npos) << m;
    }
  }
  EXPECT_FALSE(OpKindSet{}.contains(OpKind::all_reduce));
  EXPECT_FALSE(OpKindSet::all().contains(static_cast<OpKind>(kOpKindCount)));
}

}  // namespace
}  // namespace mci
