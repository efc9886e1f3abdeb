#!/usr/bin/env bash
# Installs the build into a fresh prefix, then builds and runs a program that
# finds mci with find_package(mci) and runs a one-rank all-reduce.
# Usage: check_install.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
for f in bin/mcirun bin/mci-perf bin/mci-topo bin/labo include/mci/mci.hpp lib/cmake/mci/mciConfig.cmake; do
  [ -e "$work/prefix/$f" ] || { echo "missing after install: $f"; exit 1; }
done
ls "$work/prefix"/lib/libmci.so* >/dev/null
mkdir "$work/app"
cat > "$work/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(app CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(mci REQUIRED)
add_executable(app app.cpp)
target_link_libraries(app PRIVATE mci::mci)
CM
cat > "$work/app/app.cpp" <<'CPP'
#include <mci/mci.hpp>
#include <cstdio>
int main() {
  mci::StoreServer server(mci::StoreServerOptions{});
  mci::TcpStoreOptions so;
  so.port = server.port();
  mci::InitOptions o;
  o.store = std::make_shared<mci::TcpStore>(so);
  o.rank = 0;
  o.world_size = 1;
  auto pg = mci::init_process_group(o);
  std::vector<float> v{1.5f, 2.5f};
  pg->all_reduce(mci::view(v), mci::ReduceOp::avg);
  std::printf("%g %g\n", v[0], v[1]);
  return v[0] == 1.5f && v[1] == 2.5f ? 0 : 1;
}
CPP
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app/build" >/dev/null
# The installed programs run from the prefix (their RPATH finds libmci).
"$work/prefix/bin/mcirun" --help >/dev/null
"$work/prefix/bin/mci-topo" --version >/dev/null
MCI_LOG_LEVEL=error "$work/app/build/app"
echo "install ok"
