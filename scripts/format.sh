#!/usr/bin/env bash
# Formats mci's C++ with clang-format (.clang-format at the root), or with
# --check says which files differ from it and exits 1 (CI runs that).
#   scripts/format.sh            rewrite the tracked C++ files in place
#   scripts/format.sh --check    change nothing; non-zero if any would change
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh clang-format
# Debian 12's clang-format is 14; another major version formats a few
# constructs differently, so the check names the one it needs.
cf=$(command -v clang-format-14 || command -v clang-format)
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    echo "format.sh: ${#bad[@]} file(s) differ from .clang-format ($("$cf" --version)); run scripts/format.sh:"
    printf '  %s\n' "${bad[@]}"
    exit 1
  fi
  echo "format.sh: ${#files[@]} files match .clang-format"
else
  "$cf" -i "${files[@]}"
fi
