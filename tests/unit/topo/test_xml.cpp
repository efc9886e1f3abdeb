#include <gtest/gtest.h>

#include "mci/errors.hpp"
#include "topo/xml.hpp"

namespace mci::topo {
namespace {

TEST(Xml, ElementsAttributesAndComments) {
  const XmlElement root = parse_xml(
      "<?xml version=\"1.0\"?>\n<!-- c -->\n<system version=\"1\"><cpu numaid='0' name=\"a&amp;b\"><pci/></cpu>"
      "<!-- inside --><cpu/></system>\n",
      "t.xml");
  EXPECT_EQ(root.name, "system");
  EXPECT_EQ(root.attr("version"), "1");
  ASSERT_EQ(root.children.size(), 2u);
  EXPECT_EQ(root.children[0].attr("numaid"), "0");
  EXPECT_EQ(root.children[0].attr("name"), "a&b");
  EXPECT_EQ(root.children[0].children.at(0).name, "pci");
  EXPECT_EQ(root.children[0].attr("missing", "x"), "x");
}

TEST(Xml, ErrorsNameTheFileAndLine) {
  try {
    parse_xml("<system>\n<cpu>\n</system>\n", "bad.xml");
    FAIL() << "a mismatched closing tag was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.xml: line 3"), std::string::npos) << what;
    EXPECT_NE(what.find("Start-end tags mismatch"), std::string::npos) << what;  // pugixml's words
  }
  EXPECT_THROW(parse_xml("", "empty.xml"), ConfigError);
  EXPECT_THROW(parse_xml("<a b=1/>", "unquoted.xml"), ConfigError);
  EXPECT_THROW(parse_xml("<a>", "open.xml"), ConfigError);
  try {
    parse_xml("<a/>\n<b/>", "two.xml");
    FAIL() << "two root elements were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("two.xml: line 2: text after the root element"), std::string::npos)
        << e.what();
  }
}

TEST(Xml, WriterEscapesAndIndents) {
  XmlWriter w;
  w.open("system", {{"version", "1"}});
  w.leaf("net", {{"name", "a\"<b"}});
  w.close("system");
  EXPECT_EQ(w.text(), "<system version=\"1\">\n  <net name=\"a&quot;&lt;b\"/>\n</system>\n");
  EXPECT_EQ(parse_xml(w.text(), "w").children.at(0).attr("name"), "a\"<b");
}

}  // namespace
}  // namespace mci::topo
