#include "store/etcd_store.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/deadline.hpp"
#include "common/host_port.hpp"
#include "common/sigpipe_guard.hpp"
#include "mci/errors.hpp"

namespace mci {

namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

// How long a request waits on one member before the next is
// tried: etcd answers in milliseconds; a member that takes this long is cut
// off or overloaded.
constexpr milliseconds kSafeShare{500};
// How long past a wait's deadline its reads may take (EtcdStore::Impl::read_budget).
constexpr milliseconds kReadGrace{500};

// etcd's JSON gateway carries keys and values as base64 (proto3's bytes).
std::string b64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string unb64(const std::string& text) {
  if (text.empty()) return {};
  std::string out(3 * text.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) throw Error(fmt::format("etcd answered a value that is not base64: '{}'", text.substr(0, 80)));
  // EVP_DecodeBlock counts the padding's zero bytes too.
  std::size_t len = static_cast<std::size_t>(n);
  if (text.size() >= 1 && text[text.size() - 1] == '=') --len;
  if (text.size() >= 2 && text[text.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

std::string b64(const StoreValue& v) {
  return b64(std::string_view(reinterpret_cast<const char*>(v.data()), v.size()));
}

// The end of the range of every key that starts with `prefix` (etcd's
// range_end: the prefix with its last byte incremented).
std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& c = reinterpret_cast<unsigned char&>(prefix.back());
    if (c < 0xff) {
      ++c;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

// The gateway writes int64 fields as strings, and leaves out zeros.
std::int64_t int_field(const json& j, const char* key) {
  if (!j.contains(key)) return 0;
  const json& v = j[key];
  if (v.is_number_integer()) return v.get<std::int64_t>();
  const std::string s = v.get<std::string>();
  std::int64_t out = 0;
  std::from_chars(s.data(), s.data() + s.size(), out);
  return out;
}

// A watch's request through the gateway: `range` (key, range_end,
// start_revision) watched, and each message's result handed to `on_result`
// (which ends the watch by answering false). The gateway streams one JSON
// object per line. With etcd's WithRequireLeader (as gRPC metadata), a
// member cut off from the others cancels the watch instead of keeping it
// silent.
httplib::Request watch_request(const json& range, std::function<bool(const json&)> on_result) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v3/watch";
  req.body = json{{"create_request", range}}.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Grpc-Metadata-hasleader", "true");
  auto pending = std::make_shared<std::string>();
  req.content_receiver = [pending, on_result = std::move(on_result)](const char* data, std::size_t n, std::uint64_t,
                                                                     std::uint64_t) {
    pending->append(data, n);
    for (auto nl = pending->find('\n'); nl != std::string::npos; nl = pending->find('\n')) {
      const json m = json::parse(pending->substr(0, nl), nullptr, false);
      pending->erase(0, nl + 1);
      if (m.is_object() && !on_result(m.value("result", json::object()))) return false;
    }
    return true;
  };
  return req;
}

HostPort parse_endpoint(std::string e) {
  if (e.starts_with("http://")) e = e.substr(7);
  if (e.starts_with("https://")) e = e.substr(8);
  if (!e.empty() && e.back() == '/') e.pop_back();
  std::string why;
  auto out = split_host_port(e, why);
  if (!out) throw ConfigError(fmt::format("etcd endpoint '{}': {} (HOST:PORT, e.g. node1:2379)", e, why));
  if (out->port == 0) out->port = 2379;
  return *out;
}

// The options with TLS asked for by an "https://" endpoint, checked: every
// endpoint speaks the same protocol, and a client certificate comes with
// its key.
EtcdStoreOptions with_protocol(EtcdStoreOptions o) {
  const auto tls = std::count_if(o.endpoints.begin(), o.endpoints.end(),
                                 [](const std::string& e) { return e.starts_with("https://"); });
  const auto plain = std::count_if(o.endpoints.begin(), o.endpoints.end(),
                                   [](const std::string& e) { return e.starts_with("http://"); });
  if ((tls > 0 && plain > 0) || (plain > 0 && o.https)) {
    throw ConfigError(
        "the etcd endpoints mix http:// and https://: a cluster speaks one protocol; give them all alike");
  }
  o.https = o.https || tls > 0;
  if (o.cert.empty() != o.key.empty()) {
    throw ConfigError(
        "etcd over TLS: a client certificate needs its key and a key its certificate (--rdzv_conf cert=FILE,key=FILE)");
  }
  if (!o.https && (!o.cacert.empty() || !o.cert.empty())) {
    throw ConfigError(
        "etcd: certificates were given but the endpoints speak plain http; add --rdzv_conf protocol=https (or "
        "https:// endpoints)");
  }
  for (const std::string* f : {&o.cacert, &o.cert, &o.key}) {
    if (!f->empty() && ::access(f->c_str(), R_OK) != 0) {
      throw ConfigError(fmt::format("etcd over TLS: cannot read '{}': {}", *f, std::strerror(errno)));
    }
  }
  return o;
}

// Where a job's keys live: PREFIX/JOB/.
std::string job_namespace(const EtcdStoreOptions& o) { return o.prefix + "/" + o.job_id + "/"; }

// A client of one member, over TLS when the options ask for it. Built from
// the host and port, not a URL: httplib's URL form takes no IPv6 literal
// with letters in it ([fd00::a]) and would fall back to plain http.
std::unique_ptr<httplib::ClientImpl> member_client(const HostPort& at, const EtcdStoreOptions& o) {
  if (!o.https) return std::make_unique<httplib::ClientImpl>(at.host, at.port);
  auto c = o.cert.empty() ? std::make_unique<httplib::SSLClient>(at.host, at.port)
                          : std::make_unique<httplib::SSLClient>(at.host, at.port, o.cert, o.key);
  if (!o.cacert.empty()) c->set_ca_cert_path(o.cacert);
  c->enable_server_certificate_verification(true);
  return c;
}

// What a failed request's error means, with what to do for TLS's.
std::string error_text(httplib::Error e, const EtcdStoreOptions& o) {
  switch (e) {
    case httplib::Error::Read:
    case httplib::Error::Write:
      // TLS 1.3 checks the client's certificate after the handshake: a
      // member that wants one closes the connection at the first request.
      if (o.https && o.cert.empty()) {
        return httplib::to_string(e) +
               ": the connection closed; a member started with --client-cert-auth wants a client certificate "
               "(--rdzv_conf cert=FILE,key=FILE)";
      }
      return httplib::to_string(e);
    case httplib::Error::SSLServerVerification:
      return "its certificate is not signed by the CA given (--rdzv_conf cacert=FILE) or does not name this address";
    case httplib::Error::SSLConnection:
      // OpenSSL ends the handshake itself when the member's certificate does
      // not verify, so this also covers the wrong CA.
      return "the TLS handshake failed: the member's certificate may not be signed by the CA given (--rdzv_conf "
             "cacert=FILE), it may want a client certificate (--rdzv_conf cert=FILE,key=FILE), or it speaks plain "
             "http";
    case httplib::Error::SSLLoadingCerts:
      return "the certificate files could not be loaded (--rdzv_conf cacert, cert, key)";
    default: return httplib::to_string(e);
  }
}

// Where compare-and-set markers live (EtcdStore::Impl::put_if_unchanged):
// mci's own keys, which num_keys() leaves out.
const std::string kMarkers = "mci/relay/txn/";

std::string random_tag() {
  unsigned char b[6];
  if (RAND_bytes(b, sizeof b) != 1) throw Error("no random bytes for an etcd client's tag");
  return fmt::format("{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}", b[0], b[1], b[2], b[3], b[4], b[5]);
}

// A key's value as read, and the revisions a write that read it compares.
struct Read {
  std::optional<StoreValue> value;
  std::int64_t mod_revision = 0;  // 0: no such key
  std::int64_t revision = 0;      // the store's revision when read
};

// The values of reads, and the lowest revision they were read at (a wait
// for a change starts after it, so that nothing written since is missed).
std::vector<std::optional<StoreValue>> values_of(std::vector<Read>& reads) {
  std::vector<std::optional<StoreValue>> out;
  out.reserve(reads.size());
  for (auto& r : reads) out.push_back(std::move(r.value));
  return out;
}
std::int64_t lowest_revision(const std::vector<Read>& reads) {
  std::int64_t rev = 0;
  for (const auto& r : reads) rev = rev == 0 ? r.revision : std::min(rev, r.revision);
  return rev;
}

}  // namespace

struct EtcdStore::Impl {
  EtcdStoreOptions o;
  std::vector<HostPort> endpoints;
  std::string ns;  // PREFIX/JOB/
  std::mutex mu;   // one request at a time on the kept connections
  std::atomic<bool> interrupted{false};
  std::mutex watch_mu;                      // guards watching
  httplib::ClientImpl* watching = nullptr;  // the watch in progress, for interrupt()
  std::atomic<std::size_t> current{0};      // written under mu; read without it by endpoint_in_use()
  std::vector<std::unique_ptr<httplib::ClientImpl>> clients;
  std::string tag = random_tag();  // names this client's write markers
  std::uint64_t writes = 0;
  std::string last_marker;

  explicit Impl(EtcdStoreOptions opts) : o(with_protocol(std::move(opts))) {
    if (o.endpoints.empty()) throw ConfigError("the etcd store needs at least one endpoint (HOST:PORT)");
    if (o.job_id.empty() || o.job_id.find('/') != std::string::npos) {
      throw ConfigError(
          fmt::format("the etcd store's job id '{}' must be a non-empty name without '/' "
                      "(mcirun --rdzv_id)",
                      o.job_id));
    }
    for (const auto& e : o.endpoints) endpoints.push_back(parse_endpoint(e));
    clients.resize(endpoints.size());
    ns = job_namespace(o);
  }

  std::string where() const {
    std::string out;
    for (const auto& e : endpoints) out += (out.empty() ? "" : ",") + e.text();
    return "etcd " + out;
  }

  std::string key(const std::string& k) const { return ns + k; }

  // A put's body: under `lease` unless 0.
  json put(const std::string& k, const StoreValue& value, std::int64_t lease) const {
    json p = {{"key", b64(key(k))}, {"value", b64(value)}};
    if (lease != 0) p["lease"] = std::to_string(lease);
    return p;
  }

  httplib::ClientImpl& client(std::size_t i) {
    if (!clients[i]) {
      clients[i] = member_client(endpoints[i], o);
      clients[i]->set_keep_alive(true);
      // Headers and body leave in two writes: without this, Nagle's wait
      // for the first one's ACK costs each request ~40 ms (delayed ACK).
      clients[i]->set_tcp_nodelay(true);
    }
    return *clients[i];
  }

  // One request, to the first endpoint that answers, starting with the one
  // that answered last. Throws PeerError naming each endpoint tried.
  void check_interrupted() const {
    if (interrupted) throw Error(fmt::format("the job's store on {} was closed while a call waited", where()));
  }

  // Members are tried in turn, starting with the one that answered last,
  // and tried again while the budget lasts unless one gave a final answer
  // (no connection, no answer in time, no leader yet: a leader's election,
  // after a member was lost, takes an election timeout).
  // Every request here is safe to send again (reads, puts, deletes, and
  // transactions whose compare fails once they took effect), so each member
  // gets a short time: one cut off, holding a kept connection, answers
  // nothing, and the next must get its turn well within the caller's wait.
  // `unanswered`, when given, says whether an attempt before the answer was
  // sent and never answered (it may have taken effect: see put_if_unchanged).
  json call(const std::string& path, const json& body, milliseconds budget, bool* unanswered = nullptr) {
    check_interrupted();
    const SigpipeGuard no_sigpipe;  // a member gone under a TLS write
    std::lock_guard lk(mu);
    const std::string text = body.dump();
    const Deadline dl(std::max(budget, milliseconds(1)));
    std::string tried;
    for (;;) {
      tried.clear();
      bool again = true;  // no member gave a final answer: every request here may be sent again
      const std::size_t from = current;
      for (std::size_t n = 0; n < endpoints.size(); ++n) {
        const std::size_t i = (from + n) % endpoints.size();
        // A member that failed is not asked first next time: a short call
        // (a wait's read gets little more than the wait) may have time for
        // one member only, and must not find the same dead one every time.
        if (n > 0) current = i;
        httplib::ClientImpl& c = client(i);
        // A member that holds a kept connection but answers nothing (cut
        // off) must not take the whole budget: the others get their turn,
        // two at least however short the call.
        const bool last = n + 1 == endpoints.size();
        const auto share = std::min(kSafeShare, std::max(dl.budget() / 2, milliseconds(1)));
        const auto t = !last ? std::min(dl.wait_left(), share) : dl.wait_left();
        c.set_connection_timeout(std::min<milliseconds>(t, std::chrono::seconds(2)));
        c.set_read_timeout(t);
        c.set_write_timeout(t);
        auto res = c.Post(path, text, "application/json");
        if (!res) {
          const auto e = res.error();
          tried += fmt::format("{}{} ({})", tried.empty() ? "" : "; ", endpoints[i].text(), error_text(e, o));
          const bool unsent = e == httplib::Error::Connection || e == httplib::Error::ConnectionTimeout;
          if (!unsent && unanswered) *unanswered = true;
          clients[i].reset();  // a fresh connection next time
          continue;
        }
        json answer = json::parse(res->body, nullptr, false);
        if (res->status != 200) {
          const std::string why =
              answer.is_object() && answer.contains("message") ? answer["message"].get<std::string>() : res->body;
          // No leader, or this member is cut off from the others: another may serve.
          tried += fmt::format("{}{} (HTTP {}: {})", tried.empty() ? "" : "; ", endpoints[i].text(), res->status, why);
          again = again && res->status >= 500;  // a 4xx is etcd's answer (no such lease): final
          // etcd's own timeout (the proposal may still be applied).
          if (res->status >= 500 && unanswered) *unanswered = true;
          continue;
        }
        if (answer.is_discarded()) {
          throw Error(fmt::format("etcd at {} answered {} with something that is not JSON: '{}'", endpoints[i].text(),
                                  path, res->body.substr(0, 200)));
        }
        current = i;
        return answer;
      }
      if (!again || dl.expired()) break;
      std::this_thread::sleep_for(std::min<milliseconds>(milliseconds(50), dl.wait_left()));
      check_interrupted();
    }
    throw PeerError(fmt::format("the job's store on etcd could not be reached: tried {}. Check the endpoints "
                                "(mcirun --rdzv_endpoint=HOST:PORT,...) and that a quorum of etcd's members runs",
                                tried),
                    -1);
  }

  json call(const std::string& path, const json& body) { return call(path, body, o.request_timeout); }

  Read read(const std::string& k, milliseconds budget) {
    const json r = call("/v3/kv/range", {{"key", b64(key(k))}}, budget);
    Read out;
    out.revision = int_field(r.value("header", json::object()), "revision");
    if (r.contains("kvs") && !r["kvs"].empty()) {
      const json& kv = r["kvs"][0];
      out.value = to_bytes(unb64(kv.value("value", "")));
      out.mod_revision = int_field(kv, "mod_revision");
    }
    return out;
  }

  // Puts `value` if the key is still as `was` read it; false when another
  // client wrote it meanwhile. A marker key of this client's goes with the
  // put, and must not exist yet: so the same transaction sent again (its
  // first answer lost with a member) cannot take effect twice, and when a
  // resend fails its compare, the marker says whether the first did take
  // effect (else a caller's add() would add again). The marker of this
  // client's previous write goes with the next one: one at a time.
  bool put_if_unchanged(const std::string& k, const Read& was, const StoreValue& value) {
    json cmp = {{"key", b64(key(k))}, {"result", "EQUAL"}};
    if (was.value) {
      cmp["target"] = "MOD";
      cmp["mod_revision"] = std::to_string(was.mod_revision);
    } else {
      cmp["target"] = "VERSION";
      cmp["version"] = "0";
    }
    const std::string marker = fmt::format("{}{}/{}", kMarkers, tag, ++writes);
    const json fresh = {{"key", b64(key(marker))}, {"target", "VERSION"}, {"result", "EQUAL"}, {"version", "0"}};
    json ops = json::array({{{"request_put", put(k, value, o.lease)}}, {{"request_put", put(marker, {}, o.lease)}}});
    if (!last_marker.empty()) ops.push_back({{"request_delete_range", {{"key", b64(key(last_marker))}}}});
    bool unanswered = false;
    const json r =
        call("/v3/kv/txn", {{"compare", json::array({cmp, fresh})}, {"success", ops}}, o.request_timeout, &unanswered);
    const bool done = r.value("succeeded", false) || (unanswered && read(marker, o.request_timeout).value.has_value());
    if (done) last_marker = marker;
    return done;
  }

  // Every key's value and mod revision in as few requests as etcd allows
  // (it takes at most 128 operations in one transaction by default), each
  // with the store's revision its transaction read it at.
  std::vector<Read> read_all(const std::vector<std::string>& keys, milliseconds budget) {
    constexpr std::size_t kMaxOps = 128;
    std::vector<Read> out(keys.size());
    for (std::size_t from = 0; from < keys.size(); from += kMaxOps) {
      json ops = json::array();
      const std::size_t to = std::min(keys.size(), from + kMaxOps);
      for (std::size_t i = from; i < to; ++i) ops.push_back({{"request_range", {{"key", b64(key(keys[i]))}}}});
      const json r = call("/v3/kv/txn", {{"success", ops}}, budget);
      const std::int64_t rev = int_field(r.value("header", json::object()), "revision");
      const json& rs = r.value("responses", json::array());
      for (std::size_t i = from; i < to; ++i) {
        out[i].revision = rev;
        if (i - from >= rs.size()) continue;
        const json& range = rs[i - from].value("response_range", json::object());
        if (range.contains("kvs") && !range["kvs"].empty()) {
          const json& kv = range["kvs"][0];
          out[i].value = to_bytes(unb64(kv.value("value", "")));
          out[i].mod_revision = int_field(kv, "mod_revision");
        }
      }
    }
    return out;
  }

  // Waits until a key of this job in [from, to) changes after `revision`
  // (`to` empty: the key `from` alone; both empty: any key of the job), at
  // most until `dl`: a watch in a connection of its own (ending the watch
  // closes it). Watching only what a wait misses keeps a write from waking
  // every waiter of the job. False when the deadline came first.
  bool wait_for_change(std::int64_t revision, const Deadline& dl, const std::string& from = "",
                       const std::string& to = "") {
    if (o.changes) {
      const bool changed = o.changes->wait(revision, from, to, dl.at(), interrupted);
      check_interrupted();
      return changed;
    }
    std::string unreachable;
    std::optional<Deadline> failing;  // since every member failed, in a row: how long that may last
    while (!dl.expired()) {
      check_interrupted();
      json range = {{"start_revision", std::to_string(revision + 1)}};
      if (from.empty()) {
        range["key"] = b64(ns);
        range["range_end"] = b64(prefix_end(ns));
      } else {
        range["key"] = b64(key(from));
        if (!to.empty()) range["range_end"] = b64(key(to));
      }
      std::size_t i;
      {
        std::lock_guard lk(mu);
        i = current;
      }
      const auto own = member_client(endpoints[i], o);
      httplib::ClientImpl& c = *own;
      c.set_tcp_nodelay(true);
      c.set_connection_timeout(std::min<milliseconds>(dl.wait_left(), std::chrono::seconds(2)));
      c.set_read_timeout(dl.wait_left());
      bool changed = false;
      // An event, the revision compacted away, the watch canceled: read again.
      httplib::Request req = watch_request(range, [&](const json& r) {
        changed = (r.contains("events") && !r["events"].empty()) || int_field(r, "compact_revision") > 0 ||
                  r.value("canceled", false);
        return !changed;
      });
      httplib::Response res;
      httplib::Error err = httplib::Error::Success;
      {
        std::lock_guard lk(watch_mu);
        watching = &c;
      }
      // interrupt() stops the watch from here on (checked under watch_mu).
      if (!interrupted) {
        const SigpipeGuard no_sigpipe;
        c.send(req, res, err);
      }
      {
        std::lock_guard lk(watch_mu);
        watching = nullptr;
      }
      check_interrupted();
      if (changed) return true;
      if (err == httplib::Error::Success || err == httplib::Error::Canceled || err == httplib::Error::Read) {
        unreachable.clear();  // answered (or the wait's time ran out): watch again while time is left
        failing.reset();
        continue;
      }
      // This member is out of reach: watch on the next; none answering for
      // a request's time is the store lost, said as a request would say it.
      unreachable +=
          fmt::format("{}{} ({})", unreachable.empty() ? "" : "; ", endpoints[i].text(), httplib::to_string(err));
      if (!failing) failing.emplace(o.request_timeout);
      if (failing->expired()) {
        throw PeerError(fmt::format("the job's store on etcd could not be reached while waiting: tried {}. Check "
                                    "that a quorum of etcd's members runs",
                                    unreachable),
                        -1);
      }
      std::lock_guard lk(mu);
      current = (i + 1) % endpoints.size();
      if (current.load() == 0) std::this_thread::sleep_for(milliseconds(20));  // a round done: not a busy loop
    }
    return false;
  }

  // A wait's reads get its own time and a little more, not a request's
  // whole budget: the client of a relay gives up on its answer soon after
  // the wait's deadline (a lazy connection's lookup asks for 1 ms), and a
  // late answer would break its connection. A read that etcd did not
  // answer by then (a leader's election, a member lost) is that wait's
  // timeout, which the caller may ask again.
  milliseconds read_budget(const Deadline& dl) const {
    return std::min(o.request_timeout, dl.wait_left() + kReadGrace);
  }
  template <class F>
  auto reading(const Deadline& dl, milliseconds t, const std::string& what, F&& f) {
    try {
      return f(read_budget(dl));
    } catch (const PeerError& e) {
      if (!dl.expired()) throw;
      throw timed_out(t, fmt::format("{} (etcd did not answer in time: {})", what, e.what()));
    }
  }

  TimeoutError timed_out(milliseconds t, const std::string& what) const {
    return TimeoutError(
        fmt::format("Timed out waiting {}ms for {} on {} (job '{}')", t.count(), what, where(), o.job_id));
  }
};

EtcdStore::EtcdStore(EtcdStoreOptions o) : impl_(std::make_unique<Impl>(std::move(o))) {
  set_timeout(impl_->o.timeout);
  (void)impl_->call("/v3/kv/range", {{"key", b64(impl_->ns)}, {"count_only", true}});
}

EtcdStore::~EtcdStore() = default;

void EtcdStore::set(const std::string& key, const StoreValue& value) {
  (void)impl_->call("/v3/kv/put", impl_->put(key, value, impl_->o.lease));
}

StoreValue EtcdStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const Deadline dl(std::max(timeout, milliseconds(0)));
  const std::string what = fmt::format("store key '{}'", key);
  for (;;) {
    Read r = impl_->reading(dl, timeout, what, [&](milliseconds b) { return impl_->read(key, b); });
    if (r.value) return *std::move(r.value);
    if (!impl_->wait_for_change(r.revision, dl, key)) {
      throw impl_->timed_out(timeout, what);
    }
  }
}

std::int64_t EtcdStore::add(const std::string& key, std::int64_t delta) {
  for (;;) {
    const Read r = impl_->read(key, impl_->o.request_timeout);
    std::int64_t now = 0;
    if (r.value) {
      const std::string s = to_string(*r.value);
      const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), now);
      if (ec != std::errc() || ptr != s.data() + s.size()) {
        throw Error(
            fmt::format("store key '{}' holds '{}', not a number: add() needs a counter", key, s.substr(0, 80)));
      }
    }
    const std::int64_t next = now + delta;
    if (impl_->put_if_unchanged(key, r, to_bytes(std::to_string(next)))) return next;
  }
}

StoreValue EtcdStore::compare_set(const std::string& key, const StoreValue& expected, const StoreValue& desired) {
  for (;;) {
    const Read r = impl_->read(key, impl_->o.request_timeout);
    const StoreValue now = r.value.value_or(StoreValue{});
    if (now != expected) return now;
    if (impl_->put_if_unchanged(key, r, desired)) return desired;
  }
}

StoreValue EtcdStore::append(const std::string& key, const StoreValue& value) {
  for (;;) {
    const Read r = impl_->read(key, impl_->o.request_timeout);
    StoreValue next = r.value.value_or(StoreValue{});
    if (value.empty()) return next;  // a read: nothing to write
    next.insert(next.end(), value.begin(), value.end());
    if (impl_->put_if_unchanged(key, r, next)) return next;
  }
}

void EtcdStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const Deadline dl(std::max(timeout, milliseconds(0)));
  for (;;) {
    auto reads = impl_->reading(dl, timeout, "store keys", [&](milliseconds b) { return impl_->read_all(keys, b); });
    const std::int64_t revision = lowest_revision(reads);
    const auto values = values_of(reads);
    std::string missing;
    const std::string* first = nullptr;  // watched: the others are read again once it comes
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (values[i]) continue;
      missing += fmt::format("{}'{}'", missing.empty() ? "" : ", ", keys[i]);
      if (!first) first = &keys[i];
    }
    if (missing.empty()) return;
    if (!impl_->wait_for_change(revision, dl, *first)) throw impl_->timed_out(timeout, "store keys " + missing);
  }
}

bool EtcdStore::check(const std::vector<std::string>& keys) {
  const auto reads = impl_->read_all(keys, impl_->o.request_timeout);
  return std::all_of(reads.begin(), reads.end(), [](const Read& r) { return r.value.has_value(); });
}

std::vector<std::optional<StoreValue>> EtcdStore::get_range(const std::string& prefix, std::int64_t first,
                                                            std::int64_t count, const std::string& stop,
                                                            std::chrono::milliseconds timeout) {
  const Deadline dl(std::max(timeout, milliseconds(0)));
  std::vector<std::string> keys;
  for (std::int64_t i = 0; i < count; ++i) keys.push_back(fmt::format("{}/{}", prefix, first + i));
  if (!stop.empty()) keys.push_back(stop);
  for (;;) {
    auto reads = impl_->reading(dl, timeout,
                                fmt::format("store keys '{}/{}' to '{}/{}'", prefix, first, prefix, first + count - 1),
                                [&](milliseconds b) { return impl_->read_all(keys, b); });
    const std::int64_t revision = lowest_revision(reads);
    auto values = values_of(reads);
    const bool stopped = !stop.empty() && values.back().has_value();
    if (!stop.empty()) values.pop_back();
    const auto missing = std::count_if(values.begin(), values.end(), [](const auto& v) { return !v.has_value(); });
    if (missing == 0 || stopped) return values;
    // Without a stop key, the range's keys alone; with one, the job's keys
    // (one watch cannot hold two ranges).
    const std::string from = stop.empty() ? prefix + "/" : "";
    const std::string to = stop.empty() ? prefix_end(prefix + "/") : "";
    if (!impl_->wait_for_change(revision, dl, from, to)) {
      throw impl_->timed_out(timeout, fmt::format("store keys '{}/{}' to '{}/{}' ({} of {} missing)", prefix, first,
                                                  prefix, first + count - 1, missing, count));
    }
  }
}

bool EtcdStore::remove(const std::string& key) {
  const json r = impl_->call("/v3/kv/deleterange", {{"key", b64(impl_->key(key))}});
  return int_field(r, "deleted") > 0;
}

// The job's keys, not mci's own under mci/relay/ (relays' liveness and
// promises, write markers).
std::int64_t EtcdStore::num_keys() {
  const std::string own = impl_->key("mci/relay/");
  auto count = [&](const std::string& from, const std::string& to) {
    return json{{"request_range", {{"key", b64(from)}, {"range_end", b64(to)}, {"count_only", true}}}};
  };
  const json r =
      impl_->call("/v3/kv/txn",
                  {{"success", json::array({count(impl_->ns, prefix_end(impl_->ns)), count(own, prefix_end(own))})}});
  const json& rs = r.value("responses", json::array());
  if (rs.size() != 2) throw Error("etcd answered a count with something else");
  return int_field(rs[0].value("response_range", json::object()), "count") -
         int_field(rs[1].value("response_range", json::object()), "count");
}

std::string EtcdStore::endpoint_in_use() const { return impl_->endpoints[impl_->current.load()].text(); }

void EtcdStore::interrupt() {
  impl_->interrupted = true;
  if (impl_->o.changes) impl_->o.changes->wake();
  std::lock_guard lk(impl_->watch_mu);
  if (impl_->watching) impl_->watching->stop();
}

std::int64_t EtcdStore::grant_lease(std::chrono::seconds ttl, std::chrono::seconds* granted) {
  const json r = impl_->call("/v3/lease/grant", {{"TTL", std::to_string(ttl.count())}});
  if (granted) *granted = std::chrono::seconds(int_field(r, "TTL"));
  const std::int64_t id = int_field(r, "ID");
  if (id == 0) throw Error(fmt::format("etcd granted no lease: {}", r.dump().substr(0, 200)));
  return id;
}

bool EtcdStore::keep_alive(std::int64_t lease) {
  // A stream in etcd's API; through the gateway one message in, one out.
  const json r = impl_->call("/v3/lease/keepalive", {{"ID", std::to_string(lease)}});
  return int_field(r.value("result", json::object()), "TTL") > 0;
}

void EtcdStore::revoke_lease(std::int64_t lease) {
  (void)impl_->call("/v3/lease/revoke", {{"ID", std::to_string(lease)}});
}

void EtcdStore::set(const std::string& key, const StoreValue& value, std::int64_t lease) {
  (void)impl_->call("/v3/kv/put", impl_->put(key, value, lease));
}

std::vector<std::optional<StoreValue>> EtcdStore::read(const std::vector<std::string>& keys,
                                                       std::chrono::milliseconds budget) {
  auto reads = impl_->read_all(keys, std::min(budget, impl_->o.request_timeout));
  return values_of(reads);
}

bool EtcdStore::settle(const std::vector<std::string>& claims,
                       const std::vector<std::pair<std::string, StoreValue>>& appends) {
  using json = nlohmann::json;
  std::vector<std::string> keys = claims;
  for (const auto& a : appends) keys.push_back(a.first);
  for (;;) {
    const std::vector<Read> reads = impl_->read_all(keys, impl_->o.request_timeout);
    json compare = json::array(), ops = json::array();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const Read& was = reads[i];
      const std::string k = b64(impl_->key(keys[i]));
      const auto unchanged = [&] {
        return json{{"key", k},
                    {"target", "MOD"},
                    {"result", "EQUAL"},
                    {"mod_revision", std::to_string(was.mod_revision)}};
      };
      if (i < claims.size()) {
        if (!was.value) return false;  // settled already
        compare.push_back(unchanged());
        ops.push_back({{"request_delete_range", {{"key", k}}}});
        continue;
      }
      StoreValue next = was.value.value_or(StoreValue{});
      const auto& add = appends[i - claims.size()].second;
      next.insert(next.end(), add.begin(), add.end());
      compare.push_back(was.value ? unchanged()
                                  : json{{"key", k}, {"target", "VERSION"}, {"result", "EQUAL"}, {"version", "0"}});
      ops.push_back({{"request_put", impl_->put(keys[i], next, impl_->o.lease)}});
    }
    const json t = impl_->call("/v3/kv/txn", {{"compare", compare}, {"success", ops}});
    if (t.value("succeeded", false)) return true;
    // Another client wrote one of the keys meanwhile: read them again.
  }
}

std::vector<std::vector<std::pair<std::string, StoreValue>>> EtcdStore::list(const std::vector<std::string>& prefixes) {
  json ops = json::array();
  for (const auto& p : prefixes) {
    const std::string k = impl_->key(p);
    ops.push_back({{"request_range", {{"key", b64(k)}, {"range_end", b64(prefix_end(k))}}}});
  }
  const json r = impl_->call("/v3/kv/txn", {{"success", ops}});
  std::vector<std::vector<std::pair<std::string, StoreValue>>> out(prefixes.size());
  const json& rs = r.value("responses", json::array());
  for (std::size_t i = 0; i < prefixes.size() && i < rs.size(); ++i) {
    const json& range = rs[i].value("response_range", json::object());
    for (const json& kv : range.value("kvs", json::array())) {
      std::string k = unb64(kv.value("key", ""));
      if (k.starts_with(impl_->ns)) k.erase(0, impl_->ns.size());
      out[i].emplace_back(std::move(k), to_bytes(unb64(kv.value("value", ""))));
    }
  }
  return out;
}

std::shared_ptr<Store> EtcdStore::clone() const {
  auto c = std::make_shared<EtcdStore>(impl_->o);
  c->set_timeout(timeout());
  return c;
}

// --- EtcdChanges ---------------------------------------------------------

struct EtcdChanges::Impl {
  EtcdStoreOptions o;  // the endpoints' protocol and certificates
  std::vector<HostPort> endpoints;
  std::size_t first = 0;  // the member the stream tries first: the one the constructor reached
  std::string ns;
  std::mutex mu;  // guards what follows
  std::condition_variable cv;
  std::map<std::string, std::int64_t> changed;  // key (without ns) -> revision of its last change
  std::int64_t latest = 0;                      // the last revision the watch delivered
  std::int64_t start = 0;                       // the watch's next start revision
  std::uint64_t epoch = 0;                      // bumped when the watch starts over after a gap
  std::int64_t wanted = 0;                      // the newest revision a wait has read
  bool stopping = false;
  httplib::ClientImpl* client = nullptr;  // the stream in progress, stopped by the destructor
  std::thread thread;

  void run();
};

EtcdChanges::EtcdChanges(const EtcdStoreOptions& o) : impl_(std::make_unique<Impl>()) {
  EtcdStoreOptions plain = o;
  plain.changes.reset();
  EtcdStore probe(plain);  // reaches a member, or throws as a store would
  impl_->o = with_protocol(plain);
  for (const auto& e : plain.endpoints) impl_->endpoints.push_back(parse_endpoint(e));
  impl_->ns = job_namespace(o);
  // From the present revision on: every wait reads after this.
  // The stream starts at the member the probe reached (the first may be down).
  const std::string reached = probe.endpoint_in_use();
  for (std::size_t i = 0; i < impl_->endpoints.size(); ++i) {
    if (impl_->endpoints[i].text() == reached) impl_->first = i;
  }
  const auto c = member_client(impl_->endpoints[impl_->first], impl_->o);
  const SigpipeGuard no_sigpipe;
  auto res = c->Post("/v3/kv/range", json{{"key", b64(impl_->ns)}, {"count_only", true}}.dump(), "application/json");
  if (!res || res->status != 200) throw PeerError("the job's store on etcd could not be reached to watch it", -1);
  const json r = json::parse(res->body, nullptr, false);
  impl_->latest = int_field(r.is_object() ? r.value("header", json::object()) : json::object(), "revision");
  impl_->start = impl_->latest + 1;
  impl_->thread = std::thread([m = impl_.get()] { m->run(); });
}

EtcdChanges::~EtcdChanges() {
  {
    std::lock_guard lk(impl_->mu);
    impl_->stopping = true;
    if (impl_->client) impl_->client->stop();
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void EtcdChanges::wake() {
  std::lock_guard lk(impl_->mu);
  impl_->cv.notify_all();
}

bool EtcdChanges::wait(std::int64_t revision, const std::string& from, const std::string& to,
                       std::chrono::steady_clock::time_point until, const std::atomic<bool>& interrupted) {
  std::unique_lock lk(impl_->mu);
  const std::uint64_t epoch = impl_->epoch;
  impl_->wanted = std::max(impl_->wanted, revision);
  auto seen = [&] {
    if (interrupted || impl_->epoch != epoch) return true;
    if (from.empty()) return impl_->latest > revision;
    if (to.empty()) {
      const auto it = impl_->changed.find(from);
      return it != impl_->changed.end() && it->second > revision;
    }
    for (auto it = impl_->changed.lower_bound(from); it != impl_->changed.end() && it->first < to; ++it) {
      if (it->second > revision) return true;
    }
    return false;
  };
  return impl_->cv.wait_until(lk, until, seen);
}

void EtcdChanges::Impl::run() {
  const SigpipeGuard no_sigpipe;  // this thread's whole life: a member gone under a TLS write
  std::size_t i = first;
  while (true) {
    const auto own = member_client(endpoints[i], o);
    httplib::ClientImpl& c = *own;
    c.set_tcp_nodelay(true);
    c.set_connection_timeout(std::chrono::seconds(2));
    // A member cut off from here sends nothing, not even its cancel: a
    // stream silent this long is looked at (below).
    c.set_read_timeout(std::chrono::seconds(1));
    std::int64_t from;
    {
      std::lock_guard lk(mu);
      if (stopping) return;
      client = &c;
      from = start;
    }
    const json range = {{"key", b64(ns)}, {"range_end", b64(prefix_end(ns))}, {"start_revision", std::to_string(from)}};
    httplib::Request req = watch_request(range, [&](const json& r) {
      std::lock_guard lk(mu);
      if (int_field(r, "compact_revision") > 0) {
        // What it missed is gone: every wait reads again.
        start = int_field(r, "compact_revision");
        ++epoch;
        cv.notify_all();
        return false;
      }
      if (r.value("canceled", false)) return false;
      for (const json& ev : r.value("events", json::array())) {
        const json& kv = ev.value("kv", json::object());
        std::string k = unb64(kv.value("key", ""));
        if (k.starts_with(ns)) k.erase(0, ns.size());
        const std::int64_t rev = int_field(kv, "mod_revision");
        changed[k] = std::max(changed[k], rev);
        latest = std::max(latest, rev);
        start = std::max(start, rev + 1);
      }
      // A progress header moves the revision on without events.
      latest = std::max(latest, int_field(r.value("header", json::object()), "revision"));
      cv.notify_all();
      return true;
    });
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    c.send(req, res, err);
    {
      std::lock_guard lk(mu);
      client = nullptr;
      if (stopping) return;
    }
    // The stream ended: idle for a while (a member in good health: the
    // same, from where it stopped), or failed, or behind what the waits
    // read elsewhere (a member lost, cut off, or without a leader: the next).
    bool behind;
    {
      std::lock_guard lk(mu);
      behind = latest < wanted;
    }
    if (err != httplib::Error::Read || behind) {
      i = (i + 1) % endpoints.size();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace mci
