// The names of mci's shared-memory segments: /mci-PID-NONCE, PID being the
// process that created the segment. The segment is unlinked once every rank
// of its host has mapped it, but a creator killed before that (SIGKILL, or
// SIGTERM while the group is made) leaves the name in /dev/shm: mcirun, which
// knows the pids it started, removes what each of them left when it is
// reaped.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string>

namespace mci {

std::string shm_segment_name(pid_t creator, const std::array<std::uint8_t, 4>& nonce);

// Unlinks the segments process `creator` made that are still in /dev/shm;
// returns how many.
int remove_shm_segments_of(pid_t creator);

}  // namespace mci
