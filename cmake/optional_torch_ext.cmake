# The torch 2.x tier's Python (PyPI's torch, pinned in scripts/torch-pin.txt
# and installed by scripts/torch-venv.sh): the tests' torch2 tier runs it,
# and mci_torch's C++ extension is built against its torch.
file(STRINGS ${PROJECT_SOURCE_DIR}/scripts/torch-pin.txt mci_torch2_pin REGEX "^torch==")
string(REPLACE "torch==" "" mci_torch2_version "${mci_torch2_pin}")
# scripts/test.sh passes the venv's path (scripts/torch-venv.sh --python);
# the default is where it is made on a machine where /var/cache is writable.
if(DEFINED ENV{MCI_CACHE_ROOT})
  set(mci_cache_root $ENV{MCI_CACHE_ROOT})
else()
  set(mci_cache_root /var/cache/mci)
endif()
set(MCI_TORCH2_PYTHON ${mci_cache_root}/venv-torch-${mci_torch2_version}/bin/python CACHE FILEPATH
    "Python of the newer torch tier (scripts/torch-venv.sh makes it)")

# mci_torch._C, the backend "mci" as a c10d::Backend subclass
# (bindings/python/mci_torch/csrc). Built against the torch that
# MCI_TORCH_EXT_PYTHON imports, which must be 2.x with its headers (a PyPI
# wheel has them). Its headers, libraries and the Python headers come from
# torch.utils.cpp_extension, not from find_package(Torch): Debian's LibTorch
# 1.13 (MCI_WITH_TORCH) already defines the targets torch and c10 in this
# project, and a second Torch package cannot define them again.
set(MCI_WITH_TORCH_EXT AUTO CACHE STRING "Build mci_torch's C++ extension for torch 2.x (mci_torch._C): AUTO, ON or OFF")
set(MCI_TORCH_EXT_PYTHON ${MCI_TORCH2_PYTHON} CACHE FILEPATH "Python whose torch 2.x mci_torch's C++ extension is built for")
# `pip install .` (cmake/wheel.cmake): the torch of the environment the wheel
# is installed into, whose interpreter is the one pip runs the build with
# (scikit-build-core's Python_EXECUTABLE), whatever the build dir's cache says.
if(SKBUILD)
  set(MCI_TORCH_EXT_PYTHON ${Python_EXECUTABLE})
endif()
set(MCI_HAVE_TORCH_EXT OFF)
set(MCI_TORCH_EXT_MSG "")
set(mci_torch_ext_why "")
if(NOT MCI_WITH_TORCH_EXT STREQUAL "OFF")
  if(MCI_SANITIZE)
    set(mci_torch_ext_why "an instrumented libmci cannot be loaded into a plain Python")
  elseif(NOT EXISTS ${MCI_TORCH_EXT_PYTHON})
    set(mci_torch_ext_why "${MCI_TORCH_EXT_PYTHON} does not exist (scripts/torch-venv.sh)")
  else()
    # Under pip's build isolation that interpreter runs with its own
    # site-packages taken off sys.path (pip's sitecustomize), but sysconfig
    # still names them: added back here (with their .pth files), torch is
    # found where the wheel will be installed. Without isolation they are
    # already there and nothing changes.
    execute_process(COMMAND ${MCI_TORCH_EXT_PYTHON} -c [=[
import os, site, sys, sysconfig
for key in ("purelib", "platlib"):
    if sysconfig.get_paths()[key] not in sys.path:
        site.addsitedir(sysconfig.get_paths()[key])
import torch, torch.utils.cpp_extension as c
print(torch.__version__)
print(",".join(c.include_paths()))
print(c.library_paths()[0])
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
]=] RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
      # The error's last line: "No module named 'torch'", or what broke.
      string(STRIP "${err}" err)
      string(REGEX REPLACE ".*\n" "" err "${err}")
      set(mci_torch_ext_why "${MCI_TORCH_EXT_PYTHON} cannot import torch (${err})")
    else()
      string(REPLACE "\n" ";" out "${out}")
      list(GET out 0 MCI_TORCH_EXT_TORCH_VERSION)
      list(GET out 1 mci_torch_ext_includes)
      string(REPLACE "," ";" mci_torch_ext_includes "${mci_torch_ext_includes}")
      list(GET out 2 MCI_TORCH_EXT_LIBDIR)
      list(GET out 3 MCI_TORCH_EXT_PY_INCLUDE)
      list(GET out 4 MCI_TORCH_EXT_SUFFIX)
      list(GET out 5 MCI_TORCH_EXT_CXX11_ABI)
      list(GET mci_torch_ext_includes 0 mci_torch_ext_inc0)
      if(MCI_TORCH_EXT_TORCH_VERSION VERSION_LESS 2.1)
        set(mci_torch_ext_why "torch ${MCI_TORCH_EXT_TORCH_VERSION} is older than 2.1")
      elseif(NOT EXISTS ${mci_torch_ext_inc0}/torch/csrc/distributed/c10d/Backend.hpp)
        set(mci_torch_ext_why "torch ${MCI_TORCH_EXT_TORCH_VERSION} has no c10d headers")
      elseif(NOT EXISTS ${MCI_TORCH_EXT_PY_INCLUDE}/Python.h)
        set(mci_torch_ext_why "no Python.h in ${MCI_TORCH_EXT_PY_INCLUDE}")
      else()
        set(MCI_HAVE_TORCH_EXT ON)
        set(MCI_TORCH_EXT_INCLUDES ${mci_torch_ext_includes} ${MCI_TORCH_EXT_PY_INCLUDE})
        set(MCI_TORCH_EXT_MSG "; torch extension (torch ${MCI_TORCH_EXT_TORCH_VERSION})")
      endif()
    endif()
  endif()
  if(NOT MCI_HAVE_TORCH_EXT)
    if(MCI_WITH_TORCH_EXT STREQUAL "ON")
      message(FATAL_ERROR "MCI_WITH_TORCH_EXT=ON but ${mci_torch_ext_why} (set MCI_TORCH_EXT_PYTHON)")
    endif()
    set(MCI_TORCH_EXT_MSG "; no torch extension: ${mci_torch_ext_why}")
  endif()
endif()
