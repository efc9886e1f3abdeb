#include "jobview/top.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/http_get.hpp"
#include "mci/errors.hpp"

namespace mci::jobview {

namespace {

using json = nlohmann::json;

std::string s_of(const json& j, const char* k) {
  const auto it = j.find(k);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}
double n_of(const json& j, const char* k) {
  const auto it = j.find(k);
  return it != j.end() && it->is_number() ? it->get<double>() : 0;
}

std::string us_text(double us) {
  if (us < 1e3) return fmt::format("{:.0f}us", us);
  if (us < 1e6) return fmt::format("{:.1f}ms", us / 1e3);
  return fmt::format("{:.2f}s", us / 1e6);
}

// http://HOST:PORT/ or HOST:PORT or PORT.
void parse_target(const std::string& t, std::string& host, int& port) {
  std::string rest = t;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  if (const auto slash = rest.find('/'); slash != std::string::npos) rest = rest.substr(0, slash);
  host = "127.0.0.1";
  std::string p = rest;
  if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
    p = rest.substr(colon + 1);
  }
  char* end = nullptr;
  const long v = std::strtol(p.c_str(), &end, 10);
  if (p.empty() || *end != '\0' || v <= 0 || v > 65535) {
    throw ConfigError(
        fmt::format("mci-top: '{}' is not an address: give the URL mcirun printed "
                    "(http://127.0.0.1:PORT/) or its port",
                    t));
  }
  port = static_cast<int>(v);
}

}  // namespace

std::string render_top(const json& job) {
  std::string out;
  const json& j = job.contains("job") ? job["job"] : json::object();
  const json& v = job.contains("verdict") ? job["verdict"] : json::object();
  out += fmt::format("mci job: {}  |  {} rank(s), {} node(s), up {:.0f} s\n", s_of(j, "program"), n_of(j, "world"),
                     n_of(j, "nnodes"), n_of(j, "uptime_s"));
  out += fmt::format("{}: {}\n\n", s_of(v, "state"), s_of(v, "text"));
  out += fmt::format("{:>5} {:<16} {:>8} {:<24} {:<34} {:>10} {:>6}\n", "RANK", "HOST", "PID", "STATE", "OPERATION",
                     "TIME IN IT", "LAST");
  if (job.contains("ranks")) {
    for (const auto& r : job["ranks"]) {
      std::string op;
      std::string t;
      if (r.contains("op") && r["op"].is_object()) {
        const json& o = r["op"];
        op = n_of(o, "seq") > 0 ? fmt::format("{} #{:.0f} {}", s_of(o, "kind"), n_of(o, "seq"), s_of(o, "dtype"))
                                : s_of(o, "kind");
        t = us_text(n_of(o, "for_ms") * 1e3);
      } else if (s_of(r, "state") == "running") {
        op = "(its own code)";
        t = fmt::format("{:.1f}s", n_of(r, "idle_s"));
      }
      std::string state = s_of(r, "state");
      if (r.value("waited_for", false)) state += " <- waited for";  // fits the column
      out += fmt::format("{:>5.0f} {:<16.16} {:>8.0f} {:<24.24} {:<34.34} {:>10} {:>6.0f}\n", n_of(r, "rank"),
                         s_of(r, "host"), n_of(r, "pid"), state, op, t, n_of(r, "last_arrivals"));
    }
  }
  if (job.contains("events") && !job["events"].empty()) {
    out += "\nlast events:\n";
    const auto& ev = job["events"];
    for (std::size_t i = ev.size() > 5 ? ev.size() - 5 : 0; i < ev.size(); ++i) {
      out += fmt::format("  {:8.1f} s  {}: {}\n", n_of(ev[i], "t"), s_of(ev[i], "kind"), s_of(ev[i], "text"));
    }
  }
  return out;
}

int top_main(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  CLI::App app("mci-top: a running job's ranks, from the page mcirun --monitor serves", "mci-top");
  std::string target;
  bool once = false;
  double interval = 1.0;
  std::string token;
  app.add_option("url", target, "the URL mcirun printed (http://127.0.0.1:PORT/), HOST:PORT or PORT")->required();
  app.add_flag("--once", once, "print one table and exit (for scripts)");
  app.add_option("--interval", interval, "seconds between refreshes (default 1)")->check(CLI::Range(0.1, 3600.0));
  app.add_option("--token", token, "the job's token, for a page on another host (default: MCI_JOB_TOKEN)");
  try {
    std::vector<std::string> words(argv.rbegin(), argv.rend());
    if (!words.empty()) words.pop_back();
    app.parse(words);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "mci-top: " << e.what() << "; run 'mci-top --help'\n";
    return 2;
  }
  if (token.empty()) {
    if (const char* t = std::getenv("MCI_JOB_TOKEN")) token = t;
  }
  try {
    std::string host;
    int port = 0;
    parse_target(target, host, port);
    for (;;) {
      const HttpReply r = http_get(host, port, "/api/v1/job", token);
      if (r.status != 200) {
        err << fmt::format("mci-top: the page answered {}: {}", r.status, r.body);
        return 1;
      }
      const json j = json::parse(r.body, nullptr, false);
      if (j.is_discarded()) {
        err << "mci-top: the page's JSON could not be read\n";
        return 1;
      }
      if (!once) out << "\033[H\033[2J";
      out << render_top(j) << std::flush;
      if (once) return 0;
      std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    }
  } catch (const Error& e) {
    err << e.what() << (once ? "\n" : " (the job may have ended)\n");
    return 1;
  }
}

}  // namespace mci::jobview
