#!/usr/bin/env bash
# How often the seed's labo.py hangs at exit (pytorch/pytorch#56297) under
# mcirun, on gloo and on mci, N runs each: a run "hangs" when every line was
# printed but the job had not exited LIMIT seconds later (then it is stopped).
#
#   bench/torch_exit_hang.sh BUILD_DIR [N=20] [LIMIT=15]
set -uo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR [N] [LIMIT]}" && pwd)
n=${2:-20}
limit=${3:-15}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/tests/fixtures/pytorch/labo.py" "$work/labo_gloo.py"
sed -e 's/return torch.device("cpu"), "gloo"/return torch.device("cpu"), "mci"/' \
    -e 's/^import torch.distributed as dist$/import torch.distributed as dist\nimport mci_torch/' \
    "$work/labo_gloo.py" >"$work/labo_mci.py"
export MCI_PYTHON=${MCI_PYTHON:-/usr/bin/python3}
for backend in gloo mci; do
  hangs=0 fails=0
  for i in $(seq "$n"); do
    timeout -s TERM "$limit" "$build/bin/mcirun" --nproc_per_node=2 --standalone "$work/labo_$backend.py" \
      >"$work/out" 2>&1
    rc=$?
    if [ $rc = 124 ] && grep -q "all_reduce_ms" "$work/out"; then
      hangs=$((hangs + 1))
    elif [ $rc != 0 ]; then
      fails=$((fails + 1))
    fi
  done
  echo "$backend: $hangs of $n runs hung at exit, $fails failed otherwise"
done
