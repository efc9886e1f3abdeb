#include "jobview/job_monitor.hpp"

#include <arpa/inet.h>
#include <signal.h>

#include <fmt/format.h>

#include "common/log.hpp"
#include "jobview/http_server.hpp"
#include "jobview/page.hpp"
#include "mci/errors.hpp"
#include "mci/store.hpp"
#include "store/keys.hpp"
#include "store/node_presence.hpp"

namespace mci::jobview {

namespace {

std::string node_key(int node) { return keys::monitor::node(node); }
constexpr const char* kDumpKey = keys::monitor::kDumps;  // a counter: one per dump the page asked for

// A token compared in a time that does not depend on where it differs.
bool same_secret(const std::string& given, const std::string& secret) {
  if (secret.empty() || given.size() != secret.size()) return false;
  unsigned diff = 0;
  for (std::size_t i = 0; i < secret.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i]) ^ static_cast<unsigned char>(secret[i]);
  }
  return diff == 0;
}

HttpResponse text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

}  // namespace

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  return ::inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

JobMonitor::JobMonitor(MonitorOptions o) : o_(std::move(o)) {
  if (o_.node_rank == 0) start_serving();
  if (o_.nnodes > 1) {
    try {
      store_ = o_.store.connect(std::chrono::seconds(2), std::chrono::seconds(10));
    } catch (const Error& e) {
      log::warn("mcirun --monitor: cannot reach the job's store at {}:{} ({}); {}", o_.store.host, o_.store.port,
                e.what(), o_.node_rank == 0 ? "only this node's ranks are shown" : "node 0 will not show this node");
    }
  }
  thread_ = std::thread([this] { loop(); });
}

void JobMonitor::start_serving() {
  if (!is_loopback(o_.host) && o_.token.empty() && !o_.open) {
    throw ConfigError(
        fmt::format("mcirun --monitor={}:{}: the page would be readable by anyone who reaches {}; export MCI_JOB_TOKEN "
                    "(every request must then carry it) or set MCI_MONITOR_OPEN=1 to serve it open on purpose",
                    o_.host, o_.port, o_.host));
  }
  auto view = std::make_unique<JobView>(ViewOptions{o_.world, o_.nnodes, o_.refresh, o_.stall_after, o_.program});
  view_ = std::move(view);  // before the server: a request may come at once
  try {
    http_ = std::make_unique<HttpServer>(o_.host, o_.port, [this](const HttpRequest& r) { return handle(r); });
  } catch (...) {
    view_.reset();
    throw;
  }
}

JobMonitor::~JobMonitor() {
  {
    std::lock_guard lk(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  http_.reset();
}

std::string JobMonitor::url() const {
  if (!http_) return "";
  const std::string host = o_.host.find(':') != std::string::npos ? "[" + o_.host + "]" : o_.host;
  return fmt::format("http://{}:{}/", host, http_->port());
}

int JobMonitor::port() const { return http_ ? http_->port() : 0; }

LocalRank* JobMonitor::find(int rank) {
  for (auto& r : ranks_) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

int JobMonitor::block_for(int rank, int local_rank, int replacement) {
  auto file = std::make_shared<monitor::BlockFile>(fmt::format("mci-monitor-rank-{}", rank));
  std::lock_guard lk(mu_);
  LocalRank* r = find(rank);
  if (r == nullptr) {
    ranks_.emplace_back();
    r = &ranks_.back();
  }
  r->rank = rank;
  r->local_rank = local_rank;
  r->replacement = replacement;
  r->process = Process::starting;
  r->exit.clear();
  r->block = file;
  r->reader = std::make_shared<monitor::BlockReader>(file->fd());
  return file->fd();
}

void JobMonitor::started(int rank, long pid) {
  std::lock_guard lk(mu_);
  if (LocalRank* r = find(rank)) {
    r->pid = pid;
    r->process = Process::running;
    r->changed_ns = steady_now_ns();
  }
}

void JobMonitor::exited(int rank, Process process, const std::string& how) {
  {
    std::lock_guard lk(mu_);
    LocalRank* r = find(rank);
    if (r == nullptr) return;
    r->process = process;
    r->exit = how;
    r->changed_ns = steady_now_ns();
  }
  // The page shows an exit at once, not one refresh later; on the
  // monitor's thread: the store calls must not hold up the caller (the
  // launcher's event loop).
  {
    std::lock_guard lk(stop_mu_);
    refresh_now_ = true;
  }
  stop_cv_.notify_all();
}

void JobMonitor::event(const std::string& kind, const std::string& text) {
  if (view_) view_->event(kind, text);
}

std::pair<int, std::vector<int>> JobMonitor::signal_dumps() {
  std::lock_guard lk(mu_);
  int sent = 0;
  std::vector<int> cannot;
  for (const LocalRank& r : ranks_) {
    if (r.process != Process::running || r.pid <= 0) continue;
    if (r.dump_signal <= 0) {
      cannot.push_back(r.rank);
      continue;
    }
    if (::kill(static_cast<pid_t>(r.pid), r.dump_signal) == 0) ++sent;
  }
  return {sent, cannot};
}

nlohmann::json JobMonitor::request_dump() {
  const auto [sent, cannot] = signal_dumps();
  if (store_ && o_.nnodes > 1) {
    try {
      std::lock_guard lk(store_mu_);
      store_->add(kDumpKey, 1);
    } catch (const Error& e) {
      log::warn("mcirun --monitor: cannot ask the other nodes to dump: {}", e.what());
    }
  }
  event("dump", fmt::format("flight recorders dumped on request ({} rank(s) of node 0{}) to {}", sent,
                            o_.nnodes > 1 ? ", the other nodes' at their next refresh" : "", o_.dump_dir));
  return {{"signalled", sent}, {"cannot_dump", cannot}, {"dir", o_.dump_dir}, {"other_nodes", o_.nnodes > 1}};
}

void JobMonitor::refresh() {
  std::lock_guard refreshing(store_mu_);  // one store client, one user at a time
  NodeSample mine;
  {
    std::lock_guard lk(mu_);
    mine = sample_node(o_.node_rank, ranks_);
  }
  // On etcd node 0 publishes too: a node that takes the page over shows
  // its last state.
  if (!view_ || o_.replicated) publish(mine);
  if (!view_ && o_.replicated) take_over_if_node0_gone();
  if (!view_) return;
  view_->update(mine);
  if (!store_) return;
  for (int n = 0; n < o_.nnodes; ++n) {
    if (n == o_.node_rank) continue;
    try {
      if (!store_->check({node_key(n)})) continue;
      // The JSON edge: another node's sample, decoded once, here.
      const auto j = nlohmann::json::parse(to_string(store_->get(node_key(n), std::chrono::seconds(1))), nullptr,
                                           /*allow_exceptions=*/false);
      if (j.is_object()) view_->update(j.get<NodeSample>());
    } catch (const Error& e) {
      log::debug("mcirun --monitor: cannot read node {}'s sample: {}", n, e.what());
    }
  }
}

void JobMonitor::publish(const NodeSample& mine) {
  if (!store_) return;
  try {
    // A dump the page asked for since the last refresh: this node's too
    // (the node serving the page signals its own ranks at once).
    if (!view_) {
      if (const std::int64_t n = store_->add(kDumpKey, 0); n > dumps_seen_) {
        dumps_seen_ = n;
        signal_dumps();
      }
    }
    store_->set(node_key(o_.node_rank), to_bytes(nlohmann::json(mine).dump()));
  } catch (const Error& e) {
    log::debug("mcirun --monitor: cannot send this node's sample: {}", e.what());
  }
}

void JobMonitor::take_over_if_node0_gone() {
  if (!store_ || took_over_tried_ || o_.node_rank == 0) return;
  try {
    if (!node_is_gone(*store_, 0)) return;
    const std::string me = std::to_string(o_.node_rank);
    // The first node to claim it serves; the others go on publishing. A
    // claim the store did not answer is asked again at the next refresh.
    const std::string who = to_string(store_->compare_set(keys::monitor::kServer, {}, to_bytes(me)));
    took_over_tried_ = true;
    if (who != me) return;
    start_serving();
  } catch (const Error& e) {
    if (took_over_tried_ && o_.say) {
      o_.say(
          fmt::format("mcirun: --monitor: node 0 was lost, and this node cannot serve the job's page: {}", e.what()));
    }
    return;
  }
  if (o_.say) {
    const std::string u = url();
    const std::string tail = o_.token.empty() || is_loopback(o_.host) ? "" : "?token=$MCI_JOB_TOKEN";
    o_.say(
        fmt::format("mcirun: node 0 was lost: this node (node {}) now serves the job's page at {}{} (JSON: "
                    "{}api/v1/job, Prometheus: {}metrics)",
                    o_.node_rank, u, tail, u, u));
  }
}

void JobMonitor::loop() {
  std::unique_lock lk(stop_mu_);
  while (!stopping_) {
    lk.unlock();
    try {
      refresh();
    } catch (const std::exception& e) {
      log::debug("mcirun --monitor: refresh failed: {}", e.what());
    }
    lk.lock();
    stop_cv_.wait_for(lk, o_.refresh, [this] { return stopping_ || refresh_now_; });
    refresh_now_ = false;
  }
}

HttpResponse JobMonitor::handle(const HttpRequest& req) {
  std::string given;
  if (const auto it = req.headers.find("authorization");
      it != req.headers.end() && it->second.rfind("Bearer ", 0) == 0) {
    given = it->second.substr(7);
  } else if (const auto q = req.query.find("token"); q != req.query.end()) {
    given = q->second;
  }
  const bool needs_token = !is_loopback(o_.host) && !o_.open;
  if (needs_token && !same_secret(given, o_.token)) {
    return text(401, "this page needs the job's token: add ?token=MCI_JOB_TOKEN to the address\n");
  }
  if (req.path == "/api/v1/dump") {
    // The one action: every rank writes its flight recorder. A custom
    // header, which a cross-site form cannot send, keeps other pages out.
    if (req.method != "POST") return text(405, "POST /api/v1/dump (with X-MCI-Action: dump) asks for the dumps\n");
    const auto h = req.headers.find("x-mci-action");
    if (h == req.headers.end() || h->second != "dump") return text(400, "send the header X-MCI-Action: dump\n");
    HttpResponse r;
    r.content_type = "application/json";
    r.body = request_dump().dump();
    return r;
  }
  if (req.method != "GET" && req.method != "HEAD") return text(405, "read-only: use GET\n");
  if (req.path == "/healthz") return text(200, "ok\n");
  if (req.path == "/metrics") {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = view_->metrics();
    return r;
  }
  if (req.path == "/api/v1/job") {
    HttpResponse r;
    r.content_type = "application/json";
    r.body = view_->snapshot().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return r;
  }
  if (req.path == "/" || req.path == "/index.html") {
    HttpResponse r;
    r.content_type = "text/html; charset=utf-8";
    r.body = page_html();
    return r;
  }
  return text(404, "not found: the monitor serves /, /api/v1/job and /metrics\n");
}

}  // namespace mci::jobview
