#include "common/hostlist.hpp"

#include <cstdint>
#include <variant>

#include <fmt/format.h>

#include "mci/errors.hpp"

namespace mci {

namespace {

struct Range {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::size_t width = 0;  // zero padding, from the lower bound as written
};
using Bracket = std::vector<Range>;
// A host pattern: literal text and bracket groups, in order.
using Pattern = std::vector<std::variant<std::string, Bracket>>;

[[noreturn]] void malformed(std::string_view expr, std::string_view why) {
  throw ConfigError(
      fmt::format("hostlist '{}' is malformed: {} (expected a form like "
                  "'node[01-03,7],gpu5')",
                  expr, why));
}

std::uint64_t parse_number(std::string_view expr, std::string_view digits) {
  if (digits.empty()) malformed(expr, "a range bound is empty");
  if (digits.size() > 18) malformed(expr, fmt::format("'{}' is too long for a host number", digits));
  std::uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') malformed(expr, fmt::format("'{}' is not a number", digits));
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

Bracket parse_bracket(std::string_view expr, std::string_view body) {
  Bracket b;
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t comma = body.find(',', start);
    if (comma == std::string_view::npos) comma = body.size();
    const std::string_view part = body.substr(start, comma - start);
    const std::size_t dash = part.find('-');
    Range r;
    const std::string_view lo = part.substr(0, dash);
    r.lo = parse_number(expr, lo);
    r.hi = dash == std::string_view::npos ? r.lo : parse_number(expr, part.substr(dash + 1));
    r.width = lo.size();
    if (r.hi < r.lo) malformed(expr, fmt::format("range '{}' goes downwards", part));
    b.push_back(r);
    start = comma + 1;
  }
  return b;
}

Pattern parse_pattern(std::string_view expr, std::string_view item) {
  if (item.empty()) malformed(expr, "it has an empty host name");
  Pattern p;
  std::size_t i = 0;
  while (i < item.size()) {
    const std::size_t open = item.find('[', i);
    const std::size_t stray = item.find(']', i);
    if (stray != std::string_view::npos && stray < open) malformed(expr, "']' without '['");
    if (open == std::string_view::npos) {
      p.emplace_back(std::string(item.substr(i)));
      break;
    }
    if (open > i) p.emplace_back(std::string(item.substr(i, open - i)));
    const std::size_t close = item.find(']', open);
    if (close == std::string_view::npos) malformed(expr, "'[' without ']'");
    p.emplace_back(parse_bracket(expr, item.substr(open + 1, close - open - 1)));
    i = close + 1;
  }
  return p;
}

// Top-level items: commas inside brackets belong to the bracket.
std::vector<std::string_view> split_items(std::string_view expr) {
  std::vector<std::string_view> items;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < expr.size(); ++i) {
    if (expr[i] == '[') {
      if (++depth > 1) malformed(expr, "brackets are nested");
    } else if (expr[i] == ']') {
      if (--depth < 0) malformed(expr, "']' without '['");
    } else if (expr[i] == ',' && depth == 0) {
      items.push_back(expr.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) malformed(expr, "'[' without ']'");
  items.push_back(expr.substr(start));
  return items;
}

std::string padded(std::uint64_t v, std::size_t width) { return fmt::format("{:0{}}", v, width); }

void expand(const Pattern& p, std::size_t at, std::string& prefix, std::vector<std::string>& out, std::string_view expr,
            std::size_t max_hosts) {
  if (at == p.size()) {
    if (out.size() >= max_hosts) {
      malformed(expr, fmt::format("it names more than {} hosts", max_hosts));
    }
    out.push_back(prefix);
    return;
  }
  const std::size_t keep = prefix.size();
  if (const auto* text = std::get_if<std::string>(&p[at])) {
    prefix += *text;
    expand(p, at + 1, prefix, out, expr, max_hosts);
  } else {
    for (const Range& r : std::get<Bracket>(p[at])) {
      for (std::uint64_t v = r.lo;; ++v) {
        prefix.resize(keep);
        prefix += padded(v, r.width);
        expand(p, at + 1, prefix, out, expr, max_hosts);
        if (v == r.hi) break;
      }
    }
  }
  prefix.resize(keep);
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view expr, std::size_t max_hosts) {
  if (expr.empty()) return {};
  std::vector<std::string> out;
  for (std::string_view item : split_items(expr)) {
    std::string prefix;
    expand(parse_pattern(expr, item), 0, prefix, out, expr, max_hosts);
  }
  return out;
}

std::string first_host(std::string_view expr) {
  if (expr.empty()) throw ConfigError("hostlist is empty: no host to take as the first one");
  const auto items = split_items(expr);
  std::string host;
  for (const auto& part : parse_pattern(expr, items.front())) {
    if (const auto* text = std::get_if<std::string>(&part)) {
      host += *text;
    } else {
      const Range& r = std::get<Bracket>(part).front();
      host += padded(r.lo, r.width);
    }
  }
  return host;
}

}  // namespace mci
