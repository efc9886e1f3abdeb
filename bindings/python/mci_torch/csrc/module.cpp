// mci_torch._C: the backend "mci" for torch 2.x (mci_torch/_ext.py
// registers it). Built against one torch; __init__.py checks that the torch
// it runs under is that one (TORCH_VERSION) before using it.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <pybind11/stl.h>

#include "backend.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "torch_store.hpp"

#ifndef MCI_TORCH_EXT_TORCH_VERSION
#error "the build defines MCI_TORCH_EXT_TORCH_VERSION (the torch this is built for)"
#endif

namespace py = pybind11;

namespace {

// mci's errors as mci_torch's exceptions (RuntimeErrors), with mci's text.
void install_error_translator() {
  // Kept for the life of the process: the translator runs until it ends.
  static auto* errors = new py::object(py::module_::import("mci_torch.errors"));
  py::register_exception_translator([](std::exception_ptr p) {
    const auto raise = [](const char* name, const char* text) { PyErr_SetString(errors->attr(name).ptr(), text); };
    try {
      if (p) std::rethrow_exception(p);
    } catch (const mci::ConfigError& e) {
      raise("ConfigError", e.what());
    } catch (const mci::TimeoutError& e) {
      raise("TimeoutError", e.what());
    } catch (const mci::PeerError& e) {
      raise("PeerError", e.what());
    } catch (const mci::MismatchError& e) {
      raise("MismatchError", e.what());
    } catch (const mci::Error& e) {
      raise("MciError", e.what());
    }
  });
}

// The backends of this process, for closing them at exit: held weakly, so a
// group torch destroys goes away as usual. Process-wide like the atexit
// list that calls close_all (a Python wrapper cannot hold them: torch keeps
// the C++ object, and the wrapper new_backend returns is soon collected).
class LiveBackends {
 public:
  void add(const c10::intrusive_ptr<mci_torch::BackendMCI>& b) {
    std::lock_guard lock(mu_);
    std::erase_if(backends_, [](const auto& w) { return w.expired(); });
    backends_.emplace_back(b);
  }
  void close_all() {
    std::vector<c10::intrusive_ptr<mci_torch::BackendMCI>> alive;
    {
      std::lock_guard lock(mu_);
      for (auto& w : backends_) {
        if (auto b = w.lock()) alive.push_back(std::move(b));
      }
      backends_.clear();
    }
    for (auto& b : alive) b->close_at_exit();
  }

 private:
  std::mutex mu_;
  std::vector<c10::weak_intrusive_ptr<mci_torch::BackendMCI>> backends_;
};

LiveBackends& live_backends() {
  static LiveBackends live;
  return live;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "mci_torch's C++ backend (c10d::Backend) for torch " MCI_TORCH_EXT_TORCH_VERSION;
  m.attr("TORCH_VERSION") = MCI_TORCH_EXT_TORCH_VERSION;
  install_error_translator();

  py::class_<mci::StoreServer, std::shared_ptr<mci::StoreServer>>(m, "StoreServer")
      .def(py::init([](const std::string& host, const std::string& token) {
             mci::StoreServerOptions o;
             o.host = host;
             o.token = token;
             return std::make_shared<mci::StoreServer>(o);
           }),
           py::arg("host"), py::arg("token"))
      .def_property_readonly("port", &mci::StoreServer::port);

  m.def(
      "torch_store",
      [](const std::string& host, int port, const std::string& token, const std::string& prefix,
         int64_t timeout_ms) -> c10::intrusive_ptr<c10d::Store> {
        mci::StoreAddress a;
        a.host = host;
        a.port = port;
        a.token = token;
        return c10::make_intrusive<mci_torch::TorchStoreOverMci>(a, prefix, std::chrono::milliseconds(timeout_ms));
      },
      py::arg("host"), py::arg("port"), py::arg("token"), py::arg("prefix"), py::arg("timeout_ms"),
      py::call_guard<py::gil_scoped_release>(),
      "torch's store (a torch.distributed.Store) over mci's store at host:port, its keys under prefix: what "
      "env:// meets on when mcirun keeps the job's store on etcd (MCI_TORCH_STORE=mci).");

  m.def(
      "close_at_exit", [] { live_backends().close_all(); }, py::call_guard<py::gil_scoped_release>(),
      "Aborts the running operations of every mci backend of this process and closes them (the interpreter is "
      "exiting).");

  m.def(
      "agree_lost",
      [](const c10::intrusive_ptr<c10d::Backend>& backend) {
        auto* mine = dynamic_cast<mci_torch::BackendMCI*>(backend.get());
        if (!mine) throw mci::ConfigError("agree_lost: this group's CPU backend is not mci's");
        return mine->agree_lost();
      },
      py::arg("backend"), py::call_guard<py::gil_scoped_release>(),
      "The survivors of an mci group agree on its lost ranks and form their group (handed to torch's "
      "shrink_group next); returns the lost ranks.");

  m.def(
      "new_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeout_ms, const std::string& host,
         int port, const std::string& token, std::shared_ptr<mci::StoreServer> server, const std::string& engine,
         const std::string& group_name, const std::map<std::string, std::string>& settings, bool enable_reconfigure,
         const std::string& advertise, const std::vector<int>& global_ranks) -> c10::intrusive_ptr<c10d::Backend> {
        mci_torch::BackendConfig c;
        c.enable_reconfigure = enable_reconfigure;
        c.advertise = advertise;
        c.torch_store = store;
        c.rank = rank;
        c.size = size;
        c.timeout = std::chrono::milliseconds(timeout_ms);
        c.host = host;
        c.port = port;
        c.token = token;
        c.server = std::move(server);
        c.engine = engine;
        c.group_name = group_name;
        c.settings = settings;
        c.global_ranks = global_ranks;
        // A split group keeps this group's engine and settings (pg_options).
        c.make_group = [engine, settings](const c10::intrusive_ptr<c10d::Store>& group_store, int group_rank,
                                          int group_size, std::chrono::milliseconds timeout) {
          py::gil_scoped_acquire gil;
          py::object made = py::module_::import("mci_torch._ext")
                                .attr("create_backend")(group_store, group_rank, group_size, timeout, engine, settings);
          return made.cast<c10::intrusive_ptr<c10d::Backend>>();
        };
        c.track = [](const c10::intrusive_ptr<c10d::Backend>& b) {
          live_backends().add(c10::dynamic_intrusive_pointer_cast<mci_torch::BackendMCI>(b));
        };
        auto backend = c10::make_intrusive<mci_torch::BackendMCI>(std::move(c));
        live_backends().add(backend);
        return backend;
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"), py::arg("host"), py::arg("port"),
      py::arg("token"), py::arg("server"), py::arg("engine"), py::arg("group_name"), py::arg("settings"),
      py::arg("enable_reconfigure") = false, py::arg("advertise") = "127.0.0.1",
      py::arg("global_ranks") = std::vector<int>{}, py::call_guard<py::gil_scoped_release>(),
      "Joins the mci group whose store is at host:port; the torch Backend over it.");

  m.def(
      "dump_flight_recorder",
      [](const c10::intrusive_ptr<c10d::Backend>& backend, const std::string& prefix) {
        auto* mine = dynamic_cast<mci_torch::BackendMCI*>(backend.get());
        if (!mine) throw mci::ConfigError("dump_flight_recorder: this group's CPU backend is not mci's");
        return mine->dump_flight_recorder(prefix);
      },
      py::arg("backend"), py::arg("prefix") = "", py::call_guard<py::gil_scoped_release>(),
      "Writes every mci group of this process in torch's flight-recorder format to <prefix><global rank> "
      "(empty prefix: MCI_FR_DUMP_DIR's, else TORCH_FR_DUMP_TEMP_FILE); returns the path.");
}
