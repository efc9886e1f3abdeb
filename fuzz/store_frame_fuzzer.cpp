// libFuzzer target: the store's frame decoder must reject or accept any
// bytes without crashing, reading out of bounds or allocating without limit.
#include <cstddef>
#include <cstdint>
#include <span>

#include "store/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mci::store;
  std::span<const std::uint8_t> in(data, size);
  if (size >= kHeaderSize) {
    (void)body_length(std::span<const std::uint8_t, kHeaderSize>(data, kHeaderSize));
  }
  if (auto r = decode_request(in)) {
    // What decodes must re-encode to the same body.
    mci::StoreValue frame;
    encode(*r, frame);
    auto again = decode_request(std::span<const std::uint8_t>(frame.data() + kHeaderSize, frame.size() - kHeaderSize));
    if (!again || again->keys != r->keys || again->value != r->value) __builtin_trap();
  }
  (void)decode_response(in);
  return 0;
}
