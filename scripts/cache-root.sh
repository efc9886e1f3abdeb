# Sourced by scripts/test.sh, fuzz.sh and torch-venv.sh: sets mci_cache_root,
# where what outlives a clone is kept (the torch venv, ccache's objects), so
# that a fresh clone on the same machine downloads and compiles only what
# changed. $MCI_CACHE_ROOT if set; else /var/cache/mci where it can be
# written (CI runs as root); else ${XDG_CACHE_HOME:-~/.cache}/mci.
if [ -n "${MCI_CACHE_ROOT:-}" ]; then
  mci_cache_root=$MCI_CACHE_ROOT
elif mkdir -p /var/cache/mci 2>/dev/null && [ -w /var/cache/mci ]; then
  mci_cache_root=/var/cache/mci
else
  mci_cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/mci
fi

# mci_use_ccache: exports ccache's settings and sets mci_launcher to the
# CMake arguments that compile through it; both empty where ccache is not
# installed. base_dir and no hash_dir: objects do not depend on where the
# clone is (the tests' paths are in one generated header,
# tests/CMakeLists.txt). The size bounds the cache: about four builds.
mci_use_ccache() {
  mci_launcher=()
  command -v ccache >/dev/null 2>&1 || return 0
  export CCACHE_DIR=${CCACHE_DIR:-$mci_cache_root/ccache}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-12G}
  mci_launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
}
