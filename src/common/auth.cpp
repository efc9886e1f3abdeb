#include "common/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <stdexcept>

#include "common/log.hpp"

namespace mci::auth {

Nonce random_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    throw std::runtime_error("mci: the system random generator failed (RAND_bytes)");
  }
  return n;
}

Proof prove(std::string_view token, std::string_view role, const Nonce& nonce) {
  std::string msg(role);
  msg.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  Proof out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), out.data(), &len);
  return out;
}

bool equal(const Proof& a, const Proof& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

std::string new_token() {
  const Nonce n = random_nonce();
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (auto b : n) {
    s.push_back(hex[b >> 4]);
    s.push_back(hex[b & 15]);
  }
  return s;
}

}  // namespace mci::auth
