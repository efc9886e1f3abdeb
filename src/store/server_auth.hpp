// The serving side of the store's job-token handshake, shared by mci's own
// store server and the relay in front of etcd: a new connection is greeted
// with a nonce, and its first frame must prove the token over it.
#pragma once

#include <string>

#include "common/auth.hpp"
#include "store/wire.hpp"

namespace mci::store {

// The first frame a new connection gets.
Response greeting(const auth::Nonce& nonce, bool token_required);

struct AuthCheck {
  bool ok = false;
  Response answer;                // sent back when ok: the server's own proof, if asked
  const char* refusal = nullptr;  // how a refused process connected ("with another job token"), if it was refused
  const char* why = nullptr;      // why the connection is dropped, when not ok
};

// Checks a connection's auth request against the job's token (empty: none
// is needed, and any answer passes).
AuthCheck check_auth(const std::string& token, const auth::Nonce& nonce, const Request& r);

}  // namespace mci::store
