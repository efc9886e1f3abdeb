#include "mci/store.hpp"

namespace mci {

TcpStoreOptions StoreAddress::options(std::chrono::milliseconds timeout,
                                      std::chrono::milliseconds connect_timeout) const {
  TcpStoreOptions o;
  o.host = host;
  o.port = port;
  o.token = token;
  o.timeout = timeout;
  o.connect_timeout = connect_timeout;
  return o;
}

std::unique_ptr<TcpStore> StoreAddress::connect(std::chrono::milliseconds timeout,
                                                std::chrono::milliseconds connect_timeout) const {
  return std::make_unique<TcpStore>(options(timeout, connect_timeout));
}

}  // namespace mci
