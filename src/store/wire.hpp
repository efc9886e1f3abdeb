// The store's wire format. Every frame: magic "MCIS", u32 body length, body.
// Bodies are a u8 opcode (or status) followed by fields: u32-length strings,
// little-endian i64s. Decoding never trusts a length: a frame that is short,
// oversized or carries trailing junk is rejected and its connection closed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mci/store.hpp"

namespace mci::store {

inline constexpr std::uint32_t kMagic = 0x5349434du;  // "MCIS" little-endian
inline constexpr std::size_t kHeaderSize = 8;
inline constexpr std::size_t kMaxBody = 64u << 20;  // 64 MiB
inline constexpr std::size_t kMaxKey = 4096;
inline constexpr std::size_t kMaxKeys = 4096;
// Written by the server when it refuses a process for its job token (what a
// waiting client adds to its timeout).
inline constexpr std::string_view kRefusedKey = "mci/store/refused";

enum class Op : std::uint8_t {
  hello = 1,  // server -> client: u8 auth_required, nonce
  auth,       // client -> server: proof, client nonce
  auth_ok,    // server -> client: server proof
  set,
  get,
  add,
  compare_set,
  wait,
  check,
  remove,
  num_keys,
  get_range,        // keys[0] prefix, keys[1] stop key (or empty), first, count, num: timeout ms
  append,           // key, value: the key's value grows by value; answers the value after
  append_on_close,  // key, value: appended when this connection ends (a death certificate)
};
inline constexpr Op kLastOp = Op::append_on_close;
// get_range answers at most this many keys at once.
inline constexpr std::int64_t kMaxRange = 1 << 22;

enum class Status : std::uint8_t { ok = 0, timeout = 1, missing = 2 };

struct Request {
  Op op{};
  std::vector<std::string> keys;  // one key for set/get/add/cas/remove
  StoreValue value;               // set, append: value; cas: expected; auth: proof
  StoreValue value2;              // cas: desired; auth: client nonce
  std::int64_t num = 0;           // add: delta; get/wait: timeout ms
  std::int64_t first = 0;         // get_range
  std::int64_t count = 0;         // get_range
};

struct Response {
  Status status = Status::ok;
  StoreValue value;
  std::int64_t num = 0;
};

// get_range's answer, in the response's value: per key a u8 (1 present,
// 0 missing) and a u32-length value.
void encode_range(const std::vector<const StoreValue*>& values, StoreValue& out);
std::optional<std::vector<std::optional<StoreValue>>> decode_range(std::span<const std::uint8_t> in,
                                                                   std::int64_t count);

// Encoding appends a whole frame (header included).
void encode(const Request& r, StoreValue& out);
void encode(const Response& r, StoreValue& out);

// Parses a frame header: the body length, or nullopt if the magic is wrong or
// the body is larger than kMaxBody.
std::optional<std::size_t> body_length(std::span<const std::uint8_t, kHeaderSize> header);
// Parses a body; nullopt on any malformation.
std::optional<Request> decode_request(std::span<const std::uint8_t> body);
std::optional<Response> decode_response(std::span<const std::uint8_t> body);

}  // namespace mci::store
