// The rows of mci's settings table (settings_table.hpp says what a row
// holds), in a header so that a reader's key is checked at compile time
// (settings.hpp: `s.integer("MCI_TCP_SPIN_US")` names a row of the right
// kind or does not compile) and is an index, not a lookup, at run time.
#pragma once

#include <array>

#include "common/settings_table.hpp"

namespace mci::setting_rows_detail {

// MCI_TRANSPORT's own choices; then each mesh kind's name (MoreChoices,
// from the rows of transport/mesh.cpp) selects that kind alone.
inline constexpr std::array kTransportModes{
    SettingChoice{"auto", "shared memory where ranks share a host, TCP between hosts"},
    SettingChoice{"shm", "require shared memory"},
};
inline constexpr std::array kConnectModes{
    SettingChoice{"lazy", "connect to a peer when an algorithm first needs it, the default"},
    SettingChoice{"eager", "connect every pair at init"},
};
inline constexpr std::array kStreaming{
    SettingChoice{"auto", "plain or streaming stores, whichever is fast"},
    SettingChoice{"always", "streaming stores"},
    SettingChoice{"never", "plain stores"},
};
inline constexpr std::array kSingleCopy{
    SettingChoice{"auto", "read peers' buffers straight from their memory where the kernel allows it"},
    SettingChoice{"never", "always stage through the shared segment"},
};
inline constexpr std::array kLogLevels{
    SettingChoice{"error", ""},
    SettingChoice{"warn", ""},
    SettingChoice{"info", ""},
    SettingChoice{"debug", ""},
};
inline constexpr std::array kRankLoss{
    SettingChoice{"stop", "a lost rank stops the job (mcirun's default)"},
    SettingChoice{"continue", "the survivors go on (mcirun --on-rank-loss=continue)"},
    SettingChoice{"replace",
                  "the survivors go on and a new process takes the lost one's place (mcirun "
                  "--on-rank-loss=replace)"},
};
inline constexpr std::array kDumpSignals{
    SettingChoice{"off", "no signal handler"},
    SettingChoice{"SIGUSR1", "dump on SIGUSR1"},
    SettingChoice{"SIGUSR2", "dump on SIGUSR2"},
};
inline constexpr std::array kReproducibleModes{
    SettingChoice{"0", "each algorithm adds in its own order"},
    SettingChoice{"1", "all_reduce, reduce and reduce_scatter add in rank order: the same bits on any layout"},
};
inline constexpr std::array kClocks{
    SettingChoice{"auto", "the CPU's time-stamp counter where it is invariant, else the steady clock"},
    SettingChoice{"steady", "the steady clock"},
};

// The tuning rows in the order docs/env.md lists them; the launcher's and
// the tools' are documented in their own tables there (beside variables
// that are not mci's), so they carry no docs line here.
// clang-format off
inline constexpr std::array kRows{
    SettingRow{
        .name = "MCI_ALGO",
        .kind = SettingKind::text,
        .fallback = "auto",
        .scope = SettingScope::job,
        .ranks_agree = true,
        .use = SettingUse::mci_algorithms,
        .section = SettingSection::tuning,
        .doc =
        "force an algorithm (see [Algorithms](#algorithms)) for the collectives it serves, where its place "
        "exists in this job (a `shm` algorithm needs every rank on one host, `hierarchical` several hosts); "
        "the other collectives keep mci's choice, and a world of one ignores it. A `mesh` algorithm forced on "
        "one host takes the collectives it serves (only those) off shared memory. An unknown name is a "
        "`ConfigError` listing the choices. Must be the same on every rank: `init_process_group` refuses "
        "ranks whose settings differ. Read by the `cpu` backend only"},
    SettingRow{
        .name = "MCI_REPRODUCIBLE",
        .kind = SettingKind::choice,
        .fallback = "0",
        .choices = kReproducibleModes,
        .noun = "a reproducible mode",
        .scope = SettingScope::job,
        .ranks_agree = true,
        .use = SettingUse::mci_algorithms,
        .section = SettingSection::tuning,
        .doc =
        "`1`: all_reduce, reduce and reduce_scatter give the same bits whatever the algorithm, the transport and "
        "the hosts the ranks sit on: every element is reduced in rank order (rank 0's value, then rank 1's, ...), "
        "by `shm_direct`, `shm_sliced` and `shm_staged` on one host, `host_chain`, `direct` and `ordered` "
        "across hosts (an "
        "`MCI_ALGO` that reduces in another order is not used for them; see [Same bits](#same-bits)). Must be "
        "the same on every rank. Read by the `cpu` backend only"},
    SettingRow{
        .name = "MCI_TRANSPORT",
        .kind = SettingKind::choice,
        .fallback = "auto",
        .choices = kTransportModes,
        .noun = "a transport",
        .scope = SettingScope::job,
        .ranks_agree = true,
        .use = SettingUse::mci_transports,
        .section = SettingSection::tuning,
        .doc =
        "`auto`: shared memory when every rank of the group is on this host (same hostname and boot id); "
        "across hosts, shared memory inside each host and TCP between hosts (hierarchical collectives); "
        "`shm`: require shared memory (an error if a rank is elsewhere); `tcp`: never use shared memory. "
        "Point-to-point always uses TCP"},
    SettingRow{
        .name = "MCI_SHM_BUFFER_BYTES",
        .kind = SettingKind::integer,
        .fallback = "524288",
        .min = 4096,
        .max = 1ll << 30,
        .unit = "bytes",
        .scope = SettingScope::job,
        .ranks_agree = true,
        .use = SettingUse::mci_transports,
        .section = SettingSection::tuning,
        .doc =
        "size of each of a rank's four shared-memory buffers; staging stays this small whatever the message "
        "size"},
    SettingRow{
        .name = "MCI_CONNECT",
        .kind = SettingKind::choice,
        .fallback = "lazy",
        .choices = kConnectModes,
        .noun = "a connection mode",
        .scope = SettingScope::job,
        .ranks_agree = true,
        .use = SettingUse::mci_transports,
        .section = SettingSection::tuning,
        .doc =
        "when TCP connections are made: `lazy` connects a rank to a peer when an algorithm first needs it "
        "(ring neighbours, recursive-doubling partners, tree parents and children, host leaders, "
        "point-to-point peers), so a rank holds about 2 log2(n) connections instead of n-1 and a job of "
        "hundreds of ranks starts several times faster (see [scale.md](scale.md)); `eager` connects every "
        "pair at init, so a rank that cannot be reached fails `init_process_group` instead of the first "
        "collective that needs it. Same authentication and errors either way; an abort reaches only the peers "
        "a rank is connected to (the others get a `PeerError` naming it when they first try). Must be the "
        "same on every rank (checked at init)"},
    SettingRow{
        .name = "MCI_SHM_STREAMING",
        .kind = SettingKind::choice,
        .fallback = "auto",
        .choices = kStreaming,
        .noun = "a way of copying",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::mci_transports,
        .section = SettingSection::tuning,
        .doc =
        "how large copies into shared memory are written: `auto` uses plain stores while they are fast and "
        "streaming (non-temporal) stores while plain ones crawl (lines bouncing between cores), probing again "
        "every 32 copies; `always` or `never` force one way (a rank's own choice, ranks may differ)"},
    SettingRow{
        .name = "MCI_SHM_SINGLE_COPY",
        .kind = SettingKind::choice,
        .fallback = "auto",
        .choices = kSingleCopy,
        .noun = "a copy mode",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::mci_transports,
        .section = SettingSection::tuning,
        .doc =
        "whether all_gather, gather, all_to_all, scatter and broadcast (below 1 MiB) in shared memory read each "
        "peer's block straight from the peer's memory (`process_vm_readv`, one copy, from 16 KiB blocks) instead "
        "of staging it through the segment (two copies). `auto` does where the kernel allows it for every rank of the host (found at "
        "the first such call); under Yama's `ptrace_scope` 1 a rank then lets any process of its user read "
        "its memory (`PR_SET_PTRACER_ANY`, as Open MPI does); `never` keeps it off (one rank saying so turns "
        "it off for its host)"},
    SettingRow{
        .name = "MCI_SHM_SPIN_US",
        .kind = SettingKind::integer,
        .fallback = "50",
        .min = 0,
        .max = 1'000'000,
        .unit = "microseconds",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::mci_transports,
        .section = SettingSection::tuning,
        .doc =
        "how long a shared-memory wait spins before sleeping in the kernel (only when ranks do not outnumber "
        "cores; else see `MCI_SHM_YIELD_US`). A wait still spinning after 5 us checks whether the rank it "
        "waits for runs on its own CPU (the kernel sometimes stacks two ranks on one CPU and leaves them "
        "there, which made whole runs ~20x slower) and, if so, moves to a CPU no rank of its host was seen "
        "on, keeping its affinity mask, or, where it cannot move (pinned, no CPU free, or moved less than "
        "20 ms ago), stops spinning and sleeps, leaving that rank the CPU. On a VM whose CPUs are taken "
        "away for hundreds of microseconds at a time (steal), 1000 keeps a wait spinning through such a "
        "stall instead of paying a late wake-up: 1 MiB all_gather under bench/cpu_thief 87-94 us per call "
        "against 101-115 with 50 (docs/performance.md); it costs CPU where the rank waited for is "
        "computing (a DDP step)"},
    SettingRow{
        .name = "MCI_SHM_YIELD_US",
        .kind = SettingKind::integer,
        .fallback = "200",
        .min = 0,
        .max = 1'000'000,
        .unit = "microseconds",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::mci_transports,
        .section = SettingSection::tuning,
        .doc =
        "when ranks outnumber cores: how long a shared-memory wait gives its core away (`sched_yield`, so the "
        "rank it waits for can run) before sleeping in the kernel; 4 ranks on 2 cores, 8 B all-reduce: 5-7 us "
        "with it, 14-15 us without"},
    SettingRow{
        .name = "MCI_TCP_SPIN_US",
        .kind = SettingKind::integer,
        .fallback = "50",
        .min = 0,
        .max = 1'000'000,
        .unit = "microseconds",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::mci_transports,
        .section = SettingSection::tuning,
        .doc =
        "how long a rank waiting on TCP keeps polling its sockets before sleeping in `poll()` (a sleeping "
        "process wakes microseconds after its data arrives); 0 never spins. Ignored (no spinning) when this "
        "machine runs more ranks of the group than the process has CPUs (ranks are counted per kernel: "
        "containers and network-namespace hosts on one machine share its cores)"},
    SettingRow{
        .name = "MCI_TCP_YIELD_US",
        .kind = SettingKind::integer,
        .fallback = "200",
        .min = 0,
        .max = 1'000'000,
        .unit = "microseconds",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::mci_transports,
        .section = SettingSection::tuning,
        .doc =
        "when this host runs more ranks of the group than the process has CPUs (no spinning then): how long a "
        "rank waiting on TCP keeps polling its sockets while giving its core away (`sched_yield`, so the rank "
        "it waits for can run) before sleeping in `poll()`; 0 sleeps at once"},
    SettingRow{
        .name = "MCI_HOST_ID",
        .kind = SettingKind::text,
        .fallback = "",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::mci_transports,
        .section = SettingSection::tuning,
        .shown_default = "unset",
        .doc =
        "the name of this rank's host for shared-memory and hierarchical decisions, instead of hostname and "
        "boot id: ranks with the same value share memory. For tests and benchmarks that pretend to run on "
        "several hosts (e.g. two `mcirun --nnodes=2` launchers on one machine, each with its own value); "
        "ranks given one value must really share `/dev/shm`"},
    SettingRow{
        .name = "MCI_HOST_ADDR",
        .kind = SettingKind::text,
        .fallback = "",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::group,
        .section = SettingSection::tuning,
        .shown_default = "the address used to reach the store",
        .doc =
        "address this rank listens on for its peers. Unset: the interface `MCI_SOCKET_IFNAME` names; else the "
        "address this rank reaches the store from, unless that is a loopback address while the job has ranks on "
        "other hosts (node 0's name resolving to 127.0.1.1, Debian's default): then the address toward the other "
        "nodes (`mcirun` finds it), else that of the first interface that is up and not loopback. A loopback "
        "address is never given to peers on other hosts"},
    SettingRow{
        .name = "MCI_SOCKET_IFNAME",
        .kind = SettingKind::text,
        .fallback = "",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::group,
        .section = SettingSection::tuning,
        .shown_default = "`NCCL_SOCKET_IFNAME`, then `GLOO_SOCKET_IFNAME`, when set",
        .doc =
        "the interface this rank is reached at, in NCCL's syntax: name prefixes, comma-separated (`eth`, `eth,ib`); "
        "`^` first excludes them (`^docker,lo`); `=` makes them exact names (`=eth1`, `^=eth0`). Its first address "
        "of the store's family is used (IPv4 or IPv6); a name matching no interface is a `ConfigError` listing "
        "the interfaces that are up. Unset, `NCCL_SOCKET_IFNAME` (the same syntax) and then "
        "`GLOO_SOCKET_IFNAME` (exact names) are honoured when set, as users of those libraries export them. "
        "`MCI_HOST_ADDR` wins over all three"},
    SettingRow{
        .name = "MCI_LOG_LEVEL",
        .kind = SettingKind::choice,
        .fallback = "warn",
        .choices = kLogLevels,
        .noun = "a log level",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::process,
        .section = SettingSection::tuning,
        .shown_default = "`warn`",
        .doc =
        "`error`, `warn`, `info`, `debug`; lines are `host:pid:tid [rank] mci LEVEL message` on stderr"},
    SettingRow{
        .name = "MCI_DEBUG",
        .kind = SettingKind::text,
        .fallback = "",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::group,
        .section = SettingSection::tuning,
        .shown_default = "unset",
        .doc =
        "`timing`: one line per collective (duration, last rank to arrive and how late) and a straggler "
        "summary when the group is destroyed"},
    SettingRow{
        .name = "MCI_HANG_REPORT_WAIT_MS",
        .kind = SettingKind::integer,
        .fallback = "3000",
        .min = 0,
        .max = 24ll * 3600 * 1000,
        .unit = "milliseconds; 0: no report",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::group,
        .section = SettingSection::tuning,
        .doc =
        "how long a rank that timed out waits for the others' answers to the hang report; 0 disables the "
        "report"},
    SettingRow{
        .name = "MCI_FLIGHT_RECORDER_ENTRIES",
        .kind = SettingKind::integer,
        .fallback = "2048",
        .min = 0,
        .max = 1ll << 24,
        .unit = "operations; 0: off",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::group,
        .section = SettingSection::tuning,
        .doc =
        "operations each rank keeps in its flight recorder, rounded up to a power of two; 0 turns recording "
        "off (to measure its cost)"},
    SettingRow{
        .name = "MCI_FR_DUMP_DIR",
        .kind = SettingKind::text,
        .fallback = "",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::group,
        .section = SettingSection::tuning,
        .shown_default = "unset",
        .doc =
        "a folder (made if missing) where each process writes its flight recorder in torch's flight-recorder "
        "format, as `mci_trace_rank_<rank>`, when an operation times out: the rank that timed out, and every "
        "rank its hang report asks (so the ranks that never came write theirs too); `torchfrtrace <folder>` "
        "reads them (see [troubleshooting](troubleshooting.md#reading-mcis-records-with-torchfrtrace)). Unset: "
        "torch's `TORCH_FR_DUMP_TEMP_FILE` when it is set (files `<its value><rank>`, as torch names them), "
        "else no file"},
    SettingRow{
        .name = "MCI_FR_DUMP_ON_SIGNAL",
        .kind = SettingKind::choice,
        .fallback = "off",
        .choices = kDumpSignals,
        .noun = "a signal mci can dump on",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::group,
        .section = SettingSection::tuning,
        .doc =
        "`SIGUSR1` or `SIGUSR2`: that signal makes the process write its flight recorder where "
        "`MCI_FR_DUMP_DIR` (or `TORCH_FR_DUMP_TEMP_FILE`) says, which must be set (`kill -USR2 <pid>` on every "
        "rank of a job that seems stuck); mci installs a handler that only wakes a thread of its own, which "
        "writes the file, and calls the handler the program had after it. `off`: no handler"},
    SettingRow{
        .name = "MCI_CLOCK",
        .kind = SettingKind::choice,
        .fallback = "auto",
        .choices = kClocks,
        .noun = "a clock mci knows",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::group,
        .section = SettingSection::tuning,
        .doc =
        "the clock of each call's submit and finish times (timeouts, flight recorder, last arrival, "
        "`Work::duration`): `auto` reads the CPU's time-stamp counter where it is invariant (x86-64 with "
        "`constant_tsc` and `nonstop_tsc`), its rate measured against the steady clock and re-anchored on it "
        "every millisecond (it stays within a microsecond of it), else the steady clock; `steady` always "
        "reads the steady clock (27-50 ns a read under a hypervisor, against 11 for the counter)"},
    SettingRow{
        .name = "MCI_STORE_ADDR",
        .kind = SettingKind::text,
        .fallback = "",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::launcher,
        .section = SettingSection::launcher},
    SettingRow{
        .name = "MCI_STORE_PORT",
        .kind = SettingKind::integer,
        .fallback = "0",
        .min = 1,
        .max = 65535,
        .unit = "a TCP port",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::launcher,
        .section = SettingSection::launcher},
    SettingRow{
        .name = "MCI_STORE_HOSTED",
        .kind = SettingKind::flag,
        .fallback = "",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::group,  // set by mcirun, read by init: rank 0 must not host the store
        .section = SettingSection::launcher},
    SettingRow{
        .name = "MCI_TORCH_STORE",
        .kind = SettingKind::text,
        .fallback = "",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::launcher,  // set by mcirun on etcd, read by mci_torch (_torch_store.py)
        .section = SettingSection::launcher},
    SettingRow{
        .name = "MCI_JOB_TOKEN",
        .kind = SettingKind::text,
        .fallback = "",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::group,
        .section = SettingSection::launcher},
    SettingRow{
        .name = "MCI_ON_RANK_LOSS",
        .kind = SettingKind::choice,
        .fallback = "stop",
        .choices = kRankLoss,
        .noun = "an answer to a lost rank",
        .scope = SettingScope::job,
        .ranks_agree = false,  // mcirun gives every rank the same (its nodes check they agree)
        .use = SettingUse::launcher,
        .section = SettingSection::launcher},
    SettingRow{
        .name = "MCI_REPLACEMENT",
        .kind = SettingKind::integer,
        .fallback = "0",
        .min = 0,
        .max = 1'000'000,
        .unit = "replacements",
        .scope = SettingScope::rank,  // only a replacement has one: 1 for its node's first, then 2, ...
        .ranks_agree = false,
        .use = SettingUse::launcher,
        .section = SettingSection::launcher},
    SettingRow{
        .name = "MCI_PERF_STARTED_RANKS",
        .kind = SettingKind::flag,
        .fallback = "",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::tool,
        .section = SettingSection::launcher},
    SettingRow{
        .name = "MCI_MONITOR",
        .kind = SettingKind::text,  // [HOST:]PORT, checked by mcirun (job_config.cpp)
        .fallback = "",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::tool,
        .section = SettingSection::tools},
    SettingRow{
        .name = "MCI_MONITOR_OPEN",
        .kind = SettingKind::flag,
        .fallback = "",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::tool,
        .section = SettingSection::tools},
    SettingRow{
        .name = "MCI_MONITOR_FD",
        .kind = SettingKind::integer,
        .fallback = "",
        .min = 0,
        .max = 1'000'000,
        .unit = "a file descriptor",
        .scope = SettingScope::rank,  // each rank's own status block
        .ranks_agree = false,
        .use = SettingUse::launcher,
        .section = SettingSection::launcher},
    SettingRow{
        .name = "MCI_ETCD_LEASE_TTL",
        .kind = SettingKind::integer,
        .fallback = "2",
        .min = 1,
        .max = 600,
        .unit = "seconds",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::launcher,
        .section = SettingSection::launcher},
    SettingRow{
        .name = "MCI_MONITOR_URL",
        .kind = SettingKind::text,
        .fallback = "",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::launcher,
        .section = SettingSection::launcher},
    SettingRow{
        .name = "MCI_NODE_SILENCE_MS",
        .kind = SettingKind::integer,
        .fallback = "10000",
        .min = 1000,
        .max = 24ll * 3600 * 1000,
        .unit = "milliseconds",
        .scope = SettingScope::job,
        .ranks_agree = false,
        .use = SettingUse::tool,
        .section = SettingSection::tools},
    SettingRow{
        .name = "MCI_PYTHON",
        .kind = SettingKind::text,
        .fallback = "",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::tool,
        .section = SettingSection::tools},
    SettingRow{
        .name = "MCI_NVML_LIBRARY",
        .kind = SettingKind::text,
        .fallback = "libnvidia-ml.so.1",
        .scope = SettingScope::rank,
        .ranks_agree = false,
        .use = SettingUse::tool,
        .section = SettingSection::tools},
};
// clang-format on

}  // namespace mci::setting_rows_detail

namespace mci {

inline constexpr const auto& kSettingRows = setting_rows_detail::kRows;

}  // namespace mci
