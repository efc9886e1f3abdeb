// Which replica the others take after the group changed (a shrink, a grow):
// that of the member that completed the most steps, the lowest such rank. A
// step some member finished counts; one nobody finished is redone. Both
// DDPs (raw buffers, LibTorch) recover with it; mci_torch.most_advanced is
// the same rule for torch users.
#pragma once

#include <cstdint>

#include "mci/process_group.hpp"

namespace mci::ddp {

struct MostAdvanced {
  int source = 0;           // the rank whose state everyone takes
  std::uint64_t steps = 0;  // the steps it completed
};

// Collective over pg (two all-reduces): every member gets the same answer.
// A member with no state (a replacement) passes 0.
MostAdvanced most_advanced(ProcessGroup& pg, std::uint64_t steps_done);

}  // namespace mci::ddp
