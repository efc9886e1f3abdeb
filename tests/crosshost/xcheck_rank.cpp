// One rank of the cross-host correctness matrix (tests/crosshost/matrix.py).
// Runs the cases named on its command line, in order, each --repeat times,
// on data drawn at random for every rank and every call; works out what
// every element of its output must be from every rank's data (which any
// rank can draw: element i of a rank's input is a pure function of the
// job's seed, the call, the rank and i); and writes one JSON line per call
// to DIR/rank<R>.jsonl: how many elements were wrong (the first one's place
// and values), whether an out-of-place input changed, and a hash of the
// output, so that the runner also checks every rank holds the same bits.
//
//   xcheck_rank --dir DIR --seed S [--repeat N] [--timeout-ms T] CASE...
//   CASE: kind,dtype,count[,op=sum|avg|min|max][,root=R][,async][,inplace]
//
// count is the per-rank block for the kinds whose buffers are per rank
// (all_gather's input, reduce_scatter's output, ...): op_kind.hpp's rows.
// Integers are checked exactly (their sums wrap like the type); floats
// against the sum in double within (n + 1) rounding units of the sum of
// magnitudes, since the order of the additions is the algorithm's; min and
// max exactly.
#include <mci/mci.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace {

using mci::DType;
using mci::OpKind;
using mci::ReduceOp;

struct Case {
  OpKind kind = OpKind::all_reduce;
  DType dtype = DType::f32;
  std::size_t count = 0;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  bool async = false;
  bool in_place = false;
  std::string text;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (true) {
    const std::size_t next = s.find(sep, at);
    out.push_back(s.substr(at, next - at));
    if (next == std::string::npos) return out;
    at = next + 1;
  }
}

std::optional<DType> dtype_named(const std::string& name) {
  for (int i = 0; i < mci::kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    if (mci::dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

Case parse_case(const std::string& text) {
  const std::vector<std::string> w = split(text, ',');
  if (w.size() < 3)
    throw std::invalid_argument("a case is kind,dtype,count[,op=..][,root=..][,async][,inplace]: " + text);
  Case c;
  c.text = text;
  const auto kind = mci::op_kind_named(w[0]);
  const auto dtype = dtype_named(w[1]);
  if (!kind) throw std::invalid_argument("unknown kind in " + text);
  if (!dtype) throw std::invalid_argument("unknown dtype in " + text);
  c.kind = *kind;
  c.dtype = *dtype;
  c.count = std::stoull(w[2]);
  for (std::size_t i = 3; i < w.size(); ++i) {
    if (w[i] == "async") {
      c.async = true;
    } else if (w[i] == "inplace") {
      c.in_place = true;
    } else if (w[i].rfind("root=", 0) == 0) {
      c.root = std::stoi(w[i].substr(5));
    } else if (w[i].rfind("op=", 0) == 0) {
      const std::string op = w[i].substr(3);
      bool found = false;
      for (ReduceOp o : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
        if (mci::reduce_op_name(o) == op) {
          c.op = o;
          found = true;
        }
      }
      if (!found) throw std::invalid_argument("unknown op in " + text);
    } else {
      throw std::invalid_argument("unknown word '" + w[i] + "' in " + text);
    }
  }
  return c;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Element i of the data keyed `key` (a rank's, for one call), stored as
// dtype t at dst. Floats are drawn in [-1, 1) with every bit of their
// mantissa; integers over their whole range, so sums wrap.
void draw(DType t, std::uint64_t key, std::size_t i, void* dst) {
  const std::uint64_t x = mix(key ^ mix(i));
  const float f = static_cast<float>(x >> 40) * 0x1p-23f - 1.0f;
  auto put = [dst](auto v) { std::memcpy(dst, &v, sizeof v); };
  switch (t) {
    case DType::f32: return put(f);
    case DType::f64: return put(static_cast<double>(x >> 11) * 0x1p-52 - 1.0);
    case DType::f16: return put(mci::to_half(f));
    case DType::bf16: return put(mci::to_bfloat16(f));
    case DType::i8: return put(static_cast<std::int8_t>(x));
    case DType::u8: return put(static_cast<std::uint8_t>(x));
    case DType::i32: return put(static_cast<std::int32_t>(x));
    case DType::i64: return put(static_cast<std::int64_t>(x));
  }
}

// One rounding unit of each floating type (half an ulp of 1).
double unit(DType t) {
  switch (t) {
    case DType::f32: return 0x1p-24;
    case DType::f64: return 0x1p-53;
    case DType::f16: return 0x1p-11;
    case DType::bf16: return 0x1p-8;
    default: return 0;
  }
}

std::uint64_t fnv1a(const void* data, std::size_t bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

struct Verdict {
  std::uint64_t wrong = 0;
  std::optional<std::size_t> first;
  double got = 0, want = 0;
  std::uint64_t input_changed = 0;

  void count(std::size_t at, double g, double w) {
    if (!first) {
      first = at;
      got = g;
      want = w;
    }
    ++wrong;
  }
};

// An element of a rank's data as a double (integers exactly: every type
// here fits a double's 53 bits but i64, which is compared as bits below).
double as_double(DType t, const void* base, std::size_t i) { return mci::load_element(t, base, i); }

// What the reduction of every rank's element must be, and how far a float
// may be from it. Integers: exact, wrapping like their type.
struct Expected {
  double value = 0;
  double tolerance = 0;
  std::int64_t exact = 0;  // integers, wrapped to the type
};

std::int64_t wrap(DType t, std::uint64_t v) {
  switch (t) {
    case DType::i8: return static_cast<std::int8_t>(v);
    case DType::u8: return static_cast<std::uint8_t>(v);
    case DType::i32: return static_cast<std::int32_t>(v);
    default: return static_cast<std::int64_t>(v);
  }
}

std::int64_t int_element(DType t, const void* base, std::size_t i) {
  switch (t) {
    case DType::i8: return static_cast<const std::int8_t*>(base)[i];
    case DType::u8: return static_cast<const std::uint8_t*>(base)[i];
    case DType::i32: return static_cast<const std::int32_t*>(base)[i];
    case DType::i64: return static_cast<const std::int64_t*>(base)[i];
    default: return 0;
  }
}

class Runner {
 public:
  Runner(mci::ProcessGroup& pg, std::uint64_t seed) : pg_(pg), seed_(seed), n_(pg.size()), r_(pg.rank()) {}

  // One call of case c, the k-th call of the job: draws, runs, checks.
  // Returns the call's JSON line.
  std::string run(const Case& c, std::uint64_t k) {
    const mci::OpShape& s = mci::op_shape(c.kind);
    const std::size_t es = mci::dtype_size(c.dtype);
    const auto n = static_cast<std::size_t>(n_);
    auto extent = [&](mci::BufferExtent e) {
      return e == mci::BufferExtent::per_rank ? c.count * n : e == mci::BufferExtent::one ? c.count : 0;
    };
    const bool p2p = c.kind == OpKind::send;  // a ring of sends and receives
    const std::size_t in_count = extent(s.in);
    const std::size_t out_count = p2p ? c.count : extent(s.out);
    const std::uint64_t call = mix(seed_ ^ mix(k + 1));
    auto key = [&](int q) { return mix(call + static_cast<std::uint64_t>(q) * 0x632be59bd9b4e019ULL); };
    const std::uint64_t sentinel_key = key(n_ + 17);

    // The output holds garbage of its own first, so a stale or skipped
    // element cannot pass; an in-place input lives inside it.
    std::vector<std::uint8_t> out(std::max<std::size_t>(out_count, 1) * es);
    for (std::size_t i = 0; i < out_count; ++i) draw(c.dtype, sentinel_key, i, out.data() + i * es);
    const std::vector<std::uint8_t> sentinel = out;
    std::vector<std::uint8_t> in_storage(std::max<std::size_t>(in_count, 1) * es);
    std::uint8_t* in = in_storage.data();
    if (c.in_place) {
      if (c.kind == OpKind::all_gather) {
        in = out.data() + static_cast<std::size_t>(r_) * c.count * es;
      } else if (in_count == out_count) {
        in = out.data();
      } else {
        throw std::invalid_argument("no in-place form for " + c.text);
      }
    }
    for (std::size_t i = 0; i < in_count; ++i) draw(c.dtype, key(r_), i, in + i * es);
    const std::vector<std::uint8_t> input_before(in, in + in_count * es);

    mci::OpCall op;
    op.kind = c.kind;
    op.in = mci::BufferView{in, in_count, c.dtype};
    op.out = mci::BufferView{out.data(), out_count, c.dtype};
    op.op = c.op;
    op.root = s.rooted ? c.root : -1;
    const auto t0 = std::chrono::steady_clock::now();
    if (p2p) {
      ring_exchange(c, in, out.data());
    } else {
      mci::Work w = pg_.run(op, c.async ? mci::Exec::async : mci::Exec::blocking);
      w.wait();
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    Verdict v = check(c, out.data(), sentinel.data(), key);
    if (!c.in_place && !s.in_at_root_only && in_count && std::memcmp(in, input_before.data(), in_count * es) != 0) {
      for (std::size_t i = 0; i < in_count; ++i) {
        if (std::memcmp(in + i * es, input_before.data() + i * es, es) != 0) ++v.input_changed;
      }
    }
    nlohmann::ordered_json j{{"call", k},
                             {"case", c.text},
                             {"rank", r_},
                             {"wrong", v.wrong},
                             {"input_changed", v.input_changed},
                             {"hash", fmt::format("{:016x}", fnv1a(out.data(), out_count * es))},
                             {"ms", ms}};
    if (v.first) {
      j["first"] = *v.first;
      j["got"] = v.got;  // a NaN or infinity becomes null
      j["want"] = v.want;
    }
    return j.dump();
  }

 private:
  // Rank r sends its data to r + 1 and receives r - 1's. Async: both posted
  // at once. Blocking: rank 0 sends first and the others receive first, so
  // a ring of blocking calls cannot wait on itself.
  void ring_exchange(const Case& c, std::uint8_t* in, std::uint8_t* out) {
    const int next = (r_ + 1) % n_, prev = (r_ + n_ - 1) % n_;
    const mci::BufferView send{in, c.count, c.dtype}, recv{out, c.count, c.dtype};
    const int tag = 7;
    if (c.async) {
      mci::Work a = pg_.recv(recv, prev, tag, mci::Exec::async);
      mci::Work b = pg_.send(send, next, tag, mci::Exec::async);
      a.wait();
      b.wait();
    } else if (r_ == 0) {
      pg_.send(send, next, tag);
      pg_.recv(recv, prev, tag);
    } else {
      pg_.recv(recv, prev, tag);
      pg_.send(send, next, tag);
    }
  }

  // Every element of this rank's output against what it must be.
  template <class Key>
  Verdict check(const Case& c, const std::uint8_t* out, const std::uint8_t* sentinel, const Key& key) const {
    Verdict v;
    const std::size_t es = mci::dtype_size(c.dtype);
    const auto n = static_cast<std::size_t>(n_);
    const std::size_t cnt = c.count;
    // One element of rank q's input (at index i of its drawing).
    std::array<std::uint8_t, 8> cell{};
    auto input = [&](int q, std::size_t i) -> const std::uint8_t* {
      draw(c.dtype, key(q), i, cell.data());
      return cell.data();
    };
    auto same_bits = [&](std::size_t at, const std::uint8_t* want) {
      if (std::memcmp(out + at * es, want, es) != 0)
        v.count(at, as_double(c.dtype, out, at), as_double(c.dtype, want, 0));
    };
    auto untouched = [&](std::size_t count) {
      for (std::size_t i = 0; i < count; ++i) {
        if (std::memcmp(out + i * es, sentinel + i * es, es) != 0)
          v.count(i, as_double(c.dtype, out, i), as_double(c.dtype, sentinel, i));
      }
    };
    auto reduced = [&](std::size_t at, std::size_t i) {  // out[at] = op over q of input(q, i)
      if (mci::is_floating(c.dtype)) {
        double acc = 0, mag = 0;
        for (int q = 0; q < n_; ++q) {
          const double x = as_double(c.dtype, input(q, i), 0);
          mag += std::fabs(x);
          if (q == 0 || c.op == ReduceOp::sum || c.op == ReduceOp::avg) {
            acc = q == 0 ? x : acc + x;
          } else {
            acc = c.op == ReduceOp::max ? std::max(acc, x) : std::min(acc, x);
          }
        }
        double tol = 0;
        if (c.op == ReduceOp::sum || c.op == ReduceOp::avg) tol = static_cast<double>(n_ + 1) * unit(c.dtype) * mag;
        if (c.op == ReduceOp::avg) {
          acc /= static_cast<double>(n_);
          tol = tol / static_cast<double>(n_) + unit(c.dtype) * std::fabs(acc);
        }
        const double got = as_double(c.dtype, out, at);
        if (!(std::fabs(got - acc) <= tol)) v.count(at, got, acc);
        return;
      }
      std::uint64_t sum = 0;
      std::int64_t ext = 0;
      for (int q = 0; q < n_; ++q) {
        const std::int64_t x = int_element(c.dtype, input(q, i), 0);
        sum += static_cast<std::uint64_t>(x);
        ext = q == 0 ? x : c.op == ReduceOp::max ? std::max(ext, x) : std::min(ext, x);
      }
      std::int64_t want = ext;
      if (c.op == ReduceOp::sum) want = wrap(c.dtype, sum);
      if (c.op == ReduceOp::avg) want = wrap(c.dtype, static_cast<std::uint64_t>(wrap(c.dtype, sum) / n_));
      const std::int64_t got = int_element(c.dtype, out, at);
      if (got != want) v.count(at, static_cast<double>(got), static_cast<double>(want));
    };
    const bool root = r_ == c.root;
    switch (c.kind) {
      case OpKind::all_reduce:
        for (std::size_t i = 0; i < cnt; ++i) reduced(i, i);
        break;
      case OpKind::reduce:
        if (root) {
          for (std::size_t i = 0; i < cnt; ++i) reduced(i, i);
        } else if (c.in_place) {
          for (std::size_t i = 0; i < cnt; ++i) same_bits(i, input(r_, i));
        } else {
          untouched(cnt);
        }
        break;
      case OpKind::broadcast:
        for (std::size_t i = 0; i < cnt; ++i) same_bits(i, input(c.root, i));
        break;
      case OpKind::all_gather:
      case OpKind::gather:
        if (c.kind == OpKind::gather && !root) {
          untouched(cnt * n);
          break;
        }
        for (std::size_t q = 0; q < n; ++q) {
          for (std::size_t i = 0; i < cnt; ++i) same_bits(q * cnt + i, input(static_cast<int>(q), i));
        }
        break;
      case OpKind::scatter:
        for (std::size_t i = 0; i < cnt; ++i) same_bits(i, input(c.root, static_cast<std::size_t>(r_) * cnt + i));
        break;
      case OpKind::reduce_scatter:
        for (std::size_t i = 0; i < cnt; ++i) reduced(i, static_cast<std::size_t>(r_) * cnt + i);
        break;
      case OpKind::all_to_all:
        for (std::size_t q = 0; q < n; ++q) {
          for (std::size_t i = 0; i < cnt; ++i)
            same_bits(q * cnt + i, input(static_cast<int>(q), static_cast<std::size_t>(r_) * cnt + i));
        }
        break;
      case OpKind::send:
        for (std::size_t i = 0; i < cnt; ++i) same_bits(i, input((r_ + n_ - 1) % n_, i));
        break;
      case OpKind::barrier:
      case OpKind::recv: break;
    }
    return v;
  }

  mci::ProcessGroup& pg_;
  std::uint64_t seed_;
  int n_, r_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  std::uint64_t seed = 1;
  int repeat = 1;
  std::vector<Case> cases;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&] {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return std::string(argv[++i]);
      };
      if (a == "--dir") {
        dir = value();
      } else if (a == "--seed") {
        seed = std::stoull(value());
      } else if (a == "--repeat") {
        repeat = std::stoi(value());
      } else {
        cases.push_back(parse_case(a));
      }
    }
    if (dir.empty()) throw std::invalid_argument("--dir DIR is required");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xcheck_rank: %s\n", e.what());
    return 2;
  }
  mci::InitOptions opts;
  if (const char* b = std::getenv("XCHECK_BACKEND")) opts.backend = b;
  if (const char* t = std::getenv("XCHECK_TIMEOUT_MS")) opts.timeout = std::chrono::milliseconds(std::stoll(t));
  std::shared_ptr<mci::ProcessGroup> pg;
  std::ofstream log;
  try {
    pg = mci::init_process_group(opts);
    log.open(fmt::format("{}/rank{}.jsonl", dir, pg->rank()));
    Runner runner(*pg, seed);
    std::uint64_t k = 0;
    for (const Case& c : cases) {
      if (c.kind == OpKind::recv) throw std::invalid_argument("name a ring of sends and receives as send, not recv");
      for (int it = 0; it < repeat; ++it) log << runner.run(c, k++) << "\n" << std::flush;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xcheck_rank: rank %d: %s\n", pg ? pg->rank() : -1, e.what());
    if (log.is_open()) log << nlohmann::json{{"error", e.what()}}.dump() << "\n";
    return 1;
  }
  return 0;
}
