// mci's flight recorder in torch's flight-recorder dump format (the pickle
// torch 2.10+ writes to TORCH_FR_DUMP_TEMP_FILE<rank>; version "2.10"), so
// that torch's own analyser, torchfrtrace, reads mci's records: one file per
// process, holding every group of it, as torch's holds every process group.
// docs/troubleshooting.md, "Reading mci's records with torchfrtrace", says
// how to get and read them; the field-by-field choices are in the .cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "diag/flight_recorder.hpp"

namespace mci::diag {

inline constexpr std::string_view kTorchDumpVersion = "2.10";
// What profiling names start with ("mci:all_reduce"): the library, as torch's
// own FlightRecorderHook names a custom backend's entries.
inline constexpr std::string_view kTorchDumpLibrary = "mci";

// One group as the dump names it. torchfrtrace matches groups across ranks by
// name and members, so every rank of a group must give the same name, desc
// and job_ranks.
struct DumpGroup {
  std::string name;                // pg_config's key and process_group[0]
  std::string desc = "undefined";  // torch's word for "no description"
  std::vector<int> job_ranks;      // group rank i is job rank job_ranks[i] (size entries)
  int rank = 0;                    // this process's rank in the group
  int size = 1;
  std::string backend;
  std::chrono::milliseconds timeout{};

  // This process's rank in the job: the number its dump file ends with.
  int job_rank() const;
};

// 0, 1, ..., size - 1: a group that is the whole job.
std::vector<int> identity_ranks(int size);

// A group's records at the moment of the dump.
struct GroupRecords {
  DumpGroup group;
  int pg_id = 0;                  // its number in this process (pg_status's key)
  std::vector<OpRecord> records;  // oldest first (FlightRecorder::last)
};

// The tensors torch records for one rank's part of an operation, each as its
// element count (mci's buffers are flat): what torchfrtrace compares between
// ranks, so each kind follows what torch's backends record for it (gather's
// output and scatter's input exist on the root only; broadcast and reduce
// name the same buffer on every rank; send and recv name theirs twice).
struct TensorShapes {
  std::vector<std::uint64_t> in;
  std::vector<std::uint64_t> out;
};
TensorShapes torch_shapes(OpKind kind, std::uint64_t count, int size, bool at_root);

// torch's name of a dtype (c10::toString): "Float", "BFloat16", "Long", ...
std::string_view torch_dtype_name(DType t);

// "mci:all_reduce", "mci:send 0->1", "mci:recv 1<-0", "mci:recv 1<-?" (any
// source): the operation and, for point-to-point, the group ranks.
std::string torch_profiling_name(const OpRecord& r, int rank);

// The dump's bytes: a pickle of torch's dict (version, pg_config, pg_status,
// comm_lib_version, entries). `wall_minus_steady_ns` turns the recorder's
// steady-clock times into the wall-clock times torch writes.
std::string torch_dump(const std::vector<GroupRecords>& groups, std::int64_t wall_minus_steady_ns);

}  // namespace mci::diag
