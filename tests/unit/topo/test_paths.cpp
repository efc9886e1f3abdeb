#include <gtest/gtest.h>

#include "topo/link_rates.hpp"
#include "topo/paths.hpp"

namespace mci::topo {
namespace {

// cpu0 - hb0 - sw0 - gpu0, gpu1, sw1 - gpu2
//            \ gpu4            (on hb0 itself)
//      - hb1 - gpu3
// cpu1 - hb2 - gpu5
struct Box {
  Topology t;
  int gpu[6] = {};
  int sw0 = -1, sw1 = -1;

  int add(NodeKind k, int parent, const std::string& busid, double gts = 32, int width = 16) {
    Node n;
    n.kind = k;
    n.parent = parent;
    n.busid = busid;
    n.up.gts = k == NodeKind::cpu || k == NodeKind::host_bridge ? 0 : gts;
    n.up.width = width;
    return t.add(n);
  }

  Box() {
    Node c;
    c.kind = NodeKind::cpu;
    c.numa = 0;
    c.vendor = "GenuineIntel";
    c.cpu_family = 6;
    c.cpu_model = 143;
    const int cpu0 = t.add(c);
    c.numa = 1;
    const int cpu1 = t.add(c);
    const int hb0 = add(NodeKind::host_bridge, cpu0, "");
    const int hb1 = add(NodeKind::host_bridge, cpu0, "");
    const int hb2 = add(NodeKind::host_bridge, cpu1, "");
    sw0 = add(NodeKind::pci_switch, hb0, "0000:10:00.0");
    gpu[0] = add(NodeKind::gpu, sw0, "0000:11:00.0");
    gpu[1] = add(NodeKind::gpu, sw0, "0000:12:00.0", 16, 8);
    sw1 = add(NodeKind::pci_switch, sw0, "0000:13:00.0");
    gpu[2] = add(NodeKind::gpu, sw1, "0000:14:00.0");
    gpu[3] = add(NodeKind::gpu, hb1, "0000:20:00.0");
    gpu[4] = add(NodeKind::gpu, hb0, "0000:00:05.0");
    gpu[5] = add(NodeKind::gpu, hb2, "0000:80:00.0");
    for (int i = 0; i < 6; ++i) {
      t.at(gpu[i]).index = i;
      t.at(gpu[i]).sm = 90;
    }
    t.finish();
  }
};

TEST(Paths, NvidiaSmiCodesFromThePciTree) {
  Box b;
  EXPECT_EQ(classify(b.t, b.gpu[0], b.gpu[0]).smi, "X");
  EXPECT_EQ(classify(b.t, b.gpu[0], b.gpu[1]).smi, "PIX");
  EXPECT_EQ(classify(b.t, b.gpu[0], b.gpu[2]).smi, "PXB");
  EXPECT_EQ(classify(b.t, b.gpu[0], b.gpu[4]).smi, "PHB");
  EXPECT_EQ(classify(b.t, b.gpu[0], b.gpu[3]).smi, "NODE");
  EXPECT_EQ(classify(b.t, b.gpu[0], b.gpu[5]).smi, "SYS");
  EXPECT_EQ(classify(b.t, b.gpu[5], b.gpu[0]).smi, "SYS");
}

TEST(Paths, NcclHasNoNodeAndCountsItAsPhb) {
  Box b;
  EXPECT_EQ(classify(b.t, b.gpu[0], b.gpu[3]).nccl, NcclPath::phb);
  EXPECT_EQ(classify(b.t, b.gpu[0], b.gpu[4]).nccl, NcclPath::phb);
  EXPECT_EQ(classify(b.t, b.gpu[0], b.gpu[2]).nccl, NcclPath::pxb);
  EXPECT_EQ(classify(b.t, b.gpu[0], b.gpu[5]).nccl, NcclPath::sys);
  EXPECT_EQ(classify(b.t, b.gpu[0], b.gpu[0]).nccl, NcclPath::loc);
}

TEST(Paths, BottleneckAndHops) {
  Box b;
  const Path pix = classify(b.t, b.gpu[0], b.gpu[1]);
  // GPU1 runs Gen4 x8: its link is the narrowest on the way.
  EXPECT_EQ(pix.hops, 2);
  EXPECT_DOUBLE_EQ(pix.GBps, pcie_GBps(16, 8));
  EXPECT_DOUBLE_EQ(pix.nccl_GBps, pcie_nccl_GBps(16, 8));
  const Path pxb = classify(b.t, b.gpu[0], b.gpu[2]);
  EXPECT_EQ(pxb.hops, 3);
  EXPECT_DOUBLE_EQ(pxb.GBps, pcie_GBps(32, 16));
  EXPECT_EQ(pxb.via, (std::vector<int>{b.sw0, b.sw1}));
  const Path sys = classify(b.t, b.gpu[0], b.gpu[5]);
  // gpu0 -> sw0 -> hb0 -> cpu0 =SMP= cpu1 -> hb2 -> gpu5
  EXPECT_EQ(sys.hops, 6);
  EXPECT_DOUBLE_EQ(sys.GBps, smp_GBps("x86_64", "GenuineIntel", 6, 143));
}

TEST(Paths, NvlinkDirectAndThroughAnotherGpu) {
  Box b;
  b.t.add_link(Link{b.gpu[0], b.gpu[1], LinkKind::nvlink, 4, 4 * nvlink_GBps(90), 4 * nvlink_nccl_GBps(90)});
  b.t.add_link(Link{b.gpu[1], b.gpu[5], LinkKind::nvlink, 2, 2 * nvlink_GBps(90), 2 * nvlink_nccl_GBps(90)});
  const Path nv = classify(b.t, b.gpu[1], b.gpu[0]);
  EXPECT_EQ(nv.smi, "NV4");
  EXPECT_EQ(nv.nccl, NcclPath::nvl);
  EXPECT_DOUBLE_EQ(nv.GBps, 100.0);
  EXPECT_EQ(nv.level, PciLevel::pix);  // the PCI part stays known
  // nvidia-smi shows the PCI cell; NCCL routes through GPU1's NVLinks.
  const Path nvb = classify(b.t, b.gpu[0], b.gpu[5]);
  EXPECT_EQ(nvb.smi, "SYS");
  EXPECT_EQ(nvb.nccl, NcclPath::nvb);
  EXPECT_DOUBLE_EQ(nvb.GBps, 50.0);
  EXPECT_EQ(nvb.via, (std::vector<int>{b.gpu[1]}));
}

TEST(Paths, NvSwitchGivesTheSmallerBond) {
  Box b;
  Node s;
  s.kind = NodeKind::nvswitch;
  const int fabric = b.t.add(s);
  b.t.add_link(Link{b.gpu[0], fabric, LinkKind::nvlink, 18, 450, 18 * 20.6});
  b.t.add_link(Link{b.gpu[5], fabric, LinkKind::nvlink, 12, 300, 12 * 20.6});
  const Path p = classify(b.t, b.gpu[0], b.gpu[5]);
  EXPECT_EQ(p.smi, "NV12");
  EXPECT_EQ(p.hops, 2);
  EXPECT_DOUBLE_EQ(p.GBps, 300.0);
}

TEST(Paths, NvmlLevelsWinOverTheTree) {
  Box b;
  b.t.reported_levels[{b.gpu[0], b.gpu[3]}] = PciLevel::sys;
  EXPECT_EQ(classify(b.t, b.gpu[3], b.gpu[0]).smi, "SYS");
  EXPECT_FALSE(nccl_p2p_by_default(classify(b.t, b.gpu[3], b.gpu[0])));
  EXPECT_TRUE(nccl_p2p_by_default(classify(b.t, b.gpu[0], b.gpu[2])));
}

TEST(Paths, AllPathsCoverGpusThenNics) {
  Box b;
  const std::vector<Path> all = all_paths(b.t);
  EXPECT_EQ(all.size(), 36u);
  EXPECT_EQ(all.front().from, b.gpu[0]);
  EXPECT_EQ(all.front().smi, "X");
}

}  // namespace
}  // namespace mci::topo
