#!/usr/bin/env bash
# Installs the Debian packages mci needs to build and test. Idempotent: when
# everything is present it prints nothing and installs nothing.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config ccache
  libfmt-dev libssl-dev libcli11-dev nlohmann-json3-dev libpugixml-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev
  libtorch-dev
  libhwloc-dev
  iproute2 procps
  openmpi-bin libopenmpi-dev
  python3-torch
  python3-matplotlib python3-jsonschema
  chromium prometheus
  libcpp-httplib-dev etcd-server etcd-client openssl
)
# Optional extras a caller may ask for (e.g. clang for fuzzing).
packages+=("$@")

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "deps.sh: missing packages (${missing[*]}) and not root; install them or run as root" >&2
    exit 1
  fi
fi
echo "deps.sh: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
