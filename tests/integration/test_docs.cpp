// The messages the documentation quotes come from the tool: each test runs
// the situation a page describes through the real code path (the lab under
// mcirun, the scenarios, the store, the README's example), takes the message
// it printed, and checks that the page quotes it. Numbers (timeouts, ranks,
// pids, ports, durations) differ between a page's example and a run, so both
// sides are compared with every number replaced by '#' and runs of blanks
// made one: the words cannot drift.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "integration/launcher_run.hpp"
#include "mci/errors.hpp"
#include "mci/init.hpp"
#include "mci/store.hpp"
#include "support/job.hpp"
#include "support/ports.hpp"
#include "test_paths.hpp"

namespace mci::test {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string doc(const std::string& name) { return read_file(std::string(MCI_DOCS_DIR) + "/" + name); }
std::string readme() { return read_file(std::string(MCI_DOCS_DIR) + "/../README.md"); }

// Digits (with their decimal points) become '#', blanks one space.
std::string norm(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isdigit(c)) {
      while (i < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[i])) ||
              (text[i] == '.' && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1]))))) {
        ++i;
      }
      out += '#';
    } else if (std::isspace(c)) {
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      out += ' ';
    } else {
      out += text[i++];
    }
  }
  return out;
}

bool quotes(const std::string& page, const std::string& message) {
  return !message.empty() && norm(page).find(norm(message)) != std::string::npos;
}

// The part of `text` from `from` to the end of `to` (empty when absent).
std::string between(const std::string& text, const std::string& from, const std::string& to) {
  const auto a = text.find(from);
  if (a == std::string::npos) return {};
  const auto b = text.find(to, a + from.size());
  if (b == std::string::npos) return {};
  return text.substr(a, b + to.size() - a);
}

// The whole line of `text` that contains `part`.
std::string line_with(const std::string& text, const std::string& part) {
  const auto at = text.find(part);
  if (at == std::string::npos) return {};
  const auto start = text.rfind('\n', at);
  const auto end = text.find('\n', at);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     (end == std::string::npos ? text.size() : end) - (start == std::string::npos ? 0 : start + 1));
}

#define EXPECT_QUOTED(page, name, message)                                                     \
  do {                                                                                         \
    const std::string m_ = (message);                                                          \
    EXPECT_FALSE(m_.empty()) << "the run did not print the message " #message;                 \
    EXPECT_TRUE(quotes(page, m_)) << name << " does not quote what the tool printed:\n" << m_; \
  } while (0)

std::vector<std::string> labo(std::vector<std::string> launcher_args) {
  launcher_args.push_back(built("labo"));
  return launcher_args;
}

// The group project on the lab's default backend (Gloo), and on mci's engine.
TEST(DocsQuote, TheGroupProjectAsTheLabPrintsIt) {
  if (!backend_available("gloo")) GTEST_SKIP() << "this build has no Gloo, the lab's default";
  Mcirun m(labo({"--standalone", "--nproc_per_node=2"}),
           {{"MCI_BACKEND", "\x01"}, {"MCI_SKIP_RANK", "1"}, {"MCI_TIMEOUT_S", "2"}});
  ASSERT_EQ(m.code(std::chrono::seconds(60)), 1) << m.all();
  const std::string all = m.all();
  const std::string timeout = between(all, "labo: TimeoutError: Timed out waiting", " Gloo: [");
  const std::vector<std::string> report = {line_with(all, "mci hang report for all_reduce #1"),
                                           line_with(all, "  rank 0: waited"),
                                           line_with(all, "  rank 1: never entered"),
                                           line_with(all, "Ranks that never entered"),
                                           line_with(all, "mcirun: rank 0's hang report is above, in its output")};
  for (const char* page : {"labo.md", "troubleshooting.md"}) {
    EXPECT_QUOTED(doc(page), page, timeout);
    for (const auto& line : report) EXPECT_QUOTED(doc(page), page, line);
  }

  Mcirun cpu(labo({"--standalone", "--nproc_per_node=2"}),
             {{"MCI_BACKEND", "cpu"}, {"MCI_SKIP_RANK", "1"}, {"MCI_TIMEOUT_S", "2"}});
  ASSERT_EQ(cpu.code(std::chrono::seconds(60)), 1) << cpu.all();
  EXPECT_QUOTED(doc("troubleshooting.md"), "troubleshooting.md",
                between(cpu.all(), "labo: TimeoutError: Timed out waiting", "not a hang."));
  EXPECT_QUOTED(doc("labo.md"), "labo.md", between(cpu.all(), "no answer from rank", ")"));
}

// MCI_DEBUG=timing and MCI_ALGO on the lab's default backend.
TEST(DocsQuote, TimingAndMciAlgoOnGloo) {
  if (!backend_available("gloo")) GTEST_SKIP() << "this build has no Gloo, the lab's default";
  Mcirun m(labo({"--standalone", "--nproc_per_node=2"}),
           {{"MCI_BACKEND", "\x01"}, {"MCI_DEBUG", "timing"}, {"MCI_ALGO", "ring"}});
  ASSERT_EQ(m.code(std::chrono::seconds(60)), 0) << m.all();
  const std::string all = m.all();
  const std::string timing = between(all, "timing: all_reduce #1 (f32 x 2, sum) took", "the cpu backend does)");
  const std::string summary = between(all, "timing summary on rank 0:", "does not report arrivals)");
  const std::string warning = between(all, "MCI_ALGO=ring is ignored", "(MCI_BACKEND=cpu)");
  EXPECT_QUOTED(doc("labo.md"), "labo.md", timing);
  EXPECT_QUOTED(doc("labo.md"), "labo.md", summary);
  EXPECT_QUOTED(doc("labo.md"), "labo.md", warning);
  EXPECT_QUOTED(doc("troubleshooting.md"), "troubleshooting.md", warning);
  EXPECT_QUOTED(doc("troubleshooting.md"), "troubleshooting.md", between(all, "last to arrive: unknown", "does)"));
  // DDP's own collectives, which labo.md explains.
  for (const char* op : {"all_gather #2 (i64 x 3)", "broadcast #3 (f32 x 2, root 0)", "all_reduce #4 (f32 x 2, avg)",
                         "all_reduce #5 (f32 x 8, sum)"}) {
    EXPECT_NE(all.find(std::string("timing: ") + op), std::string::npos) << op << "\n" << all;
    EXPECT_QUOTED(doc("labo.md"), "labo.md", std::string(op));
  }
  // Said once, by rank 0.
  const auto first = all.find("MCI_ALGO=ring is ignored");
  EXPECT_EQ(all.find("MCI_ALGO=ring is ignored", first + 1), std::string::npos) << all;
}

// Different collectives on gloo: troubleshooting's row quotes the promise.
TEST(DocsQuote, AMismatchOnGloo) {
  if (!backend_available("gloo")) GTEST_SKIP() << "this build has no Gloo";
  Job job(2, Scenario{"mismatch"}, {{"MCI_TEST_BACKEND", "gloo"}, {"MCI_TEST_TIMEOUT_MS", "1500"}});
  job.wait(std::chrono::seconds(30));
  const std::string rank0 = between(job.output(0), "MismatchError: collective mismatch:", "and root.");
  const std::string rank1 = between(job.output(1), "MismatchError: collective mismatch:", "and root.");
  EXPECT_TRUE(quotes(doc("troubleshooting.md"), rank0) || quotes(doc("troubleshooting.md"), rank1))
      << "troubleshooting.md quotes neither rank's MismatchError:\n"
      << rank0 << "\n"
      << rank1;
  const std::string promise = between(rank0.empty() ? rank1 : rank0, "called a different collective", "sooner)");
  EXPECT_QUOTED(doc("troubleshooting.md"), "troubleshooting.md", promise);
  EXPECT_QUOTED(doc("troubleshooting.md"), "troubleshooting.md",
                between(job.all_output(), "A mismatch, not a hang", ":"));
}

TEST(DocsQuote, MciAlgoSetDifferentlyIsAConfigErrorAtInit) {
  Job job(2, Scenario{"misuse"}, {{"MCI_TEST_CASE", "algo"}});
  job.wait(std::chrono::seconds(30));
  EXPECT_QUOTED(doc("troubleshooting.md"), "troubleshooting.md",
                between(job.all_output(), "ConfigError: the ranks disagree on mci's settings",
                        "(or leave them unset everywhere)."));
}

// A rank killed on one host: its peers see its process gone (shared memory).
TEST(DocsQuote, ADeadPeerOnOneHost) {
  Job job(2, Scenario{"peer_death"}, {{"MCI_TRANSPORT", "shm"}, {"MCI_TEST_TIMEOUT_MS", "30000"}});
  job.wait(std::chrono::seconds(60));
  const std::string out = job.output(0);
  const std::string line = line_with(out, "exited or crashed during");
  ASSERT_FALSE(line.empty()) << out;
  // The operation it died in varies (the barrier or the all-reduce); the
  // words around it must not.
  EXPECT_QUOTED(doc("troubleshooting.md"), "troubleshooting.md", between(line, "rank", "exited or crashed during"));
  EXPECT_QUOTED(doc("troubleshooting.md"), "troubleshooting.md", line.substr(line.rfind(" on rank ")));
}

// A process with another job token: it is refused, and the ranks that wait
// for it are told when their wait ends.
TEST(DocsQuote, ARefusedTokenIsToldToTheOthers) {
  StoreServer server(StoreServerOptions{"127.0.0.1", 0, "the-job-token"});
  TcpStoreOptions o;
  o.port = server.port();
  o.connect_timeout = std::chrono::seconds(3);
  o.token = "the-job-token";
  TcpStore good(o);
  o.token = "another-token";
  std::string refused;
  try {
    TcpStore wrong(o);
  } catch (const ConfigError& e) {
    refused = e.what();
  }
  std::string told;
  try {
    good.get("mci/default/0/checkin/1", std::chrono::milliseconds(300));
  } catch (const TimeoutError& e) {
    told = e.what();
  }
  const std::string page = doc("troubleshooting.md");
  EXPECT_QUOTED(page, "troubleshooting.md", between(refused, "refused this process", "MCI_JOB_TOKEN"));
  EXPECT_QUOTED(page, "troubleshooting.md", between(told, "The store refused", "give every rank the same token"));
}

// Ranks started by hand (as under srun) without a token: one warning, from
// rank 0, which the cluster guide quotes beside its srun recipe. The README's
// example is the program: it runs, and prints its result.
TEST(DocsQuote, AMissingTokenIsSaidOnceAndTheReadmeExampleRuns) {
  const int port = free_port();
  Spawner sp;
  for (int r = 0; r < 2; ++r) {
    sp.spawn({built("readme_example")}, {{"RANK", std::to_string(r)},
                                         {"WORLD_SIZE", "2"},
                                         {"LOCAL_RANK", std::to_string(r)},
                                         {"MASTER_ADDR", "127.0.0.1"},
                                         {"MASTER_PORT", std::to_string(port)},
                                         {"MCI_JOB_TOKEN", "\x01"},
                                         {"MCI_STORE_HOSTED", "\x01"}});
  }
  std::string all;
  for (int r = 0; r < 2; ++r) {
    const auto st = sp.wait(r, std::chrono::seconds(60));
    all += sp.child(r).output();
    EXPECT_TRUE(st.exited && st.code == 0) << sp.child(r).output();
    EXPECT_NE(sp.child(r).output().find("rank " + std::to_string(r) + ": grad 1 4"), std::string::npos)
        << sp.child(r).output();
  }
  const std::string warning = between(all, "MCI_JOB_TOKEN is not set", "single-node job");
  const auto first = all.find("MCI_JOB_TOKEN is not set");
  EXPECT_EQ(all.find("MCI_JOB_TOKEN is not set", first + 1), std::string::npos) << all;
  EXPECT_QUOTED(doc("cluster.md"), "cluster.md", warning);
  EXPECT_QUOTED(readme(), "README.md", std::string("rank 0: grad 1 4"));
  // The srun recipes export a token.
  for (const char* page : {"labo.md", "cluster.md"}) {
    EXPECT_NE(doc(page).find("export MCI_JOB_TOKEN=$(openssl rand -hex 16)"), std::string::npos) << page;
  }
}

// The README's example catches mci::Error: a mistake prints its message and
// exits 1 instead of abort()'s "terminate called after throwing".
TEST(DocsQuote, TheReadmeExampleSaysWhatWentWrong) {
  Spawner sp;
  sp.spawn({built("readme_example")}, {{"RANK", "\x01"},
                                       {"WORLD_SIZE", "\x01"},
                                       {"MASTER_ADDR", "\x01"},
                                       {"MASTER_PORT", "\x01"},
                                       {"SLURM_PROCID", "\x01"},
                                       {"OMPI_COMM_WORLD_RANK", "\x01"},
                                       {"PMI_RANK", "\x01"},
                                       {"PMIX_RANK", "\x01"}});
  const auto st = sp.wait(0, std::chrono::seconds(30));
  const std::string out = sp.child(0).output();
  EXPECT_TRUE(st.exited && st.code == 1) << out;
  EXPECT_NE(out.find("environment variable RANK expected, but not set"), std::string::npos) << out;
  EXPECT_EQ(out.find("terminate called"), std::string::npos) << out;
  EXPECT_NE(readme().find("catch (const mci::Error& e)"), std::string::npos);
}

}  // namespace
}  // namespace mci::test
