// Job-token proofs: HMAC-SHA256 challenge-response, so a token never crosses
// the wire and a connection that cannot prove it holds the token is dropped.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mci::auth {

using Nonce = std::array<std::uint8_t, 32>;
using Proof = std::array<std::uint8_t, 32>;

Nonce random_nonce();
// HMAC-SHA256(token, role || nonce). `role` keeps a client's proof from being
// replayed as a server's.
Proof prove(std::string_view token, std::string_view role, const Nonce& nonce);
bool equal(const Proof& a, const Proof& b);  // constant time
// A fresh random token (hex), as mcirun hands its children.
std::string new_token();

}  // namespace mci::auth
