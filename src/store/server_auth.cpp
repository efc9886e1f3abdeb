#include "store/server_auth.hpp"

#include <algorithm>

namespace mci::store {

Response greeting(const auth::Nonce& nonce, bool token_required) {
  Response hello;
  hello.value.assign(nonce.begin(), nonce.end());
  hello.num = token_required ? 1 : 0;
  return hello;
}

AuthCheck check_auth(const std::string& token, const auth::Nonce& nonce, const Request& r) {
  AuthCheck out;
  if (token.empty()) {
    out.ok = true;
    return out;
  }
  auth::Proof got{};
  if (r.value.size() != got.size()) {
    out.refusal = "without a job token";
    out.why = "no job token proof (set MCI_JOB_TOKEN to the job's token)";
    return out;
  }
  std::copy(r.value.begin(), r.value.end(), got.begin());
  if (!auth::equal(got, auth::prove(token, "mci-store-client", nonce))) {
    out.refusal = "with another job token";
    out.why = "wrong job token proof";
    return out;
  }
  // The client may ask the server to prove the token too.
  if (r.value2.size() == sizeof(auth::Nonce)) {
    auth::Nonce theirs{};
    std::copy(r.value2.begin(), r.value2.end(), theirs.begin());
    const auto p = auth::prove(token, "mci-store-server", theirs);
    out.answer.value.assign(p.begin(), p.end());
  }
  out.ok = true;
  return out;
}

}  // namespace mci::store
