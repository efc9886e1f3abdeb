// When a mesh connects its ranks (MCI_CONNECT, read by the backend).
#pragma once

namespace mci::transport {

// lazy: a rank connects to a peer when an algorithm first needs it, so its
// connections grow with the algorithms it runs, not with the job. eager:
// every pair connects at init, so a rank that cannot be reached shows there.
enum class ConnectMode { lazy, eager };

}  // namespace mci::transport
