#include "transport/shm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci::transport {

namespace {

constexpr std::size_t kHeaderBytes = 4096;
constexpr std::size_t kAlign = 4096;

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

std::size_t controls_bytes(int ranks) { return round_up(sizeof(ShmControl) * static_cast<std::size_t>(ranks), kAlign); }

}  // namespace

std::size_t ShmSegment::total_bytes(int ranks, std::size_t buffer_bytes) {
  // Per rank: two staging buffers and two result buffers.
  return kHeaderBytes + controls_bytes(ranks) + 4 * round_up(buffer_bytes, kAlign) * static_cast<std::size_t>(ranks);
}

ShmSegment::ShmSegment(std::string name, void* base, std::size_t bytes, int ranks, std::size_t buffer_bytes, bool owner)
    : name_(std::move(name)),
      base_(base),
      bytes_(bytes),
      ranks_(ranks),
      buffer_bytes_(buffer_bytes),
      linked_(owner),
      controls_(reinterpret_cast<ShmControl*>(static_cast<std::uint8_t*>(base) + kHeaderBytes)),
      data_(static_cast<std::uint8_t*>(base) + kHeaderBytes + controls_bytes(ranks)),
      stride_(round_up(buffer_bytes, kAlign)) {}

ShmSegment::ShmSegment(ShmSegment&& o) noexcept
    : name_(std::move(o.name_)),
      base_(std::exchange(o.base_, nullptr)),
      bytes_(o.bytes_),
      ranks_(o.ranks_),
      buffer_bytes_(o.buffer_bytes_),
      linked_(std::exchange(o.linked_, false)),
      controls_(o.controls_),
      data_(o.data_),
      stride_(o.stride_) {}

ShmSegment::~ShmSegment() {
  unlink();
  if (base_) ::munmap(base_, bytes_);
}

void ShmSegment::unlink() {
  if (linked_) {
    ::shm_unlink(name_.c_str());
    linked_ = false;
  }
}

ShmSegment ShmSegment::create(const std::string& name, int ranks, std::size_t buffer_bytes) {
  const std::size_t bytes = total_bytes(ranks, buffer_bytes);
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error(fmt::format("mci shm: cannot create {} in /dev/shm: {}", name, std::strerror(errno)));
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw Error(fmt::format("mci shm: cannot size {} to {} bytes: {} (is /dev/shm large enough?)", name, bytes,
                            std::strerror(e)));
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    throw Error(fmt::format("mci shm: cannot map {}: {}", name, std::strerror(errno)));
  }
  // The pages are zero; construct the shared objects in place.
  auto* h = new (base) ShmHeader();
  h->ranks = static_cast<std::uint32_t>(ranks);
  h->buffer_bytes = buffer_bytes;
  auto* ctl = reinterpret_cast<ShmControl*>(static_cast<std::uint8_t*>(base) + kHeaderBytes);
  for (int r = 0; r < ranks; ++r) new (ctl + r) ShmControl();
  h->magic.store(kShmMagic, std::memory_order_release);
  return ShmSegment(name, base, bytes, ranks, buffer_bytes, true);
}

ShmSegment ShmSegment::open(const std::string& name, int ranks, std::size_t buffer_bytes) {
  const std::size_t bytes = total_bytes(ranks, buffer_bytes);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error(
        fmt::format("mci shm: cannot open {}: {} (the ranks do not share /dev/shm?)", name, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != bytes) {
    ::close(fd);
    throw Error(fmt::format("mci shm: {} has the wrong size (another job's segment?)", name));
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) throw Error(fmt::format("mci shm: cannot map {}: {}", name, std::strerror(errno)));
  auto* h = static_cast<ShmHeader*>(base);
  if (h->magic.load(std::memory_order_acquire) != kShmMagic || h->ranks != static_cast<std::uint32_t>(ranks) ||
      h->buffer_bytes != buffer_bytes) {
    ::munmap(base, bytes);
    throw Error(fmt::format("mci shm: {} does not belong to this group", name));
  }
  return ShmSegment(name, base, bytes, ranks, buffer_bytes, false);
}

}  // namespace mci::transport
