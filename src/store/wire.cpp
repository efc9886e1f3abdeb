#include "store/wire.hpp"

#include <algorithm>
#include <cstring>

namespace mci::store {

namespace {

class Writer {
 public:
  explicit Writer(StoreValue& out) : out_(out), start_(out.size()) {
    put_u32(kMagic);
    put_u32(0);  // patched in finish()
  }
  void put_u8(std::uint8_t v) { out_.push_back(v); }
  void put_u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void put_i64(std::int64_t v) {
    auto u = static_cast<std::uint64_t>(v);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
  }
  void put_bytes(const std::uint8_t* p, std::size_t n) {
    put_u32(static_cast<std::uint32_t>(n));
    out_.insert(out_.end(), p, p + n);
  }
  void put_str(const std::string& s) { put_bytes(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()); }
  void finish() {
    const auto body = static_cast<std::uint32_t>(out_.size() - start_ - kHeaderSize);
    for (int i = 0; i < 4; ++i) out_[start_ + 4 + i] = static_cast<std::uint8_t>(body >> (8 * i));
  }

 private:
  StoreValue& out_;
  std::size_t start_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}
  bool u8(std::uint8_t& v) {
    if (left() < 1) return false;
    v = in_[pos_++];
    return true;
  }
  bool u32(std::uint32_t& v) {
    if (left() < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(in_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return true;
  }
  bool i64(std::int64_t& v) {
    if (left() < 8) return false;
    std::uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= static_cast<std::uint64_t>(in_[pos_ + i]) << (8 * i);
    pos_ += 8;
    v = static_cast<std::int64_t>(u);
    return true;
  }
  bool bytes(StoreValue& v, std::size_t limit) {
    std::uint32_t n = 0;
    if (!u32(n) || n > limit || n > left()) return false;
    v.assign(in_.begin() + static_cast<std::ptrdiff_t>(pos_), in_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return true;
  }
  bool str(std::string& s, std::size_t limit) {
    std::uint32_t n = 0;
    if (!u32(n) || n > limit || n > left()) return false;
    s.assign(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  std::size_t left() const { return in_.size() - pos_; }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
};

bool takes_one_key(Op op) {
  return op == Op::set || op == Op::get || op == Op::add || op == Op::compare_set || op == Op::remove ||
         op == Op::append || op == Op::append_on_close;
}

}  // namespace

void encode(const Request& r, StoreValue& out) {
  Writer w(out);
  w.put_u8(static_cast<std::uint8_t>(r.op));
  switch (r.op) {
    case Op::auth:
      w.put_bytes(r.value.data(), r.value.size());
      w.put_bytes(r.value2.data(), r.value2.size());
      break;
    case Op::set:
    case Op::append:
    case Op::append_on_close:
      w.put_str(r.keys.at(0));
      w.put_bytes(r.value.data(), r.value.size());
      break;
    case Op::get:
      w.put_str(r.keys.at(0));
      w.put_i64(r.num);
      break;
    case Op::add:
      w.put_str(r.keys.at(0));
      w.put_i64(r.num);
      break;
    case Op::compare_set:
      w.put_str(r.keys.at(0));
      w.put_bytes(r.value.data(), r.value.size());
      w.put_bytes(r.value2.data(), r.value2.size());
      break;
    case Op::wait:
    case Op::check:
      w.put_u32(static_cast<std::uint32_t>(r.keys.size()));
      for (const auto& k : r.keys) w.put_str(k);
      w.put_i64(r.num);
      break;
    case Op::remove: w.put_str(r.keys.at(0)); break;
    case Op::get_range:
      w.put_str(r.keys.at(0));
      w.put_str(r.keys.at(1));
      w.put_i64(r.first);
      w.put_i64(r.count);
      w.put_i64(r.num);
      break;
    case Op::num_keys:
    case Op::hello:
    case Op::auth_ok: break;
  }
  w.finish();
}

void encode(const Response& r, StoreValue& out) {
  Writer w(out);
  w.put_u8(static_cast<std::uint8_t>(r.status));
  w.put_bytes(r.value.data(), r.value.size());
  w.put_i64(r.num);
  w.finish();
}

std::optional<std::size_t> body_length(std::span<const std::uint8_t, kHeaderSize> h) {
  std::uint32_t magic = 0, len = 0;
  for (int i = 0; i < 4; ++i) {
    magic |= static_cast<std::uint32_t>(h[i]) << (8 * i);
    len |= static_cast<std::uint32_t>(h[4 + i]) << (8 * i);
  }
  if (magic != kMagic || len > kMaxBody || len == 0) return std::nullopt;
  return len;
}

std::optional<Request> decode_request(std::span<const std::uint8_t> body) {
  Reader rd(body);
  Request r;
  std::uint8_t op = 0;
  if (!rd.u8(op)) return std::nullopt;
  if (op < static_cast<std::uint8_t>(Op::auth) || op > static_cast<std::uint8_t>(kLastOp) ||
      op == static_cast<std::uint8_t>(Op::auth_ok)) {
    return std::nullopt;
  }
  r.op = static_cast<Op>(op);
  if (takes_one_key(r.op)) {
    r.keys.emplace_back();
    if (!rd.str(r.keys[0], kMaxKey)) return std::nullopt;
  }
  switch (r.op) {
    case Op::auth:
      if (!rd.bytes(r.value, 64) || !rd.bytes(r.value2, 64)) return std::nullopt;
      break;
    case Op::set:
    case Op::append:
    case Op::append_on_close:
      if (!rd.bytes(r.value, kMaxBody)) return std::nullopt;
      break;
    case Op::get:
    case Op::add:
      if (!rd.i64(r.num)) return std::nullopt;
      break;
    case Op::compare_set:
      if (!rd.bytes(r.value, kMaxBody) || !rd.bytes(r.value2, kMaxBody)) return std::nullopt;
      break;
    case Op::wait:
    case Op::check: {
      std::uint32_t n = 0;
      if (!rd.u32(n) || n > kMaxKeys) return std::nullopt;
      r.keys.resize(n);
      for (auto& k : r.keys) {
        if (!rd.str(k, kMaxKey)) return std::nullopt;
      }
      if (!rd.i64(r.num)) return std::nullopt;
      break;
    }
    case Op::get_range:
      r.keys.resize(2);
      if (!rd.str(r.keys[0], kMaxKey) || !rd.str(r.keys[1], kMaxKey) || !rd.i64(r.first) || !rd.i64(r.count) ||
          !rd.i64(r.num)) {
        return std::nullopt;
      }
      if (r.first < 0 || r.count < 0 || r.count > kMaxRange) return std::nullopt;
      break;
    default: break;
  }
  if ((r.op == Op::get || r.op == Op::wait || r.op == Op::get_range) && r.num < 0) return std::nullopt;
  if (!rd.done()) return std::nullopt;
  return r;
}

void encode_range(const std::vector<const StoreValue*>& values, StoreValue& out) {
  for (const StoreValue* v : values) {
    out.push_back(v ? 1 : 0);
    const auto n = static_cast<std::uint32_t>(v ? v->size() : 0);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
    if (v) out.insert(out.end(), v->begin(), v->end());
  }
}

std::optional<std::vector<std::optional<StoreValue>>> decode_range(std::span<const std::uint8_t> in,
                                                                   std::int64_t count) {
  Reader rd(in);
  std::vector<std::optional<StoreValue>> out;
  out.reserve(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
  for (std::int64_t i = 0; i < count; ++i) {
    std::uint8_t present = 0;
    StoreValue v;
    if (!rd.u8(present) || present > 1 || !rd.bytes(v, kMaxBody)) return std::nullopt;
    if (present) {
      out.emplace_back(std::move(v));
    } else {
      out.emplace_back(std::nullopt);
    }
  }
  if (!rd.done()) return std::nullopt;
  return out;
}

std::optional<Response> decode_response(std::span<const std::uint8_t> body) {
  Reader rd(body);
  Response r;
  std::uint8_t st = 0;
  if (!rd.u8(st) || st > static_cast<std::uint8_t>(Status::missing)) return std::nullopt;
  r.status = static_cast<Status>(st);
  if (!rd.bytes(r.value, kMaxBody) || !rd.i64(r.num) || !rd.done()) return std::nullopt;
  return r;
}

}  // namespace mci::store
