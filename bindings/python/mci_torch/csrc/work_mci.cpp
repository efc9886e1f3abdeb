#include "work_mci.hpp"

#include <ATen/core/jit_type.h>

#include "mci/errors.hpp"

namespace mci_torch {
namespace {

// e's type (so Python sees the same mci_torch exception) with prefix before
// its text.
std::exception_ptr prefixed(const std::exception_ptr& e, const std::string& prefix) {
  try {
    std::rethrow_exception(e);
  } catch (const mci::TimeoutError& x) {
    return std::make_exception_ptr(mci::TimeoutError(prefix + x.what()));
  } catch (const mci::PeerError& x) {
    return std::make_exception_ptr(mci::PeerError(prefix + x.what(), x.peer()));
  } catch (const mci::MismatchError& x) {
    return std::make_exception_ptr(mci::MismatchError(prefix + x.what()));
  } catch (const mci::ConfigError& x) {
    return std::make_exception_ptr(mci::ConfigError(prefix + x.what()));
  } catch (const std::exception& x) {
    return std::make_exception_ptr(mci::Error(prefix + x.what()));
  }
}

// The Future's error: a RuntimeError in Python whose text starts with the
// mci_torch exception's name, as the pure-Python backend's Future gives.
// (torch's C++ callers of a Future, DDP's reducer, rethrow it as a plain
// RuntimeError whatever its type, so the name goes into the text.)
std::exception_ptr for_future(const std::exception_ptr& e) {
  const auto named = [](const char* name, const std::exception& x) {
    return std::make_exception_ptr(std::runtime_error(std::string("mci_torch.") + name + ": " + x.what()));
  };
  try {
    std::rethrow_exception(e);
  } catch (const mci::TimeoutError& x) {
    return named("TimeoutError", x);
  } catch (const mci::PeerError& x) {
    return named("PeerError", x);
  } catch (const mci::MismatchError& x) {
    return named("MismatchError", x);
  } catch (const mci::ConfigError& x) {
    return named("ConfigError", x);
  } catch (const mci::Error& x) {
    return named("MciError", x);
  } catch (...) {
    return e;
  }
}

}  // namespace

void UnseenFailures::add(std::weak_ptr<void> token, const std::string& what, std::exception_ptr e) {
  std::lock_guard lock(mu_);
  entries_.push_back({std::move(token), what, std::move(e)});
}

void UnseenFailures::throw_first() {
  std::unique_lock lock(mu_);
  while (!entries_.empty()) {
    Entry e = std::move(entries_.front());
    entries_.pop_front();
    if (e.seen_flag.expired()) continue;  // somebody looked at it meanwhile
    lock.unlock();
    std::rethrow_exception(prefixed(e.error, "mci_torch: an earlier async " + e.what +
                                                 " on this group failed, and nobody waited on its Work (its "
                                                 "output was never written): "));
  }
}

WorkMCI::WorkMCI(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
                 std::function<void()> finish, std::vector<at::Tensor> keep)
    : c10d::Work(rank, type),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      finish_(std::move(finish)),
      keep_(std::move(keep)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void WorkMCI::complete(const mci::Work& work, const std::shared_ptr<UnseenFailures>& unseen) {
  std::exception_ptr error;
  try {
    work.wait();
    if (finish_) finish_();
  } catch (...) {
    error = std::current_exception();
  }
  duration_ms_ = static_cast<float>(work.duration_ms());
  source_ = work.source();
  finish_ = nullptr;
  keep_.clear();
  if (error) {
    std::weak_ptr<void> flag;
    {
      std::lock_guard lock(touch_mu_);
      flag = unseen_flag_;
    }
    if (!flag.expired()) unseen->add(flag, what_, error);
    future_->setError(for_future(error));
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);  // c10d::Work's: completed_, exception_, wakes wait()
}

int WorkMCI::sourceRank() const {
  if (source_ < 0) {
    throw mci::ConfigError("mci_torch: " + what_ + " has no source rank: only a completed receive has one");
  }
  return source_;
}

void WorkMCI::touch() const {
  std::lock_guard lock(touch_mu_);
  unseen_flag_.reset();
}

bool WorkMCI::wait(std::chrono::milliseconds timeout) {
  touch();
  return c10d::Work::wait(timeout);
}

std::exception_ptr WorkMCI::exception() const {
  touch();
  return c10d::Work::exception();
}

std::vector<at::Tensor> WorkMCI::result() {
  wait();
  return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkMCI::getFuture() {
  touch();
  return future_;
}

float WorkMCI::getDuration() const { return duration_ms_; }

Completer::Completer(std::shared_ptr<UnseenFailures> unseen) : unseen_(std::move(unseen)) {
  std::lock_guard lock(mu_);
  threads_.emplace_back([this] { run(); });
}

Completer::~Completer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // No thread starts once stop_ is set (add_thread_if_needed), so the list
  // is final here.
  for (auto& t : threads_) t.join();
}

void Completer::add_thread_if_needed() {
  if (stop_ || in_callbacks_ == 0 || queue_.size() <= idle_ || threads_.size() >= kMaxThreads) return;
  threads_.emplace_back([this] { run(); });
}

void Completer::push(c10::intrusive_ptr<WorkMCI> w, mci::Work work) {
  {
    std::lock_guard lock(mu_);
    queue_.emplace_back(std::move(w), std::move(work));
    add_thread_if_needed();
  }
  cv_.notify_one();
}

bool Completer::pending() {
  std::lock_guard lock(mu_);
  return busy_ > 0 || !queue_.empty();
}

void Completer::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;  // stopping, nothing left
    auto [w, work] = std::move(queue_.front());
    queue_.pop_front();
    ++busy_;
    lock.unlock();
    try {
      work.wait();
    } catch (...) {  // NOLINT(bugprone-empty-catch): complete() reads the same error
    }
    lock.lock();
    ++in_callbacks_;
    add_thread_if_needed();
    lock.unlock();
    w->complete(work, unseen_);  // its future's callbacks run here
    w.reset();
    lock.lock();
    --in_callbacks_;
    --busy_;
  }
}

}  // namespace mci_torch
