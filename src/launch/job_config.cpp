#include "launch/job_config.hpp"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "common/env.hpp"
#include "launch/devices.hpp"
#include "launch/scheduler.hpp"

namespace mci::launch {

namespace {

constexpr int kMaxProcesses = 1 << 20;

int parse_count(const std::string& flag, const std::string& value, int min, const std::string& what) {
  auto n = parse_int(value);
  if (!n || *n < min || *n > kMaxProcesses) {
    throw UsageError(fmt::format("--{}='{}' is not valid: use {}", flag, value, what));
  }
  return static_cast<int>(*n);
}

int parse_port(const std::string& flag, const std::string& value) {
  auto n = parse_int(value);
  if (!n || *n < 1 || *n > 65535) {
    throw UsageError(
        fmt::format("--{}='{}' is not a TCP port: use a number from 1 to 65535 (or "
                    "--standalone to let mcirun pick a free one)",
                    flag, value));
  }
  return static_cast<int>(*n);
}

// --nnodes=N, or torchrun's elastic MIN:MAX when both are the same.
int parse_nnodes(const std::string& value) {
  const auto colon = value.find(':');
  if (colon == std::string::npos) return parse_count("nnodes", value, 1, "a number of nodes, 1 or more");
  auto lo = parse_int(value.substr(0, colon));
  auto hi = parse_int(value.substr(colon + 1));
  if (lo && hi && *lo == *hi) return parse_count("nnodes", value.substr(0, colon), 1, "1 or more nodes");
  throw UsageError(
      fmt::format("--nnodes='{}': mcirun runs a fixed number of nodes, not an elastic "
                  "range; give one number (e.g. --nnodes=2)",
                  value));
}

std::chrono::milliseconds parse_grace(const std::string& value) {
  char* end = nullptr;
  const double s = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(s) || s < 0 || s > 86400) {
    throw UsageError(
        fmt::format("--grace='{}' is not valid: give the seconds between SIGTERM and "
                    "SIGKILL, e.g. --grace=3 or --grace=0.5",
                    value));
  }
  return std::chrono::milliseconds(static_cast<long long>(std::llround(s * 1000)));
}

}  // namespace

int resolve_nproc(const std::string& spec, const EnvLookup& env, const std::string& dev_dir) {
  if (spec == "cpu") return usable_cpus();
  if (spec == "gpu" || spec == "auto") {
    const int gpus = visible_gpus(env, dev_dir);
    if (gpus > 0) return gpus;
    if (spec == "auto") return usable_cpus();
    const auto cvd = env("CUDA_VISIBLE_DEVICES");
    throw ConfigError(fmt::format("--nproc_per_node=gpu: no GPU is visible ({}); give a number of processes, or cpu",
                                  cvd ? fmt::format("CUDA_VISIBLE_DEVICES='{}'", *cvd)
                                      : fmt::format("no {}/nvidiaN device", dev_dir)));
  }
  return parse_count("nproc_per_node", spec, 1, "a number of processes (1 or more), or cpu, gpu or auto");
}

std::pair<std::string, int> parse_endpoint(const std::string& endpoint, int default_port) {
  std::string host = endpoint;
  std::string port;
  if (!endpoint.empty() && endpoint.front() == '[') {
    const auto close = endpoint.find(']');
    if (close == std::string::npos) {
      throw UsageError(fmt::format("--rdzv_endpoint='{}': missing ']' after the IPv6 address", endpoint));
    }
    host = endpoint.substr(1, close - 1);
    const std::string rest = endpoint.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      throw UsageError(fmt::format("--rdzv_endpoint='{}': expected ':PORT' after ']'", endpoint));
    }
    if (!rest.empty()) port = rest.substr(1);
  } else if (const auto colon = endpoint.rfind(':'); colon != std::string::npos) {
    if (endpoint.find(':') != colon) {
      throw UsageError(
          fmt::format("--rdzv_endpoint='{}': write an IPv6 address in brackets, "
                      "e.g. [::1]:29400",
                      endpoint));
    }
    host = endpoint.substr(0, colon);
    port = endpoint.substr(colon + 1);
    if (port.empty()) port.push_back('-');  // "host:" is a typo, not a request for the default
  }
  if (host.empty()) {
    throw UsageError(fmt::format("--rdzv_endpoint='{}': no host; use HOST[:PORT], e.g. node01:29400", endpoint));
  }
  return {host, port.empty() ? default_port : parse_port("rdzv_endpoint", port)};
}

JobConfig resolve_job(const CliArgs& a, const EnvLookup& env, const std::string& dev_dir) {
  JobConfig c;
  if (a.rdzv_id && !a.rdzv_id->empty()) c.run_id = *a.rdzv_id;
  if (a.max_restarts && a.max_restarts != "0") {
    throw UsageError(
        fmt::format("--max_restarts={}: mcirun does not restart processes; a failure "
                    "stops the job (drop the flag or use 0)",
                    *a.max_restarts));
  }
  if (a.rdzv_backend && *a.rdzv_backend != "static" && *a.rdzv_backend != "c10d") {
    throw UsageError(
        fmt::format("--rdzv_backend={}: mcirun's store is its own; use static or c10d "
                    "(or drop the flag)",
                    *a.rdzv_backend));
  }
  if (a.monitor_interval) parse_grace(*a.monitor_interval);  // checked, then unused
  if (a.rdzv_endpoint && (a.master_addr || a.master_port)) {
    throw UsageError(
        "--rdzv_endpoint and --master_addr/--master_port both say where the store "
        "is: give one or the other");
  }
  c.grace = parse_grace(a.grace);
  const auto bind = topo::parse_bind_mode(a.bind);
  if (!bind) {
    throw UsageError(
        fmt::format("--bind={}: use none, numa (the CPUs of each process's GPU's NUMA node) or core "
                    "(cores of its own)",
                    a.bind));
  }
  c.bind = *bind;
  c.prefix = a.prefix;
  c.standalone = a.standalone;
  c.nproc_per_node = resolve_nproc(a.nproc_per_node, env, dev_dir);

  if (a.standalone) {
    if (a.master_addr || a.master_port || a.rdzv_endpoint) {
      throw UsageError(
          "--standalone picks a free port on 127.0.0.1 itself: drop --master_addr, "
          "--master_port and --rdzv_endpoint, or drop --standalone");
    }
    if (a.nnodes && parse_nnodes(*a.nnodes) != 1) {
      throw UsageError(
          fmt::format("--standalone runs one node, but --nnodes={}: drop --standalone "
                      "and give --master_addr/--master_port (the same on every node)",
                      *a.nnodes));
    }
    if (a.node_rank && parse_count("node_rank", *a.node_rank, 0, "0 with --standalone") != 0) {
      throw UsageError("--standalone runs one node, whose --node_rank is 0");
    }
    c.master_port = 0;
  } else {
    if (a.nnodes) c.nnodes = parse_nnodes(*a.nnodes);
    if (a.node_rank) c.node_rank = parse_count("node_rank", *a.node_rank, 0, "a node index, 0 or more");
    if (a.rdzv_endpoint) {
      std::tie(c.master_addr, c.master_port) = parse_endpoint(*a.rdzv_endpoint, kDefaultRdzvPort);
    }
    if (a.master_addr) {
      if (a.master_addr->empty()) throw UsageError("--master_addr is empty: give the address of node 0");
      c.master_addr = *a.master_addr;
    }
    if (a.master_port) c.master_port = parse_port("master_port", *a.master_port);

    // A scheduler fills in what the flags leave out.
    const bool placed_by_flags = a.nnodes && a.node_rank;
    if (!placed_by_flags) {
      if (auto p = scheduler_placement(env)) {
        c.placement_source = p->source;
        if (!a.nnodes) c.nnodes = p->nnodes;
        if (!a.node_rank) c.node_rank = p->node_rank;
        if (c.nnodes > 1 && !a.master_addr && !a.rdzv_endpoint) {
          if (p->master_addr) {
            c.master_addr = *p->master_addr;
          } else if (auto m = env("MASTER_ADDR"); m && !m->empty()) {
            c.master_addr = *m;
          } else {
            throw ConfigError(
                fmt::format("{} started {} nodes but does not say which host is node 0: pass "
                            "--master_addr=<host of node 0> (or export MASTER_ADDR)",
                            p->source, c.nnodes));
          }
        }
      } else if (c.nnodes > 1 && !a.node_rank) {
        throw UsageError(
            fmt::format("--nnodes={} needs --node_rank on every node: 0 on the node at --master_addr (it hosts "
                        "the store), 1 to {} on the others",
                        c.nnodes, c.nnodes - 1));
      }
    }
    if (c.node_rank >= c.nnodes) {
      throw UsageError(fmt::format("--node_rank={} is not below --nnodes={}: number the nodes 0 to {}", c.node_rank,
                                   c.nnodes, c.nnodes - 1));
    }
  }
  if (static_cast<long long>(c.nnodes) * c.nproc_per_node > kMaxProcesses) {
    throw UsageError(fmt::format("{} nodes x {} processes is more than mcirun supports ({})", c.nnodes,
                                 c.nproc_per_node, kMaxProcesses));
  }
  c.program = resolve_program(a.command, a.no_python, env);
  return c;
}

}  // namespace mci::launch
