// The operations mci-perf measures, named as on its command line, and what
// each one needs (a reduce op, a root, an in-place layout).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace mci::perf {

enum class Collective {
  all_reduce,
  broadcast,
  reduce,
  all_gather,
  gather,
  scatter,
  reduce_scatter,
  all_to_all,
  barrier,
  send_recv,
};

inline constexpr std::array kAllCollectives = {
    Collective::all_reduce, Collective::broadcast, Collective::reduce,         Collective::all_gather,
    Collective::gather,     Collective::scatter,   Collective::reduce_scatter, Collective::all_to_all,
    Collective::barrier,    Collective::send_recv,
};

std::string_view collective_name(Collective c) noexcept;
// mci's names (all_reduce), plus the spellings nccl-tests and MPI users type
// (allreduce, all-reduce, alltoall, sendrecv) and nccl-tests' program names
// (all_reduce_perf); nullopt when unknown.
std::optional<Collective> parse_collective(std::string_view text);
// The nccl-tests program that measures c (all_reduce_perf, alltoall_perf,
// sendrecv_perf; barrier_perf, which nccl-tests lacks, by the same rule).
std::string nccl_program_name(Collective c);
// "all_reduce, broadcast, ..." for error messages and --help.
std::string collective_list();

bool uses_reduce_op(Collective c) noexcept;
bool uses_root(Collective c) noexcept;
// send_recv has no in-place form: a rank would overwrite what it still has
// to send. barrier moves no data.
bool has_in_place(Collective c) noexcept;
bool moves_data(Collective c) noexcept;

}  // namespace mci::perf
