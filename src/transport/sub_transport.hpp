// A transport over some ranks of another: sub-rank i is rank members[i] of
// the base. Hierarchical collectives run the ordinary algorithms among the
// host leaders this way. It owns nothing: aborting and closing stay with the
// base's owner.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "transport/transport.hpp"

namespace mci::transport {

class SubTransport final : public Transport {
 public:
  SubTransport(Transport& base, const std::vector<int>& members)
      : base_(base),
        members_(members),
        rank_(static_cast<int>(std::find(members.begin(), members.end(), base.rank()) - members.begin())) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const char* name() const override { return base_.name(); }

  OpHandle post_send(int peer, const Fingerprint& fp, const void* data, std::size_t bytes) override {
    return base_.post_send(members_.at(peer), fp, data, bytes);
  }
  OpHandle post_recv(int peer, const Fingerprint& fp, void* data, std::size_t bytes) override {
    return base_.post_recv(members_.at(peer), fp, data, bytes);
  }
  // Its base would match a sender outside the members.
  OpHandle post_recv_any(const Fingerprint& fp, void*, std::size_t) override {
    throw Error("mci: a transport over some ranks of another cannot receive from any source (tag " +
                std::to_string(fp.seq) + "); name the sending rank");
  }
  void wait(const OpHandle& op, const Deadline& dl) override { base_.wait(op, dl); }
  void wait_all(const Deadline& dl) override { base_.wait_all(dl); }
  bool done(const OpHandle& op) const override { return base_.done(op); }
  void progress(std::chrono::milliseconds max_wait, const Deadline& dl) override { base_.progress(max_wait, dl); }
  void reap() override { base_.reap(); }
  void abort(const std::string&) noexcept override {}
  void close() noexcept override {}

 private:
  Transport& base_;
  const std::vector<int>& members_;
  int rank_;
};

}  // namespace mci::transport
