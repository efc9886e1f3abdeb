#include "reconfigure.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "mci/errors.hpp"

namespace mci_torch::reconf {
namespace {

constexpr const char* kTag = "mci-reconfigure/1";

std::string prefix_of(std::int64_t uuid) { return "mci_torch/reconfigure/" + std::to_string(uuid); }

std::string rank_word(const std::vector<int>& ranks) {
  std::string s = ranks.size() > 1 ? "ranks " : "rank ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

std::string format_handle(const Handle& h) {
  return std::string(kTag) + " " + h.host + " " + std::to_string(h.port) + " " + (h.token.empty() ? "-" : h.token) +
         " " + h.nonce;
}

Handle parse_handle(const std::string& text, const std::string& where) {
  std::istringstream in(text);
  std::string tag, port, token;
  Handle h;
  in >> tag >> h.host >> port >> token >> h.nonce;
  std::string extra;
  const bool ok = tag == kTag && !h.host.empty() && !h.nonce.empty() && !(in >> extra) &&
                  std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) && !port.empty() &&
                  port.size() < 6;
  if (!ok) {
    throw mci::ConfigError("mci_torch: reconfigure: " + where + " (\"" + text.substr(0, 120) +
                           "\") is not a handle of backend mci: pass what dist._get_reconfigure_handle() returned on "
                           "each member");
  }
  h.port = std::atoi(port.c_str());
  h.token = token == "-" ? std::string() : token;
  return h;
}

std::vector<std::string> ordered(
    const std::variant<std::unordered_set<std::string>, std::vector<std::string>>& handles) {
  if (const auto* list = std::get_if<std::vector<std::string>>(&handles)) return *list;
  const auto& set = std::get<std::unordered_set<std::string>>(handles);
  std::vector<std::string> v(set.begin(), set.end());
  std::sort(v.begin(), v.end());
  return v;
}

std::string digest(const std::vector<std::string>& handles) {
  // FNV-1a over the list (a separator between handles): equal lists give
  // equal digests; a difference shows with near certainty.
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& s : handles) {
    for (const unsigned char c : s + "\n") {
      h ^= c;
      h *= 1099511628211ull;
    }
  }
  char text[40];
  std::snprintf(text, sizeof text, "%zu:%016llx", handles.size(), static_cast<unsigned long long>(h));
  return text;
}

namespace {

// The meeting itself, on handle 0's store: the same handles everywhere,
// then every member arrived.
void meet_on(const std::shared_ptr<mci::Store>& base, const std::vector<std::string>& handles, int rank,
             std::int64_t uuid, std::chrono::milliseconds timeout) {
  auto store = std::make_shared<mci::PrefixStore>(prefix_of(uuid) + "/meet", base);
  const std::string mine = digest(handles);
  const auto decided = mci::to_string(store->compare_set("handles", {}, mci::to_bytes(mine)));
  if (decided != mine) {
    // Say so to the others too, so they fail now rather than at the timeout.
    store->set("disagree", mci::to_bytes("rank " + std::to_string(rank)));
    throw mci::ConfigError("mci_torch: reconfigure (uuid " + std::to_string(uuid) + "): rank " + std::to_string(rank) +
                           " was given other handles than the first member to arrive (" +
                           std::to_string(handles.size()) + " handles, digest " + mine + " against " + decided +
                           "): every member must pass the same handles, in the same order for a list");
  }
  store->set("arrived/" + std::to_string(rank), mci::to_bytes(handles[static_cast<std::size_t>(rank)]));
  const auto n = static_cast<std::int64_t>(handles.size());
  std::vector<std::optional<mci::StoreValue>> got;
  try {
    got = store->get_range("arrived", 0, n, "disagree", timeout);
  } catch (const mci::TimeoutError&) {
    std::vector<int> missing;
    for (std::int64_t r = 0; r < n; ++r) {
      if (!store->check({"arrived/" + std::to_string(r)})) missing.push_back(static_cast<int>(r));
    }
    std::string where;
    for (const int r : missing) {
      const Handle h = parse_handle(handles[static_cast<std::size_t>(r)], "handle " + std::to_string(r));
      where += (where.empty() ? "" : ", ") + std::to_string(r) + " at " + h.host;
    }
    throw mci::TimeoutError("mci_torch: reconfigure (uuid " + std::to_string(uuid) + "): " + rank_word(missing) +
                            " of the new group (" + where + ") did not arrive within " +
                            std::to_string(timeout.count()) +
                            " ms: that process is gone or did not call reconfigure with these handles. Reconfigure "
                            "again without it, with a fresh uuid");
  }
  if (store->check({"disagree"})) {
    throw mci::ConfigError("mci_torch: reconfigure (uuid " + std::to_string(uuid) +
                           "): " + mci::to_string(store->get("disagree", timeout)) +
                           " was given other handles than this rank: every member must pass the same handles, in "
                           "the same order for a list");
  }
}

}  // namespace

std::shared_ptr<mci::Store> meet(const std::vector<std::string>& handles, int rank, std::int64_t uuid,
                                 std::chrono::milliseconds timeout) {
  const Handle first = parse_handle(handles.front(), "handle 0");
  mci::TcpStoreOptions o;
  o.host = first.host;
  o.port = first.port;
  o.timeout = timeout;
  o.connect_timeout = timeout;
  if (first.token.empty()) {
    const char* job = std::getenv("MCI_JOB_TOKEN");
    o.token = job ? job : "";
  } else {
    o.token = first.token;
  }
  // One error whether handle 0's process was gone before the connection
  // (refused) or went while the meeting ran (the connection lost mid-request).
  const auto unreachable = [&](const std::exception& e) {
    return mci::PeerError("mci_torch: reconfigure (uuid " + std::to_string(uuid) +
                              "): cannot reach the store of handle 0 (the new group's rank 0, " + first.host + ":" +
                              std::to_string(first.port) + "): " + e.what() +
                              ". That process is gone, or its handle is stale: reconfigure without it, with a fresh "
                              "uuid",
                          0);
  };
  std::shared_ptr<mci::Store> base;
  try {
    base = std::make_shared<mci::TcpStore>(o);
  } catch (const std::exception& e) {
    throw unreachable(e);
  }
  try {
    meet_on(base, handles, rank, uuid, timeout);
  } catch (const mci::PeerError& e) {
    throw unreachable(e);
  }
  return base;
}

std::string group_name(std::int64_t uuid) { return "torch-reconfigure-" + std::to_string(uuid); }

}  // namespace mci_torch::reconf
