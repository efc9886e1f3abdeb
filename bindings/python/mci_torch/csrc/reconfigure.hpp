// torch 2.15's reconfigure contract on "mci" (c10d::Backend's
// supportsReconfigure / get_reconfigure_handle / reconfigure): the parts
// that are not the backend itself. A handle names one process: where its
// own small mci store listens (started at the first handle asked) and a
// nonce that tells two processes of one host apart. reconfigure() forms
// the group the handles list: every member meets on the store of the
// first handle, under keys scoped by the uuid.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <variant>
#include <vector>

#include "mci/store.hpp"

namespace mci_torch::reconf {

// What a handle says. token empty: the job token (MCI_JOB_TOKEN), not
// written into the handle.
struct Handle {
  std::string host;
  int port = 0;
  std::string token;
  std::string nonce;
};

std::string format_handle(const Handle& h);
// Throws ConfigError naming `where` (e.g. "handle 2") for a string that is
// not an mci handle.
Handle parse_handle(const std::string& text, const std::string& where);

// The members in rank order: a list as given, a set sorted (torch lets the
// backend choose the order of a set; sorted, every rank chooses alike).
std::vector<std::string> ordered(
    const std::variant<std::unordered_set<std::string>, std::vector<std::string>>& handles);

// A short digest of the ordered list: ranks that were given different
// lists disagree on it.
std::string digest(const std::vector<std::string>& handles);

// Every member meets on the store of handle 0: writes what it was given,
// checks that the first to write was given the same (else ConfigError
// naming the difference), then waits until every member has arrived, at
// most `timeout` (else TimeoutError naming those who did not). Returns the
// client of that store for the group's rendezvous (a TcpStore itself, not
// a prefix over one: mci's init listens on the address it reaches a
// TcpStore from); the group's name scopes its keys by the uuid
// (group_name()).
std::shared_ptr<mci::Store> meet(const std::vector<std::string>& handles, int rank, std::int64_t uuid,
                                 std::chrono::milliseconds timeout);

// The mci group name of the group reconfigure `uuid` forms: the same on
// every member, whatever each was before.
std::string group_name(std::int64_t uuid);

}  // namespace mci_torch::reconf
