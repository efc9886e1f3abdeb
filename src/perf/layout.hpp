// How a nominal size becomes buffers, in nccl-tests' convention: -b/-e give
// the size of the larger buffer a rank sees (all_gather's output,
// reduce_scatter's input, ...). Collectives that split the data into one
// block per rank round the block down, so a size that does not divide by
// the world size is measured slightly smaller, and the table says so.
#pragma once

#include <cstddef>

#include "perf/collective.hpp"

namespace mci::perf {

struct Layout {
  std::size_t in_count = 0;     // elements of the input buffer (at the root for scatter)
  std::size_t out_count = 0;    // elements of the output buffer (at the root for gather)
  std::size_t block_count = 0;  // elements per rank for the split collectives, else in_count
  std::size_t bytes = 0;        // the "size" column: the larger buffer, in bytes
};

// `count` is the nominal element count (size / element size), `ranks` the
// world size; the buffers' extents are the kind's row's (the point-to-point
// pair sends and receives count elements).
Layout layout_for(OpKind c, std::size_t count, std::size_t element_size, int ranks);

}  // namespace mci::perf
