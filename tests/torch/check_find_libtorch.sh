#!/usr/bin/env bash
# cmake/find_libtorch.cmake's choices and refusals, on a one-file CMake
# project with fake torches (a Python that prints what torch would, a Torch
# package that sets only what the choice reads), so that no real wheel is
# needed: check_find_libtorch.sh SOURCE_DIR CASE. Exits 0 when CASE holds.
set -uo pipefail
src=$1
case_name=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A Torch package at $tmp/NAME/share/cmake/Torch, version $2, string ABI $3.
fake_package() {
  local dir=$tmp/$1/share/cmake/Torch
  mkdir -p "$dir"
  printf 'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=%s")\nset(Torch_FOUND TRUE)\n' "$3" >"$dir/TorchConfig.cmake"
  printf 'set(PACKAGE_VERSION %s)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' "$2" >"$dir/TorchConfigVersion.cmake"
}
# A Python at $1 whose torch is version $2 at package NAME $3, ABI $4:
# it answers find_libtorch.cmake's one question (version, prefix, ABI, CUDA).
fake_python() {
  mkdir -p "$(dirname "$1")"
  printf '#!/bin/sh\nprintf "%%s\\n" %s %s %s ""\n' "$2" "$tmp/$3/share/cmake" "$4" >"$1"
  chmod +x "$1"
}

mkdir -p "$tmp/project"
cat >"$tmp/project/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.20)
project(find_libtorch_check NONE)
include($src/cmake/find_libtorch.cmake)
mci_find_torch()
message(STATUS "CHOSEN [\${Torch_VERSION}] [\${MCI_TORCH_HOW}] [\${Torch_DIR}]")
EOF

# configure BUILD_NAME [cmake args]: its output in $out, its status in $rc.
configure() {
  local b=$1
  shift
  out=$(env -u VIRTUAL_ENV PATH="$fake_path" ${venv:+VIRTUAL_ENV=$venv} cmake -S "$tmp/project" -B "$tmp/$b" "$@" 2>&1)
  rc=$?
}
expect() {  # expect RC TEXT...: the status and each text in the output
  local want=$1
  shift
  if [ "$rc" != "$want" ]; then
    echo "FAIL: configure exited $rc, expected $want"
    echo "$out"
    exit 1
  fi
  for t in "$@"; do
    if ! grep -qF -- "$t" <<<"$(tr '\n' ' ' <<<"$out" | tr -s ' ')"; then
      echo "FAIL: the configure output lacks: $t"
      echo "$out"
      exit 1
    fi
  done
}

# No python3 on PATH unless a case puts one there.
mkdir -p "$tmp/bin"
fake_path=$tmp/bin:$(dirname "$(command -v cmake)")
venv=""
fake_package wheel29 2.9.0 1
fake_package wheel25 2.5.1 0
fake_package other 2.10.0 1

case $case_name in
  VenvWheelIsChosen)
    venv=$tmp/venv
    fake_python "$venv/bin/python" 2.9.0 wheel29 1
    configure b
    expect 0 "CHOSEN [2.9.0] [the torch 2.9.0 of $venv/bin/python] [$tmp/wheel29/share/cmake/Torch]"
    ;;
  TorchDirWinsOverTheVenv)
    venv=$tmp/venv
    fake_python "$venv/bin/python" 2.9.0 wheel29 1
    configure b -DTorch_DIR="$tmp/other/share/cmake/Torch"
    expect 0 "CHOSEN [2.10.0] [Torch_DIR] [$tmp/other/share/cmake/Torch]"
    ;;
  NamedOldAbiWheelIsRefused)
    fake_python "$tmp/py25" 2.5.1 wheel25 0
    configure b -DMCI_LIBTORCH_PYTHON="$tmp/py25"
    expect 1 "MCI_LIBTORCH_PYTHON=$tmp/py25: the torch 2.5.1" "old C++ string ABI" "Use torch 2.7 or newer"
    ;;
  OldAbiTorchDirIsRefused)
    configure b -DTorch_DIR="$tmp/wheel25/share/cmake/Torch"
    expect 1 "LibTorch 2.5.1 at $tmp/wheel25/share/cmake/Torch (Torch_DIR) was built with the old C++ string ABI" \
      "TORCH_CXX_FLAGS is -D_GLIBCXX_USE_CXX11_ABI=0" "Use torch 2.7 or newer"
    ;;
  OldAbiWheelOnPathIsPassedOver)
    fake_python "$tmp/bin/python3" 2.5.1 wheel25 0
    configure b
    expect 0 "the torch 2.5.1 of $tmp/bin/python3 was built with the old C++ string ABI" "passed over"
    if grep -q "CHOSEN \[2.5.1\]" <<<"$out"; then
      echo "FAIL: the old-ABI torch was chosen"
      echo "$out"
      exit 1
    fi
    ;;
  ABuildFolderKeepsItsTorch)
    venv=$tmp/venv
    fake_python "$venv/bin/python" 2.9.0 wheel29 1
    configure b
    expect 0 "CHOSEN [2.9.0]"
    venv=""  # a later configure from a shell without the venv: the same torch
    configure b
    expect 0 "CHOSEN [2.9.0] [the torch 2.9.0 of $tmp/venv/bin/python]"
    configure b -DTorch_DIR="$tmp/other/share/cmake/Torch"
    expect 1 "was configured with the LibTorch at $tmp/wheel29/share/cmake/Torch; it cannot move to $tmp/other/share/cmake/Torch" \
      "Configure a fresh build folder"
    ;;
  *)
    echo "unknown case $case_name"
    exit 2
    ;;
esac
echo "PASS: $case_name"
