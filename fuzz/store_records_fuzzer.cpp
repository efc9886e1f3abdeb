// libFuzzer target: the decoders of the store's records (store/records.hpp)
// must accept or refuse any bytes with a RecordError, never crash, read out
// of bounds or allocate without limit; what decodes must encode back to the
// same bytes (the format has one spelling per value).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "store/records.hpp"

namespace {

template <typename F>
void refused_or_read(F f) {
  try {
    f();
  } catch (const mci::records::RecordError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mci::records;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  refused_or_read([&] {
    std::string again;
    for (const Record& r : decode_list(in, "fuzz")) again += encode(r);
    if (again != in) __builtin_trap();
  });
  refused_or_read([&] {
    if (encode_members(decode_members(in, "fuzz")) != in) __builtin_trap();
  });
  refused_or_read([&] { (void)decode_arrivals(in, "fuzz"); });
  refused_or_read([&] { (void)decode_gone(in, "fuzz"); });
  refused_or_read([&] { (void)decode_joiners(in, "fuzz"); });
  refused_or_read([&] { (void)decode_grow_decision(in, "fuzz"); });
  refused_or_read([&] {
    if (encode_node_card(decode_node_card(in, "fuzz")) != in) __builtin_trap();
  });
  refused_or_read([&] {
    if (encode_node_slots(decode_node_slots(in, "fuzz")) != in) __builtin_trap();
  });
  refused_or_read([&] {
    if (encode_rank_claim(decode_rank_claim(in, "fuzz")) != in) __builtin_trap();
  });
  refused_or_read([&] {
    if (encode_node_news(decode_node_news(in, "fuzz")) != in) __builtin_trap();
  });
  refused_or_read([&] {
    if (encode_hang_request(decode_hang_request(in, "fuzz")) != in) __builtin_trap();
  });
  refused_or_read([&] {
    if (encode_rank_state(decode_rank_state(in, "fuzz")) != in) __builtin_trap();
  });
  return 0;
}
