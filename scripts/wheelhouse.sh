#!/usr/bin/env bash
# The build backend that `pip install .` needs (pyproject.toml's
# build-system.requires: scikit-build-core and what it depends on), as wheels
# in <cache root>/wheelhouse (scripts/cache-root.sh), outside the clone: the
# install test (tests/python/pip_install.py) installs from there with
# --no-index, so CI downloads them once per machine, not once per run.
# Downloaded with the torch tier's interpreter (scripts/torch-venv.sh), the
# one the test's venv is made from, so that the wheels fit its Python.
# Idempotent: prints nothing and downloads nothing when they are there.
# `scripts/wheelhouse.sh --dir` prints the folder and exits.
# Where they cannot be had (no torch venv, no network), says so and exits 0:
# the install test then skips, naming this script.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/cache-root.sh
dir=$mci_cache_root/wheelhouse
if [ "${1:-}" = "--dir" ]; then
  echo "$dir"
  exit 0
fi

python=$(scripts/torch-venv.sh --python)
if [ ! -x "$python" ]; then
  echo "wheelhouse.sh: no torch venv ($python: scripts/torch-venv.sh); the pip install test will skip"
  exit 0
fi
# The requirements as pyproject.toml states them: one source.
requires=$("$python" -c '
import re, sys
text = open("pyproject.toml").read()
block = re.search(r"^\[build-system\]\s*\nrequires\s*=\s*\[([^]]*)\]", text, re.M)
if not block:
    sys.exit("wheelhouse.sh: pyproject.toml has no requires = [...] line right under [build-system]")
print(" ".join(re.findall(r"\"([^\"]+)\"", block.group(1))))')
# The stamp names what was downloaded: a changed requirement downloads again.
stamp=$dir/.requires
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$requires" ]; then
  exit 0
fi
echo "wheelhouse.sh: downloading $requires into $dir (once per machine)"
mkdir -p "$dir"
# shellcheck disable=SC2086 # one word per requirement
if "$python" -m pip download -q --disable-pip-version-check --only-binary=:all: -d "$dir" $requires; then
  echo "$requires" >"$stamp"
else
  echo "wheelhouse.sh: could not download $requires (no network to PyPI?); the pip install test will skip"
fi
