// The few host-memory collectives mci-perf needs for its own bookkeeping (the
// banner, times across ranks, error counts). A backend that takes device
// memory only (nccl) gets them through a device bounce buffer.
#pragma once

#include "mci/process_group.hpp"

namespace mci::perf {

void host_all_reduce(ProcessGroup& pg, BufferView host, ReduceOp op);
void host_all_gather(ProcessGroup& pg, BufferView in, BufferView out);
void host_broadcast(ProcessGroup& pg, BufferView host, int root);

}  // namespace mci::perf
