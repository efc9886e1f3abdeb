#!/usr/bin/env bash
# Installs the build into a fresh prefix, then builds and runs a program that
# finds mci with find_package(mci) and runs a one-rank all-reduce.
# Usage: check_install.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
src=$(cd "$(dirname "$0")/../.." && pwd)
for f in bin/mcirun bin/mci-perf bin/mci-topo bin/labo bin/bench_ceilings bin/mci-plot \
         share/mci/examples/labo.py share/mci/examples/train_multinode_cpu.py share/mci/examples/fsdp2_train.py \
         include/mci/mci.hpp lib/cmake/mci/mciConfig.cmake; do
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

# bench/plot, installed as mci-plot: it answers --help under any python3,
# and draws under the first interpreter it finds with matplotlib (it runs
# itself again under that one), or says what it tried and how to fix it.
plot_help=$("$work/prefix/bin/mci-plot" --help)
[[ $plot_help == "usage: mci-plot"* ]] || { echo "mci-plot --help did not answer: $plot_help"; exit 1; }
if "$work/prefix/bin/mci-plot" "$src/tests/fixtures/plot/nccl_tests_all_reduce.json" -o "$work/chart.png" \
     2>"$work/plot.err"; then
  [ -s "$work/chart.png" ] || { echo "mci-plot wrote no chart"; cat "$work/plot.err"; exit 1; }
else
  grep -q "apt-get install python3-matplotlib" "$work/plot.err" || { echo "mci-plot failed without the fix:"; cat "$work/plot.err"; exit 1; }
  echo "note: no interpreter here has matplotlib: mci-plot's chart is not exercised"
fi

# mci-topo check names bench_ceilings as the installed program: by name when
# PATH finds the installed one, by its path in the prefix otherwise.
"$work/prefix/bin/mci-perf" all_reduce -b 64K -e 64K -n 2 -w 1 --json "$work/perf.json" >/dev/null
for path in "$work/prefix/bin:$PATH" "/usr/bin:/bin"; do
  hint=$(PATH=$path "$work/prefix/bin/mci-topo" check --perf "$work/perf.json" \
           --nccl-xml "$src/tests/fixtures/topo/nccl/pcie-2socket-4gpu.xml" | grep -- "--benchmark_filter=Memcpy")
  program=${hint%% *}
  case $path in
    "$work/prefix/bin:"*) expected=bench_ceilings ;;
    *) expected=$work/prefix/bin/bench_ceilings ;;
  esac
  [ "$program" = "$expected" ] || { echo "mci-topo's hint names '$program', not '$expected': $hint"; exit 1; }
done

# The Python package: installed beside the library, found by the documented
# PYTHONPATH, and put on PYTHONPATH by the installed mcirun for its ranks.
py=$work/prefix/lib/python3/dist-packages
[ -e "$py/mci_torch/__init__.py" ] || { echo "missing after install: lib/python3/dist-packages/mci_torch"; exit 1; }
torch_python=${MCI_TORCH_PYTHON:-/usr/bin/python3}
if "$torch_python" -c "import torch.distributed" 2>/dev/null; then
  (cd "$work" && PYTHONPATH="$py" "$torch_python" -c "import mci_torch, ctypes; print('mci_torch from', mci_torch.__file__)")
  cat > "$work/one_rank.py" <<'PY'
import torch, torch.distributed as dist, mci_torch
dist.init_process_group("mci")
t = torch.tensor([1.5, 2.5]); dist.all_reduce(t, op=dist.ReduceOp.AVG)
assert t.tolist() == [1.5, 2.5], t
print("mcirun + mci_torch ok")
PY
  (cd "$work" && MCI_PYTHON="$torch_python" "$work/prefix/bin/mcirun" --standalone "$work/one_rank.py")
else
  echo "note: $torch_python cannot import torch: the installed mci_torch is not exercised"
fi
echo "install ok"
