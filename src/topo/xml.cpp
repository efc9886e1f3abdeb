#include "topo/xml.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <pugixml.hpp>

#include "mci/errors.hpp"

namespace mci::topo {

std::string XmlElement::attr(const std::string& key, const std::string& fallback) const {
  const auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second;
}

namespace {

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

XmlElement convert(const pugi::xml_node& n) {
  XmlElement e;
  e.name = n.name();
  for (const auto& a : n.attributes()) e.attrs[a.name()] = a.value();
  for (const auto& c : n.children()) {
    if (c.type() == pugi::node_element) {
      e.children.push_back(convert(c));
    } else if (c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata) {
      e.text += c.value();
    }
  }
  return e;
}

[[noreturn]] void fail(const std::string& text, std::ptrdiff_t offset, const std::string& what,
                       const std::string& why) {
  const auto end = text.begin() + std::clamp<std::ptrdiff_t>(offset, 0, static_cast<std::ptrdiff_t>(text.size()));
  const auto line = 1 + std::count(text.begin(), end, '\n');
  throw ConfigError(fmt::format("{}: line {}: {}; is it a topology XML file (NCCL_TOPO_DUMP_FILE, lstopo --of xml)?",
                                what, line, why));
}

}  // namespace

// pugixml reads it (Debian's libpugixml-dev); the model's importers walk
// the plain tree below, which outlives pugixml's document.
XmlElement parse_xml(const std::string& text, const std::string& what) {
  pugi::xml_document doc;
  const pugi::xml_parse_result r = doc.load_buffer(text.data(), text.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!r) fail(text, r.offset, what, r.description());
  const auto elements = [&] {
    std::vector<pugi::xml_node> out;
    for (const auto& c : doc.children()) {
      if (c.type() == pugi::node_element) out.push_back(c);
    }
    return out;
  }();
  if (elements.empty()) fail(text, 0, what, "no element found");
  if (elements.size() > 1) fail(text, elements[1].offset_debug(), what, "text after the root element");
  return convert(elements.front());
}

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
