// XML for topology files (NCCL's and hwloc's), read by pugixml: elements,
// attributes and text as a plain tree (comments and declarations skipped),
// and NCCL's layout written back.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mci::topo {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<XmlElement> children;
  std::string text;

  // The attribute's value, or `fallback` when absent.
  std::string attr(const std::string& key, const std::string& fallback = "") const;
  bool has(const std::string& key) const { return attrs.count(key) != 0; }
};

// Throws ConfigError naming `what` (a file name) and the line of the first
// thing it cannot read.
XmlElement parse_xml(const std::string& text, const std::string& what);

// Writes an element with its attributes in the given order, two spaces per
// level, self-closed when it has no children (NCCL's layout).
class XmlWriter {
 public:
  void open(const std::string& name, const std::vector<std::pair<std::string, std::string>>& attrs);
  void leaf(const std::string& name, const std::vector<std::pair<std::string, std::string>>& attrs);
  void close(const std::string& name);
  const std::string& text() const { return out_; }

 private:
  void start(const std::string& name, const std::vector<std::pair<std::string, std::string>>& attrs);
  std::string out_;
  int depth_ = 0;
};

}  // namespace mci::topo
