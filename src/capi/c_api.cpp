// The C interface over the public C++ API: exceptions become status codes
// and a per-thread message, objects become opaque handles.
#include "mci/mci_c.h"

#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "mci/errors.hpp"
#include "mci/init.hpp"
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

mci::Work run(mci::ProcessGroup& pg, const mci_op& o) {
  const std::size_t n = static_cast<std::size_t>(pg.size());
  const auto e = o.async ? mci::Exec::async : mci::Exec::blocking;
  switch (o.kind) {
    case MCI_ALL_REDUCE:
      return pg.all_reduce(buf(o.in, o.count, o.dtype), buf(o.out, o.count, o.dtype), reduce_op(o.op), e);
    case MCI_BROADCAST: return pg.broadcast(buf(o.in, o.count, o.dtype), buf(o.out, o.count, o.dtype), o.root, e);
    case MCI_REDUCE:
      return pg.reduce(buf(o.in, o.count, o.dtype), buf(o.out, o.count, o.dtype), o.root, reduce_op(o.op), e);
    case MCI_ALL_GATHER: return pg.all_gather(buf(o.in, o.count, o.dtype), buf(o.out, n * o.count, o.dtype), e);
    case MCI_GATHER: return pg.gather(buf(o.in, o.count, o.dtype), buf(o.out, n * o.count, o.dtype), o.root, e);
    case MCI_SCATTER: return pg.scatter(buf(o.in, n * o.count, o.dtype), buf(o.out, o.count, o.dtype), o.root, e);
    case MCI_REDUCE_SCATTER:
      return pg.reduce_scatter(buf(o.in, n * o.count, o.dtype), buf(o.out, o.count, o.dtype), reduce_op(o.op), e);
    case MCI_ALL_TO_ALL: return pg.all_to_all(buf(o.in, n * o.count, o.dtype), buf(o.out, n * o.count, o.dtype), e);
    case MCI_BARRIER: return pg.barrier(e);
    case MCI_SEND: return pg.send(buf(o.in, o.count, o.dtype), o.peer, o.tag, e);
    case MCI_RECV: return pg.recv(buf(o.out, o.count, o.dtype), o.peer, o.tag, e);
    default: throw mci::ConfigError("mci_op.kind " + std::to_string(o.kind) + " is not an mci_op_kind");
  }
}

}  // namespace

extern "C" {

const char* mci_last_error(void) { return last_error().c_str(); }

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
