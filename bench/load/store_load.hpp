// Many simulated store clients on a few threads: each client is a
// non-blocking socket speaking the store's wire protocol (authentication
// included), so thousands fit in one test process. Used by the store load
// test (correctness: nobody dropped, every answer right) and by
// bench/store_load (latency percentiles).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mci::test {

struct StoreLoadOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string token;
  int clients = 4096;
  int threads = 4;
  // Rounds per client, each: set its key, add to a counter, get the next
  // client's key (it waits for it), wait for the previous client's and a
  // farther one's keys.
  int rounds = 1;
  std::string prefix = "load";
  std::chrono::seconds limit{120};  // the whole run; clients not done by then count as unfinished
};

struct StoreLoadResult {
  int finished = 0;                 // clients that completed every round with right answers
  int failed = 0;                   // clients dropped, refused or answered wrongly
  int unfinished = 0;               // still running at the time limit
  std::vector<std::string> errors;  // the first few failures
  std::uint64_t requests = 0;
  double seconds = 0;
  // Per request (µs): set and add answer at once; get and wait include the
  // time until another client wrote the key.
  std::vector<double> immediate_us;
  std::vector<double> waiting_us;
};

StoreLoadResult run_store_load(const StoreLoadOptions& o);

// The q-quantile (0..1) of `v` (sorted in place); 0 if empty.
double percentile(std::vector<double>& v, double q);

// A stranger's flood against the store at host:port for `duration`: opens
// connections as fast as it can, a third silent, a third sending junk, a
// third asking before authenticating. Returns how many it opened.
int stranger_flood(const std::string& host, int port, std::chrono::milliseconds duration, int max_open = 4000);

}  // namespace mci::test
