#include "monitor/status_block.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include "common/env.hpp"

namespace mci::monitor {

namespace {

void copy_text(char* to, std::size_t cap, const std::string& s) {
  const std::size_t n = std::min(cap - 1, s.size());
  std::memcpy(to, s.data(), n);
  to[n] = '\0';
}

std::string text_of(const char* from, std::size_t cap) { return std::string(from, ::strnlen(from, cap)); }

std::size_t area_bytes(std::size_t capacity) {
  const std::size_t b = kPage + capacity * sizeof(OpSlot);
  return (b + kPage - 1) / kPage * kPage;
}

std::string this_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

}  // namespace

std::size_t ring_capacity(std::size_t wanted) { return std::bit_ceil(std::max<std::size_t>(wanted, 1)); }

const char* state_name(OpState s) {
  switch (s) {
    case OpState::enqueued: return "enqueued";
    case OpState::started: return "started";
    case OpState::completed: return "completed";
    case OpState::failed: return "failed";
  }
  return "?";
}

// Slot words: 0 id, 1 seq, 2 count, 3 kind/dtype/op/algo/state, 4 root/tag,
// 5 enqueued, 6 started, 7 ended, 8 last rank, 9 its lateness.
std::uint64_t slot_word(const OpRecord& r, int i) {
  switch (i) {
    case 0: return r.id;
    case 1: return r.seq;
    case 2: return r.count;
    case 3:
      return static_cast<std::uint64_t>(r.kind) | static_cast<std::uint64_t>(r.dtype) << 8 |
             static_cast<std::uint64_t>(r.op) << 16 | static_cast<std::uint64_t>(r.algo) << 24 |
             static_cast<std::uint64_t>(r.state) << 32;
    case 4:
      return static_cast<std::uint64_t>(static_cast<std::uint32_t>(r.root)) |
             static_cast<std::uint64_t>(static_cast<std::uint32_t>(r.tag)) << 32;
    case 5: return static_cast<std::uint64_t>(r.enqueued_ns);
    case 6: return static_cast<std::uint64_t>(r.started_ns);
    case 7: return static_cast<std::uint64_t>(r.ended_ns);
    case 8: return static_cast<std::uint64_t>(static_cast<std::int64_t>(r.last_rank));
    case 9: return static_cast<std::uint64_t>(r.last_late_ns);
    default: return static_cast<std::uint64_t>(r.device_ns);
  }
}

std::optional<OpRecord> read_slot(const OpSlot& s) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::uint64_t v1 = s.version.load(std::memory_order_acquire);
    if (v1 & 1) continue;
    std::uint64_t w[OpSlot::kWords];
    for (int i = 0; i < OpSlot::kWords; ++i) w[i] = s.w[i].load(std::memory_order_acquire);
    if (s.version.load(std::memory_order_relaxed) != v1) continue;
    if (v1 == 0) return std::nullopt;
    OpRecord r;
    r.id = w[0];
    r.seq = w[1];
    r.count = w[2];
    // A reader in another process trusts nothing it maps: out-of-range
    // values would index tables by kind or dtype.
    const auto kind = w[3] & 0xff;
    const auto dtype = (w[3] >> 8) & 0xff;
    if (kind >= kOpKindCount || dtype >= static_cast<std::uint64_t>(kNumDTypes)) return std::nullopt;
    r.kind = static_cast<OpKind>(kind);
    r.dtype = static_cast<DType>(dtype);
    r.op = static_cast<ReduceOp>((w[3] >> 16) & 0xff);
    r.algo = static_cast<Algo>((w[3] >> 24) & 0xff);
    r.state = static_cast<OpState>(std::min<std::uint64_t>((w[3] >> 32) & 0xff, 3));
    r.root = static_cast<std::int32_t>(static_cast<std::uint32_t>(w[4]));
    r.tag = static_cast<std::int32_t>(static_cast<std::uint32_t>(w[4] >> 32));
    r.enqueued_ns = static_cast<std::int64_t>(w[5]);
    r.started_ns = static_cast<std::int64_t>(w[6]);
    r.ended_ns = static_cast<std::int64_t>(w[7]);
    r.last_rank = static_cast<std::int32_t>(static_cast<std::int64_t>(w[8]));
    r.last_late_ns = static_cast<std::int64_t>(w[9]);
    r.device_ns = static_cast<std::int64_t>(w[10]);
    return r;
  }
  return std::nullopt;  // a writer kept the slot busy
}

std::uint64_t op_bytes(const OpRecord& r, int group_size) {
  const OpShape& s = op_shape(r.kind);
  if (s.in == BufferExtent::none && s.out == BufferExtent::none) return 0;
  const std::uint64_t per = r.count * dtype_size(r.dtype);
  const bool per_rank = s.in == BufferExtent::per_rank || s.out == BufferExtent::per_rank;
  return per_rank ? per * static_cast<std::uint64_t>(std::max(group_size, 1)) : per;
}

// ---- the rank's side ----------------------------------------------------

struct BlockWriter::Impl {
  int fd;
  std::mutex mu;  // groups may be created from several threads
  BlockHeader* header = nullptr;
  std::size_t end = kPage;
  std::vector<std::pair<void*, std::size_t>> maps;
};

BlockWriter* BlockWriter::of_process() {
  // The descriptor is the process's own: one writer for the process,
  // made on first use (a function-local static, the one place it lives).
  static const std::unique_ptr<BlockWriter> writer = []() -> std::unique_ptr<BlockWriter> {
    const char* v = std::getenv("MCI_MONITOR_FD");
    if (v == nullptr || *v == '\0') return nullptr;
    char* end = nullptr;
    const long fd = std::strtol(v, &end, 10);
    if (*end != '\0' || fd < 0 || ::fcntl(static_cast<int>(fd), F_GETFD) < 0) return nullptr;
    try {
      return std::make_unique<BlockWriter>(static_cast<int>(fd));
    } catch (const std::exception&) {
      return nullptr;  // unmonitored, never a failed init
    }
  }();
  return writer.get();
}

BlockWriter::BlockWriter(int fd) : impl_(std::make_unique<Impl>()) {
  impl_->fd = fd;
  // Close-on-exec here: a program this rank starts is not this rank.
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::system_error(errno, std::generic_category(), "monitor block");
  if (st.st_size < static_cast<off_t>(kPage) && ::ftruncate(fd, static_cast<off_t>(kPage)) != 0) {
    throw std::system_error(errno, std::generic_category(), "monitor block");
  }
  void* p = ::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "monitor block");
  impl_->maps.emplace_back(p, kPage);
  // A process that inherited the descriptor from a rank that already uses
  // the block (a helper it started without exec's close) stays unseen
  // rather than write over the rank's areas.
  const auto* existing = static_cast<const BlockHeader*>(p);
  if (existing->magic.load(std::memory_order_acquire) == kMagic) {
    const auto owner = static_cast<pid_t>(existing->pid.load(std::memory_order_relaxed));
    if (owner != ::getpid() && ::kill(owner, 0) == 0) {
      throw std::runtime_error("the status block belongs to another live process");
    }
  }
  impl_->end = std::max<std::size_t>(kPage, static_cast<std::size_t>(st.st_size));
  auto* h = new (p) BlockHeader;  // placement on the shared page: the OS owns the memory
  impl_->header = h;
  copy_text(h->host, sizeof(h->host), this_host());
  h->pid.store(static_cast<std::uint64_t>(::getpid()), std::memory_order_relaxed);
  h->global_rank.store(static_cast<std::uint64_t>(env_int("RANK").value_or(-1)), std::memory_order_relaxed);
  h->version.store(kVersion, std::memory_order_relaxed);
  h->magic.store(kMagic, std::memory_order_release);
}

BlockWriter::~BlockWriter() {
  for (auto& [p, n] : impl_->maps) ::munmap(p, n);
}

std::optional<AreaView> BlockWriter::add_area(std::size_t capacity, int rank, int size, std::uint64_t timeout_ms,
                                              const std::string& backend, const std::string& name) {
  std::lock_guard lk(impl_->mu);
  BlockHeader& h = *impl_->header;
  const std::uint64_t k = h.areas.load(std::memory_order_relaxed);
  if (k >= kMaxAreas) return std::nullopt;
  const std::size_t cap = ring_capacity(capacity);
  const std::size_t bytes = area_bytes(cap);
  const std::size_t offset = impl_->end;
  if (::ftruncate(impl_->fd, static_cast<off_t>(offset + bytes)) != 0) return std::nullopt;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, impl_->fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) return std::nullopt;
  impl_->maps.emplace_back(p, bytes);
  impl_->end = offset + bytes;
  auto* a = new (p) AreaHeader;
  a->capacity.store(cap, std::memory_order_relaxed);
  a->rank.store(static_cast<std::uint64_t>(rank), std::memory_order_relaxed);
  a->size.store(static_cast<std::uint64_t>(size), std::memory_order_relaxed);
  a->timeout_ms.store(timeout_ms, std::memory_order_relaxed);
  copy_text(a->backend, sizeof(a->backend), backend);
  copy_text(a->name, sizeof(a->name), name);
  auto* slots = reinterpret_cast<OpSlot*>(static_cast<char*>(p) + kPage);
  for (std::size_t i = 0; i < cap; ++i) new (&slots[i]) OpSlot;  // zero: the file's pages already are
  h.area[k].offset.store(offset, std::memory_order_relaxed);
  h.area[k].bytes.store(bytes, std::memory_order_relaxed);
  h.areas.store(k + 1, std::memory_order_release);
  return AreaView{a, slots};
}

void BlockWriter::set_dump_signal(int signo) {
  impl_->header->dump_signal.store(static_cast<std::uint64_t>(signo), std::memory_order_release);
}

PrivateArea::PrivateArea(std::size_t capacity) : slots_(std::make_unique<OpSlot[]>(ring_capacity(capacity))) {
  header_.capacity.store(ring_capacity(capacity), std::memory_order_relaxed);
}

// ---- the launcher's side ------------------------------------------------

BlockReader::BlockReader(int fd) : fd_(fd) {}

BlockReader::~BlockReader() {
  if (base_ != nullptr) ::munmap(base_, mapped_);
}

bool BlockReader::remap() {
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || st.st_size < static_cast<off_t>(kPage)) return false;
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == mapped_) return true;
  if (base_ != nullptr) ::munmap(base_, mapped_);
  base_ = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd_, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    mapped_ = 0;
    return false;
  }
  mapped_ = size;
  return true;
}

std::optional<BlockSnapshot> BlockReader::read(std::size_t recent, const std::vector<std::uint64_t>& after_id) {
  if (!remap()) return std::nullopt;
  const auto* h = static_cast<const BlockHeader*>(base_);
  if (h->magic.load(std::memory_order_acquire) != kMagic || h->version.load(std::memory_order_relaxed) != kVersion) {
    return std::nullopt;
  }
  BlockSnapshot b;
  b.pid = h->pid.load(std::memory_order_relaxed);
  b.dump_signal = static_cast<int>(std::min<std::uint64_t>(h->dump_signal.load(std::memory_order_acquire), 64));
  b.global_rank = static_cast<int>(static_cast<std::int64_t>(h->global_rank.load(std::memory_order_relaxed)));
  b.host = text_of(h->host, sizeof(h->host));
  const std::uint64_t n = std::min<std::uint64_t>(h->areas.load(std::memory_order_acquire), kMaxAreas);
  // An area published after our mapping was made: map again (once).
  for (std::uint64_t k = 0; k < n; ++k) {
    const std::uint64_t off = h->area[k].offset.load(std::memory_order_relaxed);
    const std::uint64_t bytes = h->area[k].bytes.load(std::memory_order_relaxed);
    if (off + bytes > mapped_) {
      if (!remap()) return b;
      h = static_cast<const BlockHeader*>(base_);
      if (off + bytes > mapped_) return b;
    }
    const char* base = static_cast<const char*>(base_) + off;
    const auto* a = reinterpret_cast<const AreaHeader*>(base);
    const auto* slots = reinterpret_cast<const OpSlot*>(base + kPage);
    const std::uint64_t cap = a->capacity.load(std::memory_order_relaxed);
    if (cap == 0 || !std::has_single_bit(cap) || kPage + cap * sizeof(OpSlot) > bytes) continue;
    AreaSnapshot s;
    s.name = text_of(a->name, sizeof(a->name));
    s.backend = text_of(a->backend, sizeof(a->backend));
    s.rank = static_cast<int>(a->rank.load(std::memory_order_relaxed));
    s.size = static_cast<int>(a->size.load(std::memory_order_relaxed));
    s.timeout_ms = a->timeout_ms.load(std::memory_order_relaxed);
    s.closed = a->closed.load(std::memory_order_relaxed) != 0;
    s.idle_since_ns = a->idle_since_ns.load(std::memory_order_acquire);
    s.last_id = a->next_id.load(std::memory_order_acquire) - 1;
    if (const std::uint64_t id = a->running.load(std::memory_order_acquire); id != 0) {
      auto r = read_slot(slots[id & (cap - 1)]);
      if (r && r->id == id) s.running = r;
    }
    const std::uint64_t after = k < after_id.size() ? after_id[k] : 0;
    const std::uint64_t want = std::min<std::uint64_t>({recent, cap, s.last_id > after ? s.last_id - after : 0});
    for (std::uint64_t id = s.last_id - want + 1; want > 0 && id <= s.last_id; ++id) {
      auto r = read_slot(slots[id & (cap - 1)]);
      if (r && r->id == id) s.recent.push_back(*r);
    }
    for (std::size_t i = 0; i < kOpKindCount; ++i) {
      s.kinds[i] = {a->kinds[i].ops.load(std::memory_order_relaxed), a->kinds[i].failed.load(std::memory_order_relaxed),
                    a->kinds[i].bytes.load(std::memory_order_relaxed),
                    a->kinds[i].busy_ns.load(std::memory_order_relaxed)};
    }
    b.areas.push_back(std::move(s));
  }
  return b;
}

BlockFile::BlockFile(const std::string& label) : fd_(::memfd_create(label.c_str(), MFD_CLOEXEC)) {
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "mcirun --monitor: memfd_create");
}

BlockFile::~BlockFile() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace mci::monitor
