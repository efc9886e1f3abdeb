// The kinds of operation a group runs and each one's shape are public
// (mci/op_kind.hpp: the list, the rows, bus_factor); what only the layers
// need of them is here.
#pragma once

#include <cstddef>

#include "mci/op_kind.hpp"

namespace mci {

// Elements of this side's buffer on a rank (0 for a side it does not use).
std::size_t side_count(BufferExtent e, bool at_root_only, bool at_root, std::size_t count, std::size_t size) noexcept;

}  // namespace mci
