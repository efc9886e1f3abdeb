#!/usr/bin/env bash
# The newer torch tier: a venv holding the PyPI torch that scripts/torch-pin.txt
# names, outside the clone so that it is made once per machine (a few GB of
# wheels), at <cache root>/venv-torch-<version> (scripts/cache-root.sh:
# $MCI_CACHE_ROOT, else /var/cache/mci, else ~/.cache/mci).
# Idempotent: prints nothing and downloads nothing when the venv is there.
# `scripts/torch-venv.sh --python` prints the venv's interpreter and exits.
# Where it cannot be made (no pip, no network), says so and exits 0: the
# tests of that tier then skip, naming this script.
set -euo pipefail
cd "$(dirname "$0")/.."

pin=$(grep -v '^#' scripts/torch-pin.txt | grep -m1 '^torch==')
version=${pin#torch==}
. scripts/cache-root.sh
root=$mci_cache_root
venv=$root/venv-torch-$version

# --python: only print where the tier's interpreter is (or would be).
if [ "${1:-}" = "--python" ]; then
  echo "$venv/bin/python"
  exit 0
fi

# The other pins (what torch's own test suite imports), installed beside it.
extras=$(grep -v '^#' scripts/torch-pin.txt | grep '==' | grep -v '^torch==' || true)
extras_there() {
  local e
  for e in $extras; do
    [ "$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('${e%%==*}'))" 2>/dev/null)" = "${e#*==}" ] || return 1
  done
}

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$version')" 2>/dev/null; then
  if [ -n "$extras" ] && ! extras_there; then
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install -q --disable-pip-version-check $extras ||
      echo "torch-venv.sh: could not install $extras; the conformance suite will skip"
  fi
  exit 0
fi
# The first python3 on PATH that can make a venv with pip (Debian's own
# /usr/bin/python3 has no ensurepip unless python3-venv is installed).
maker=""
for py in $(type -ap python3) /usr/bin/python3; do
  if "$py" -c "import ensurepip, venv" 2>/dev/null; then maker=$py; break; fi
done
if [ -z "$maker" ]; then
  echo "torch-venv.sh: no python3 here can make a venv with pip (apt-get install python3-venv); the torch $version tier will skip"
  exit 0
fi
echo "torch-venv.sh: installing $pin into $venv (once per machine)"
mkdir -p "$root"
# A half-made venv (an install cut off) fails the check above: made again.
rm -rf "$venv"
# shellcheck disable=SC2086
if ! { "$maker" -m venv "$venv" &&
       "$venv/bin/python" -m pip install -q --disable-pip-version-check "$pin" numpy $extras; }; then
  rm -rf "$venv"
  echo "torch-venv.sh: could not install $pin (no network to PyPI?); the torch $version tier will skip"
fi
