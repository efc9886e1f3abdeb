// mcirun --monitor: each node's launcher reads its ranks' status blocks
// once per refresh; node 0 serves the job's page, its JSON and /metrics,
// and the other nodes send it their sample through the job's store (one
// key per node, set once per refresh: no message per operation, and
// nothing at all from the ranks).
//
//   GET /             the page (page.cpp)
//   GET /api/v1/job   the job as JSON (job_view.hpp)
//   GET /metrics      Prometheus's text format
//   GET /healthz      "ok"
// Loopback by default. Another address needs the job's token on every
// request (Authorization: Bearer TOKEN, or ?token=TOKEN, which the page
// carries on), unless `open` says the page is public on purpose.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "jobview/job_view.hpp"
#include "jobview/node_sample.hpp"
#include "mci/store.hpp"

namespace mci {
class Store;
}

namespace mci::jobview {

class HttpServer;
struct HttpRequest;
struct HttpResponse;

struct MonitorOptions {
  std::string host = "127.0.0.1";  // where node 0 serves
  int port = 0;                    // 0: a free port
  bool open = false;               // a non-loopback address without a token
  std::string token;               // the one the user gave (MCI_JOB_TOKEN): the page's key off loopback
  int node_rank = 0;
  int nnodes = 1;
  int world = 1;
  StoreAddress store;  // the job's (its token may be mcirun's own), for nodes other than 0 and node 0's reads
  std::chrono::milliseconds refresh{250};
  std::chrono::milliseconds stall_after{2000};
  std::string program;
  std::string dump_dir;  // where the ranks' flight-recorder dumps go, for messages
  // The job's store is on etcd (no node holds it): every node publishes its
  // sample, and once node 0's mcirun is gone (store/node_presence.hpp) the
  // first other node to claim it serves the page, at its own --monitor
  // address, and says where through `say`.
  bool replicated = false;
  std::function<void(const std::string&)> say;
};

// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost).
bool is_loopback(const std::string& host);

class JobMonitor {
 public:
  // Throws ConfigError when node 0 cannot serve (address in use, a public
  // address without a token and without `open`).
  explicit JobMonitor(MonitorOptions o);
  ~JobMonitor();
  JobMonitor(const JobMonitor&) = delete;
  JobMonitor& operator=(const JobMonitor&) = delete;

  // A rank process is about to start: its block's descriptor, which the
  // launcher leaves open in the child (MCI_MONITOR_FD). `replacement`: K
  // for a replacement, 0 for the job's own process.
  int block_for(int rank, int local_rank, int replacement);
  void started(int rank, long pid);
  // process: "done", "lost" or "failed"; how: "exit code 1", "signal SIGKILL".
  void exited(int rank, Process process, const std::string& how);
  void event(const std::string& kind, const std::string& text);
  // One refresh now (tests, and the last state before the job ends).
  void refresh();
  // Every rank of the job dumps its flight recorder (the page's button):
  // this node's at once, the others' at their next refresh. What was done,
  // as the JSON the button shows.
  nlohmann::json request_dump();

  // The node serving the page (node 0, or the one that took it over): where
  // it is ("http://127.0.0.1:PORT/"); "" elsewhere.
  std::string url() const;
  int port() const;

 private:
  void loop();
  HttpResponse handle(const HttpRequest& req);
  LocalRank* find(int rank);
  // The page and its view, on this node (node 0 at start; another node
  // when it takes over). Throws ConfigError as the constructor says.
  void start_serving();
  // A node other than the one serving: this node's sample into the store,
  // and the dumps the page asked for since the last refresh.
  void publish(const NodeSample& mine);
  // On etcd, a node other than 0: once node 0 is gone, serve the page if no
  // other node claimed it first.
  void take_over_if_node0_gone();
  // Sends each running rank of this node its dump signal; how many got it
  // and the ranks that cannot dump (no handler: the signal would end them).
  std::pair<int, std::vector<int>> signal_dumps();

  MonitorOptions o_;
  std::mutex mu_;  // ranks_
  std::vector<LocalRank> ranks_;
  std::unique_ptr<JobView> view_;  // the node serving the page
  bool took_over_tried_ = false;   // the store answered this node's claim of the page: not again
  std::shared_ptr<Store> store_;   // multi-node only
  std::unique_ptr<HttpServer> http_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  bool refresh_now_ = false;     // a rank exited: refresh without waiting
  std::mutex store_mu_;          // store_ and each refresh, one caller at a time
  std::int64_t dumps_seen_ = 0;  // nodes other than 0: the job's dump requests already done
  std::thread thread_;
};

}  // namespace mci::jobview
