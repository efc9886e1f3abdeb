// The C interface over the public C++ API: exceptions become status codes
// and a per-thread message, objects become opaque handles.
#include "mci/mci_c.h"

#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "mci/errors.hpp"
#include "mci/init.hpp"
#include "mci/op_kind.hpp"
#include "mci/store.hpp"

struct mci_group {
  std::shared_ptr<mci::ProcessGroup> pg;
};
struct mci_work {
  mci::Work work;
};
struct mci_store_server {
  std::unique_ptr<mci::StoreServer> server;
};

namespace {

// The message of the last failure of each thread, as errno/dlerror keep
// theirs: the caller reads it right after the failing call.
std::string& last_error() {
  thread_local std::string text;
  return text;
}

int fail(int status, const char* what) {
  last_error() = what;
  return status;
}

// Runs f, turning what it throws into a status code.
template <class F>
int guarded(F&& f) {
  try {
    f();
    return MCI_OK;
  } catch (const mci::ConfigError& e) {
    return fail(MCI_ERR_CONFIG, e.what());
  } catch (const mci::TimeoutError& e) {
    return fail(MCI_ERR_TIMEOUT, e.what());
  } catch (const mci::PeerError& e) {
    return fail(MCI_ERR_PEER, e.what());
  } catch (const mci::MismatchError& e) {
    return fail(MCI_ERR_MISMATCH, e.what());
  } catch (const std::exception& e) {
    return fail(MCI_ERR_OTHER, e.what());
  } catch (...) {
    return fail(MCI_ERR_OTHER, "unknown error");
  }
}

mci::BufferView buf(void* p, std::size_t count, int dtype) {
  if (dtype < 0 || dtype >= mci::kNumDTypes) {
    throw mci::ConfigError("mci_op.dtype " + std::to_string(dtype) + " is not an mci_dtype");
  }
  return mci::BufferView{p, count, static_cast<mci::DType>(dtype), mci::Device::cpu()};
}

mci::ReduceOp reduce_op(int op) {
  if (op < MCI_SUM || op > MCI_MAX)
    throw mci::ConfigError("mci_op.op " + std::to_string(op) + " is not an mci_reduce_op");
  return static_cast<mci::ReduceOp>(op);
}

// C cannot read the list of kinds (mci/op_kind.hpp), so mci_op_kind spells
// it again, and its names come from the list (mci_op_kind_name): a kind
// added to the list without its constant fails here, and a constant out of
// the list's order fails PythonBinding.MatchesTheCHeader, which compares
// each constant's name with the name libmci gives its value.
static_assert(MCI_NUM_OP_KINDS == static_cast<int>(mci::kOpKindCount),
              "mci_op_kind (include/mci/mci_c.h) must have one constant per kind of MCI_OP_KINDS, in its order");
#undef MCI_C_KIND_MATCHES

// The buffers' lengths are the kind's row's: count, or count per rank.
mci::BufferView side(void* p, mci::BufferExtent e, std::size_t count, std::size_t ranks, int dtype) {
  if (e == mci::BufferExtent::none) return {};
  return buf(p, e == mci::BufferExtent::per_rank ? ranks * count : count, dtype);
}

mci::Work run(mci::ProcessGroup& pg, const mci_op& o) {
  if (o.kind < 0 || static_cast<std::size_t>(o.kind) >= mci::kOpKindCount) {
    throw mci::ConfigError("mci_op.kind " + std::to_string(o.kind) + " is not an mci_op_kind");
  }
  const auto kind = static_cast<mci::OpKind>(o.kind);
  const mci::OpShape& s = mci::op_shape(kind);
  const std::size_t n = static_cast<std::size_t>(pg.size());
  const mci::BufferView in = side(o.in, s.in, o.count, n, o.dtype);
  const mci::BufferView out = side(o.out, s.out, o.count, n, o.dtype);
  const auto e = o.async ? mci::Exec::async : mci::Exec::blocking;
  // Every kind from its row: the kind's own fields (root, op, peer, tag)
  // are read where its row says it has them.
  mci::OpCall call{.kind = kind, .in = in, .out = out};
  if (s.reduces) call.op = reduce_op(o.op);
  if (s.rooted) call.root = o.root;
  if (s.p2p) {
    call.peer = o.peer;
    call.tag = o.tag;
  }
  return pg.run(call, e);
}

}  // namespace

extern "C" {

const char* mci_last_error(void) { return last_error().c_str(); }

const char* mci_op_kind_name(int kind) {
  // The rows' names are literals: their data ends in a NUL.
  if (kind < 0 || static_cast<std::size_t>(kind) >= mci::kOpKindCount) return nullptr;
  return mci::op_name(static_cast<mci::OpKind>(kind)).data();
}

int mci_store_server_start(const char* bind_host, const char* token, mci_store_server** out, int* port) {
  return guarded([&] {
    auto s = std::make_unique<mci_store_server>();
    s->server = std::make_unique<mci::StoreServer>(mci::StoreServerOptions{bind_host, 0, token ? token : ""});
    *port = s->server->port();
    *out = s.release();
  });
}

void mci_store_server_free(mci_store_server* s) { std::unique_ptr<mci_store_server> owned(s); }

int mci_group_new(const char* host, int port, const char* token, int rank, int size, int64_t timeout_ms,
                  const char* backend, const char* name, const char* const* settings, mci_group** out) {
  return guarded([&] {
    mci::InitOptions o =
        mci::options_through_store(host, port, token ? token : "", rank, size, std::chrono::milliseconds(timeout_ms));
    o.backend = backend;
    o.group_name = name;
    for (const char* const* s = settings; s && *s; ++s) {
      const std::string_view entry(*s);
      const auto eq = entry.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        throw mci::ConfigError(fmt::format("setting '{}' is not NAME=VALUE (e.g. MCI_ALGO=ring)", entry));
      }
      o.settings[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
    }
    auto g = std::make_unique<mci_group>();
    g->pg = mci::init_process_group(o);
    *out = g.release();
  });
}

void mci_group_free(mci_group* g) {
  // ~ProcessGroup drains queued work; an error there has nobody to go to.
  (void)guarded([&] { std::unique_ptr<mci_group> owned(g); });
}

int mci_group_abort(mci_group* g, const char* reason) {
  return guarded([&] { g->pg->abort(reason ? reason : "aborted"); });
}

int mci_run(mci_group* g, const mci_op* op, mci_work** work) {
  if (work) *work = nullptr;
  return guarded([&] {
    mci::Work w = run(*g->pg, *op);
    if (work && op->async) *work = std::make_unique<mci_work>(mci_work{std::move(w)}).release();  // mci_work_free
  });
}

int mci_work_wait(mci_work* w) {
  return guarded([&] { w->work.wait(); });
}

int mci_work_is_completed(const mci_work* w) { return w->work.is_completed() ? 1 : 0; }

double mci_work_duration_ms(const mci_work* w) { return w->work.duration_ms(); }

void mci_work_free(mci_work* w) { std::unique_ptr<mci_work> owned(w); }

}  // extern "C"
