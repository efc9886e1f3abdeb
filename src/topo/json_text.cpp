#include <nlohmann/json.hpp>

#include "topo/paths.hpp"
#include "topo/render.hpp"

namespace mci::topo {

namespace {

using Json = nlohmann::ordered_json;

Json optional_int(int v) { return v < 0 ? Json(nullptr) : Json(v); }
Json optional_text(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }
// Two decimals: the goldens must not depend on the last bits of a division.
double rounded(double v) { return static_cast<double>(static_cast<long long>(v * 100 + 0.5)) / 100; }

Json node_json(const Topology& t, const Node& n) {
  Json j;
  j["id"] = n.id;
  j["name"] = n.name;
  j["kind"] = node_kind_name(n.kind);
  j["parent"] = n.parent < 0 ? Json(nullptr) : Json(t.at(n.parent).name);
  j["busid"] = optional_text(n.busid);
  if (n.kind == NodeKind::cpu) {
    j["numa"] = optional_int(n.numa);
    j["cpus"] = optional_text(n.cpus);
  }
  if (n.kind == NodeKind::gpu) {
    j["index"] = n.index;
    j["sm"] = n.sm;
  }
  if (n.kind == NodeKind::nic) {
    j["index"] = n.index;
    j["label"] = optional_text(n.label);
    j["speed_Gbps"] = n.nic_gbps;
  }
  if (n.up.gts > 0) {
    j["link"] = {{"gts", n.up.gts}, {"width", n.up.width}, {"max_gts", n.up.max_gts}, {"max_width", n.up.max_width}};
  }
  return j;
}

}  // namespace

std::string json_text(const Topology& t, const Advice& a) {
  Json j;
  j["tool"] = "mci-topo";
  j["source"] = t.source;
  j["no_gpu_reason"] = optional_text(t.no_gpu_reason);
  j["notes"] = t.notes;
  j["nodes"] = Json::array();
  for (const Node& n : t.nodes) j["nodes"].push_back(node_json(t, n));
  j["links"] = Json::array();
  for (const Link& l : t.links) {
    j["links"].push_back({{"a", t.at(l.a).name},
                          {"b", t.at(l.b).name},
                          {"kind", link_kind_name(l.kind)},
                          {"count", l.count},
                          {"GBps", rounded(l.GBps)},
                          {"nccl_GBps", rounded(l.nccl_GBps)}});
  }
  j["paths"] = Json::array();
  for (const Path& p : all_paths(t)) {
    if (p.from == p.to) continue;
    Json via = Json::array();
    for (int v : p.via) via.push_back(t.at(v).name);
    j["paths"].push_back({{"from", t.at(p.from).name},
                          {"to", t.at(p.to).name},
                          {"smi", p.smi},
                          {"nccl", nccl_path_name(p.nccl)},
                          {"hops", p.hops},
                          {"GBps", rounded(p.GBps)},
                          {"nccl_GBps", rounded(p.nccl_GBps)},
                          {"via", via}});
  }
  Json adv;
  Json ring = Json::array();
  for (int g : a.ring.order) ring.push_back(t.at(g).name);
  adv["ring"] = ring;
  adv["ring_GBps"] = rounded(a.ring.GBps);
  adv["ring_bottleneck"] = optional_text(a.ring.bottleneck);
  adv["ring_over_nvlink"] = a.ring.over_nvlink;
  adv["fits"] = Json::array();
  for (const AlgorithmFit& f : a.fits)
    adv["fits"].push_back({{"algorithm", f.algorithm}, {"fits", f.fits}, {"why", f.why}});
  adv["bindings"] = Json::array();
  for (const Binding& b : a.bindings) {
    Json gpus = Json::array();
    for (int g : b.gpus) gpus.push_back(t.at(g).name);
    adv["bindings"].push_back({{"gpus", gpus}, {"numa", optional_int(b.numa)}, {"cpus", optional_text(b.cpus)}});
  }
  adv["warnings"] = a.warnings;
  j["advice"] = adv;
  return j.dump(2) + "\n";
}

}  // namespace mci::topo
