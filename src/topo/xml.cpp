#include "topo/xml.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "mci/errors.hpp"

namespace mci::topo {

std::string XmlElement::attr(const std::string& key, const std::string& fallback) const {
  const auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second;
}

namespace {

std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const auto semi = s.find(';', i);
    const std::string ent = semi == std::string::npos ? "" : s.substr(i + 1, semi - i - 1);
    if (ent == "lt")
      out += '<';
    else if (ent == "gt")
      out += '>';
    else if (ent == "amp")
      out += '&';
    else if (ent == "quot")
      out += '"';
    else if (ent == "apos")
      out += '\'';
    else {
      out += s[i];
      continue;
    }
    i = semi;
  }
  return out;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

class Parser {
 public:
  Parser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  XmlElement document() {
    skip_misc();
    if (pos_ >= s_.size()) fail("no element found");
    XmlElement root = element();
    skip_misc();
    if (pos_ < s_.size()) fail("text after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    const auto line = 1 + std::count(s_.begin(), s_.begin() + static_cast<long>(std::min(pos_, s_.size())), '\n');
    throw ConfigError(fmt::format("{}: line {}: {}; is it a topology XML file (NCCL_TOPO_DUMP_FILE, lstopo --of xml)?",
                                  what_, line, why));
  }

  bool starts(const char* p) const { return s_.compare(pos_, std::char_traits<char>::length(p), p) == 0; }

  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }

  void skip_until(const char* end) {
    const auto e = s_.find(end, pos_);
    if (e == std::string::npos) fail(fmt::format("'{}' never closed", end));
    pos_ = e + std::char_traits<char>::length(end);
  }

  // Declarations, comments and doctypes between elements.
  void skip_misc() {
    for (;;) {
      skip_ws();
      if (starts("<?"))
        skip_until("?>");
      else if (starts("<!--"))
        skip_until("-->");
      else if (starts("<!"))
        skip_until(">");
      else
        return;
    }
  }

  std::string name() {
    const std::size_t b = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' ||
                                s_[pos_] == '-' || s_[pos_] == ':' || s_[pos_] == '.')) {
      ++pos_;
    }
    if (b == pos_) fail("a name was expected");
    return s_.substr(b, pos_ - b);
  }

  XmlElement element() {
    if (!starts("<")) fail("'<' was expected");
    ++pos_;
    XmlElement e;
    e.name = name();
    for (;;) {
      skip_ws();
      if (starts("/>")) {
        pos_ += 2;
        return e;
      }
      if (starts(">")) {
        ++pos_;
        break;
      }
      const std::string key = name();
      skip_ws();
      if (!starts("=")) fail(fmt::format("attribute '{}' has no value", key));
      ++pos_;
      skip_ws();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) fail("a quoted value was expected");
      const char q = s_[pos_++];
      const auto end = s_.find(q, pos_);
      if (end == std::string::npos) fail("a value is never closed");
      e.attrs[key] = unescape(s_.substr(pos_, end - pos_));
      pos_ = end + 1;
    }
    for (;;) {
      const std::size_t b = pos_;
      while (pos_ < s_.size() && s_[pos_] != '<') ++pos_;
      e.text += unescape(s_.substr(b, pos_ - b));
      if (pos_ >= s_.size()) fail(fmt::format("<{}> is never closed", e.name));
      if (starts("<!--")) {
        skip_until("-->");
      } else if (starts("</")) {
        pos_ += 2;
        const std::string closing = name();
        if (closing != e.name) fail(fmt::format("</{}> closes <{}>", closing, e.name));
        skip_ws();
        if (!starts(">")) fail("'>' was expected");
        ++pos_;
        return e;
      } else {
        e.children.push_back(element());
      }
    }
  }

  const std::string& s_;
  std::string what_;
  std::size_t pos_ = 0;
};

}  // namespace

XmlElement parse_xml(const std::string& text, const std::string& what) { return Parser(text, what).document(); }

void XmlWriter::start(const std::string& name, const std::vector<std::pair<std::string, std::string>>& attrs) {
  out_ += std::string(static_cast<std::size_t>(depth_) * 2, ' ') + "<" + name;
  for (const auto& [k, v] : attrs) out_ += " " + k + "=\"" + escape(v) + "\"";
}

void XmlWriter::open(const std::string& name, const std::vector<std::pair<std::string, std::string>>& attrs) {
  start(name, attrs);
  out_ += ">\n";
  ++depth_;
}

void XmlWriter::leaf(const std::string& name, const std::vector<std::pair<std::string, std::string>>& attrs) {
  start(name, attrs);
  out_ += "/>\n";
}

void XmlWriter::close(const std::string& name) {
  --depth_;
  out_ += std::string(static_cast<std::size_t>(depth_) * 2, ' ') + "</" + name + ">\n";
}

}  // namespace mci::topo
