// labo: the lab of the course "PyTorch distribué et NCCL" (labo.py) in C++
// on mci. Same environment variables, same printed lines, same exits:
//
//   mcirun --nproc_per_node=2 ./labo
//
// MCI_BACKEND   absent or gloo: the Gloo library, host memory (even with a
//               GPU); cpu: mci's own engine; nccl: NCCL on GPU LOCAL_RANK.
// MCI_TIMEOUT_S group timeout in seconds (default 20).
// MCI_SKIP_RANK this rank skips the all-reduce (prints "saute N" and sleeps
//               past the timeout): the hang the lab teaches to recognise.
//
// Uses only mci's public API.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "linear.hpp"
#include "mci/mci.hpp"

namespace {

// labo.py raises SystemExit(message): the message on stderr, exit code 1.
struct SystemExit {
  std::string message;
};

// print(..., flush=True): the whole line in one write, so a hang cannot keep
// it in a buffer and two ranks cannot split it.
void say(const std::string& line) {
  const std::string s = line + "\n";
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
}

int env_int(const char* name, int fallback) {
  auto v = env(name);
  if (!v) return fallback;
  try {
    std::size_t used = 0;
    int x = std::stoi(*v, &used);
    if (used == v->size()) return x;
  } catch (...) {
  }
  throw SystemExit{fmt::format("{}={} n'est pas un entier.", name, *v)};
}

// Python's repr of a float: shortest round trip, and "3.0" rather than "3".
std::string py_float(double x) {
  std::string s = fmt::format("{}", x);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string py_list(const std::vector<float>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + py_float(v[i]);
  return s + "]";
}

struct Choice {
  mci::Device device;
  std::string backend;
};

// choose_device() of labo.py: the laptop path (Gloo, host memory) unless
// MCI_BACKEND names a backend on GPU memory (nccl) and a GPU is visible.
// The backend's row says where its buffers live.
Choice choose_device() {
  std::string wanted = env("MCI_BACKEND").value_or("gloo");
  auto info = mci::find_backend_info(wanted);
  if (!info) {
    std::string names;
    for (const auto& b : mci::list_backends()) names += (names.empty() ? "" : ", ") + b.name;
    std::fprintf(stderr, "labo: MCI_BACKEND=%s is not one of %s; using gloo\n", wanted.c_str(), names.c_str());
    wanted = "gloo";
    info = mci::find_backend_info(wanted);
  }
  if (info->caps.host_memory) return {mci::Device::cpu(), wanted};
  const std::string needs_gpu = "MCI_BACKEND=" + wanted + " demande un GPU visible.";
  if (!info->built) {
    throw SystemExit{needs_gpu + "\n(this build of mci has no " + wanted + " backend: rebuild it with " + info->needs +
                     ", or run with MCI_BACKEND=gloo or cpu)"};
  }
  if (mci::visible_gpu_count() == 0) throw SystemExit{needs_gpu};
  const int local_rank = env_int("LOCAL_RANK", 0);
  return {mci::Device::cuda(local_rank), wanted};
}

int run() {
  const Choice choice = choose_device();
  const int timeout_s = env_int("MCI_TIMEOUT_S", 20);
  mci::InitOptions opts;
  opts.backend = choice.backend;
  opts.timeout = std::chrono::seconds(timeout_s);
  std::shared_ptr<mci::ProcessGroup> pg = mci::init_process_group(opts);

  // As labo.py reads them; under a launcher that sets only its own
  // variables (bare srun, mpirun) the group found them there.
  const int rank = env_int("RANK", pg->rank());
  const int local_rank = env_int("LOCAL_RANK", pg->local_rank());
  const int world = env_int("WORLD_SIZE", pg->size());
  if (pg->rank() != rank || pg->size() != world) throw SystemExit{"RANK ou WORLD_SIZE diverge du process group."};
  say(fmt::format("RANK={} LOCAL_RANK={} WORLD_SIZE={} backend={}", rank, local_rank, world, choice.backend));
  if (world != 2) throw SystemExit{"Ce laboratoire attend WORLD_SIZE=2."};

  labo::DeviceVector local(choice.device, rank == 0 ? std::vector<float>{1.0f, 3.0f} : std::vector<float>{5.0f, 7.0f});
  labo::DeviceVector reduced = local;
  const auto skip_raw = env("MCI_SKIP_RANK");
  const bool skipping = skip_raw && rank == env_int("MCI_SKIP_RANK", -1);
  if (skipping) {
    say(fmt::format("saute {}", rank));
    std::this_thread::sleep_for(std::chrono::seconds(timeout_s + 5));
  } else {
    say(fmt::format("entre {}", rank));
    pg->all_reduce(reduced.view(), mci::ReduceOp::sum);
    say(fmt::format("sort {}", rank));
    std::vector<float> mean = reduced.to_host();
    for (float& x : mean) x /= static_cast<float>(world);
    say(fmt::format("moyenne {} {}", rank, py_list(mean)));
  }

  if (!skip_raw) {
    labo::Linear model(choice.device, {1.0f, 1.0f});  // Linear(2, 1, bias=False), weight [[1, 1]]
    mci::DistributedDataParallel ddp(pg, model.parameters());
    const std::vector<float> row = rank == 0 ? std::vector<float>{1.0f, 0.0f} : std::vector<float>{0.0f, 3.0f};
    const float loss = model.forward(row);  // the sum of the single output
    (void)loss;
    model.backward(row, [&](std::size_t param) { ddp.grad_ready(param); });
    ddp.finish_gradient_sync();
    say(fmt::format("gradient {} [{}]", rank, py_list(model.grad_to_host())));

    labo::DeviceVector probe(choice.device, std::vector<float>(8, 1.0f));
    const double elapsed_ms = mci::time_ms(*pg, choice.device, [&] { pg->all_reduce(probe.view()); });
    if (rank == 0) say(fmt::format("all_reduce_ms {:.3f}", elapsed_ms));
  }
  pg.reset();  // destroy_process_group()
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const SystemExit& e) {
    std::fprintf(stderr, "%s\n", e.message.c_str());
    return 1;
  } catch (const mci::TimeoutError& e) {
    std::fprintf(stderr, "labo: TimeoutError: %s\n", e.what());
  } catch (const mci::PeerError& e) {
    std::fprintf(stderr, "labo: PeerError: %s\n", e.what());
  } catch (const mci::MismatchError& e) {
    std::fprintf(stderr, "labo: MismatchError: %s\n", e.what());
  } catch (const mci::ConfigError& e) {
    std::fprintf(stderr, "labo: ConfigError: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "labo: error: %s\n", e.what());
  }
  return 1;
}
