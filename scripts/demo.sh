#!/usr/bin/env bash
# The demo: installs what is missing, builds into build/, and runs the
# course lab on two ranks with mcirun (Gloo, host memory), as a newcomer would:
#
#   mcirun --nproc_per_node=2 labo
#
# Extra arguments go to mcirun (e.g. --prefix); MCI_BACKEND=cpu selects mci's
# own engine instead of Gloo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build --target mcirun labo
exec build/bin/mcirun --standalone --nproc_per_node=2 "$@" build/bin/labo
