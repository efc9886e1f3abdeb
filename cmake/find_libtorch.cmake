# Which LibTorch the mci::torch module builds against (mci_find_torch,
# called by cmake/optional_backends.cmake), in this order:
#  1. Torch_DIR, when given (-DTorch_DIR=<prefix>/share/cmake/Torch);
#  2. the torch of a Python whose torch.utils.cmake_prefix_path holds a Torch
#     package (a PyPI wheel's does; Debian's python3-torch has none):
#     MCI_LIBTORCH_PYTHON when given, else the active venv's
#     ($VIRTUAL_ENV/bin/python), else the first python3 on PATH;
#  3. CMake's own search, which finds Debian's libtorch-dev.
# The configure line says which one was taken, its version and folder.
#
# A build tree keeps the LibTorch its first configure found: Torch's package
# caches the paths of its libraries (TORCH_LIBRARY, c10_LIBRARY, Caffe2_DIR,
# ...), so a tree that moved to another Torch would link a mix of both. A
# configure that would move is stopped, saying to use a fresh build folder.
# For the same reason one project holds one Torch package
# (cmake/optional_torch_ext.cmake), and scripts/test.sh builds the wheel's
# LibTorch in a second tree (build-libtorch2/).
#
# libmci is compiled with g++'s default C++11 string ABI; a LibTorch built
# with _GLIBCXX_USE_CXX11_ABI=0 (every PyPI wheel before torch 2.7) cannot
# link with it, so such a torch is refused here with what to do instead,
# not left to fail at link time with undefined std::string symbols.
include_guard(GLOBAL)

set(MCI_LIBTORCH_PYTHON "" CACHE STRING
    "Python whose torch (a pip wheel, 2.7 or newer) gives mci::torch its LibTorch; empty: the active venv's, else the first python3 on PATH; OFF: ask no Python (Debian's libtorch-dev). Torch_DIR, when given, wins")

set(mci_torch_old_abi_fix
    "Use torch 2.7 or newer (its wheels use the C++11 ABI: pip install 'torch>=2.7'), or Debian's libtorch-dev (-DMCI_LIBTORCH_PYTHON=OFF), or build without the module (-DMCI_WITH_TORCH=OFF), in a fresh build folder")

# mci_torch_of_python(PY): what PY's torch offers. Sets, in the caller,
# mci_py_torch_dir (its Torch package folder, or empty), mci_py_torch_version
# mci_py_torch_why (why there is no usable package, or empty) and
# mci_py_torch_old_abi (TRUE when the why is the old string ABI).
function(mci_torch_of_python py)
  set(dir "")
  set(version "")
  set(why "")
  set(old_abi FALSE)
  execute_process(COMMAND ${py} -c
    "import torch, torch.utils; print(torch.__version__); print(torch.utils.cmake_prefix_path); print(int(getattr(torch._C, '_GLIBCXX_USE_CXX11_ABI', 1))); print(torch.version.cuda or '')"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    set(why "${py} cannot import torch")
  else()
    string(REPLACE "\n" ";" out "${out}")
    list(GET out 0 version)
    list(GET out 1 prefix)
    list(GET out 2 cxx11_abi)
    set(cuda "")
    list(LENGTH out n)
    if(n GREATER 3)
      list(GET out 3 cuda)
    endif()
    if(cuda AND NOT CUDAToolkit_FOUND)
      find_package(CUDAToolkit QUIET)
    endif()
    if(NOT EXISTS "${prefix}/Torch/TorchConfig.cmake")
      set(why "the torch ${version} of ${py} has no CMake package (no ${prefix}/Torch/TorchConfig.cmake)")
    elseif(cxx11_abi EQUAL 0)
      set(old_abi TRUE)
      set(why "the torch ${version} of ${py} was built with the old C++ string ABI (torch._C._GLIBCXX_USE_CXX11_ABI is False, as in PyPI wheels before 2.7), which cannot link with libmci (the C++11 ABI)")
    elseif(cuda AND NOT CUDAToolkit_FOUND)
      # Its Caffe2Config.cmake would stop the whole configure.
      set(why "the torch ${version} of ${py} is a CUDA ${cuda} build, whose CMake package needs a CUDA toolkit, and none was found (set CUDAToolkit_ROOT, or install the CPU wheel: pip install torch --index-url https://download.pytorch.org/whl/cpu)")
    else()
      set(dir "${prefix}/Torch")
    endif()
  endif()
  set(mci_py_torch_dir "${dir}" PARENT_SCOPE)
  set(mci_py_torch_version "${version}" PARENT_SCOPE)
  set(mci_py_torch_why "${why}" PARENT_SCOPE)
  set(mci_py_torch_old_abi ${old_abi} PARENT_SCOPE)
endfunction()

# The Python that step 2 asks: MCI_LIBTORCH_PYTHON, the venv's, or python3
# on PATH. Sets mci_torch_py (empty: ask none) and mci_torch_py_given.
function(mci_torch_python)
  set(py "${MCI_LIBTORCH_PYTHON}")
  set(given TRUE)
  if(py STREQUAL "")
    set(given FALSE)
    if(DEFINED ENV{VIRTUAL_ENV} AND EXISTS "$ENV{VIRTUAL_ENV}/bin/python")
      set(py "$ENV{VIRTUAL_ENV}/bin/python")
    else()
      string(REPLACE ":" ";" path "$ENV{PATH}")
      foreach(d ${path})
        if(EXISTS "${d}/python3" AND NOT IS_DIRECTORY "${d}/python3")
          set(py "${d}/python3")
          break()
        endif()
      endforeach()
    endif()
  elseif(py STREQUAL "OFF")
    set(py "")
  endif()
  set(mci_torch_py "${py}" PARENT_SCOPE)
  set(mci_torch_py_given ${given} PARENT_SCOPE)
endfunction()

function(mci_torch_refuse_switch from to)
  message(FATAL_ERROR
    "This build folder (${CMAKE_BINARY_DIR}) was configured with the LibTorch at ${from}; it cannot move to ${to}: "
    "Torch's CMake package caches its libraries' paths, and the tree would link a mix of both. "
    "Configure a fresh build folder for the other LibTorch (cmake -B build-libtorch2 ...), "
    "or go back to the earlier Torch_DIR / MCI_LIBTORCH_PYTHON here")
endfunction()

# Chooses, then runs find_package(Torch). Sets MCI_TORCH_HOW (how it was
# chosen, for the configure line) and records the choice in the cache.
macro(mci_find_torch)
  set(mci_debian_torch /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/Torch)
  set(mci_torch_hint "")
  set(MCI_TORCH_HOW "")
  set(mci_torch_ask_python TRUE)
  if(Torch_DIR AND NOT Torch_DIR MATCHES "-NOTFOUND$")
    if(MCI_TORCH_FOUND_DIR AND NOT Torch_DIR STREQUAL MCI_TORCH_FOUND_DIR)
      mci_torch_refuse_switch("${MCI_TORCH_FOUND_DIR}" "${Torch_DIR} (Torch_DIR)")
    endif()
    if(NOT MCI_TORCH_FOUND_DIR)
      set(MCI_TORCH_HOW "Torch_DIR")  # given on the command line
      set(mci_torch_ask_python FALSE)
    elseif("${MCI_LIBTORCH_PYTHON}" STREQUAL "${MCI_TORCH_FOUND_WITH}")
      set(MCI_TORCH_HOW "${MCI_TORCH_FOUND_HOW}")  # as the first configure chose
      set(mci_torch_ask_python FALSE)
    endif()
    # Else MCI_LIBTORCH_PYTHON changed since: see where it leads below.
  endif()
  if(mci_torch_ask_python)
    mci_torch_python()
    if(mci_torch_py)
      mci_torch_of_python(${mci_torch_py})
      if(mci_py_torch_dir)
        set(mci_torch_hint "${mci_py_torch_dir}")
        set(MCI_TORCH_HOW "the torch ${mci_py_torch_version} of ${mci_torch_py}")
      elseif(mci_torch_py_given)
        if(mci_py_torch_old_abi)
          message(FATAL_ERROR "MCI_LIBTORCH_PYTHON=${mci_torch_py}: ${mci_py_torch_why}. ${mci_torch_old_abi_fix}")
        endif()
        message(FATAL_ERROR "MCI_LIBTORCH_PYTHON=${mci_torch_py}: ${mci_py_torch_why}. Give a Python whose torch is a PyPI wheel (2.7 or newer), or -DMCI_LIBTORCH_PYTHON=OFF for Debian's libtorch-dev")
      elseif(mci_py_torch_old_abi)
        # Found by looking around, not asked for: say why it is passed over.
        message(WARNING "LibTorch: ${mci_py_torch_why}; passed over for the next choice (Debian's libtorch-dev). "
                        "A torch 2.7 or newer in that Python would be used; -DMCI_LIBTORCH_PYTHON=OFF asks no Python")
      elseif(mci_py_torch_why MATCHES "CUDA toolkit")
        message(WARNING "LibTorch: ${mci_py_torch_why}; not used")
      endif()
    endif()
    if(NOT mci_torch_hint)
      set(MCI_TORCH_HOW "CMake's search")
      if(EXISTS ${mci_debian_torch})
        set(MCI_TORCH_HOW "Debian's libtorch-dev")
        set(mci_torch_hint ${mci_debian_torch})
      endif()
    endif()
    if(MCI_TORCH_FOUND_DIR AND mci_torch_hint AND NOT mci_torch_hint STREQUAL MCI_TORCH_FOUND_DIR)
      mci_torch_refuse_switch("${MCI_TORCH_FOUND_DIR}" "${mci_torch_hint} (${MCI_TORCH_HOW})")
    endif()
    if(mci_torch_hint AND NOT MCI_TORCH_FOUND_DIR)
      # Torch_DIR, once cached, would stop find_package from looking.
      unset(Torch_DIR CACHE)
      set(Torch_DIR "${mci_torch_hint}" CACHE PATH "The folder holding TorchConfig.cmake")
    endif()
  endif()
  # A wheel's TorchConfig.cmake finds its Caffe2 package and its libraries
  # with PATHS, which CMake tries after the system's folders: on a machine
  # with Debian's libtorch-dev, the wheel's headers would get Debian's 1.13
  # libraries. Its own prefix (<prefix>/share/cmake/Torch) goes first.
  set(mci_torch_prefix "")
  set(mci_torch_saved_prefix_path "${CMAKE_PREFIX_PATH}")
  if(Torch_DIR MATCHES "/share/cmake/Torch/?$")
    get_filename_component(mci_torch_prefix "${Torch_DIR}/../../.." ABSOLUTE)
    list(PREPEND CMAKE_PREFIX_PATH "${mci_torch_prefix}")
  endif()
  # A CUDA wheel's package picks CUDA architectures for code compiled with
  # nvcc against it; "Auto" (its default) compiles and runs a GPU probe,
  # which fails under this project's C++20 setting. mci compiles no CUDA
  # against torch: a fixed list skips the probe.
  set(mci_torch_set_arch FALSE)
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST Common)
    set(mci_torch_set_arch TRUE)
  endif()
  find_package(Torch QUIET HINTS ${mci_debian_torch})
  if(mci_torch_set_arch)
    unset(TORCH_CUDA_ARCH_LIST)
  endif()
  set(CMAKE_PREFIX_PATH "${mci_torch_saved_prefix_path}")
  if(Torch_FOUND AND mci_torch_prefix)
    foreach(mci_v Caffe2_DIR TORCH_LIBRARY c10_LIBRARY)
      if(${mci_v})
        string(FIND "${${mci_v}}" "${mci_torch_prefix}/" mci_at)
        if(NOT mci_at EQUAL 0)
          message(FATAL_ERROR
            "The LibTorch at ${Torch_DIR} took ${mci_v}=${${mci_v}} from another LibTorch on this machine: "
            "the build would mix two torches. Configure a fresh build folder (this one cached it), "
            "or -D${mci_v}= a path under ${mci_torch_prefix}")
        endif()
      endif()
    endforeach()
  endif()
  if(Torch_FOUND)
    if("${TORCH_CXX_FLAGS}" MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
      message(FATAL_ERROR
        "LibTorch ${Torch_VERSION} at ${Torch_DIR} (${MCI_TORCH_HOW}) was built with the old C++ string ABI "
        "(TORCH_CXX_FLAGS is ${TORCH_CXX_FLAGS}, as in PyPI wheels before torch 2.7), while libmci uses g++'s "
        "default, the C++11 ABI: mci::torch cannot link with both. ${mci_torch_old_abi_fix}")
    endif()
    set(MCI_TORCH_FOUND_DIR "${Torch_DIR}" CACHE INTERNAL "The LibTorch this tree was configured with")
    set(MCI_TORCH_FOUND_WITH "${MCI_LIBTORCH_PYTHON}" CACHE INTERNAL "MCI_LIBTORCH_PYTHON when it was chosen")
    set(MCI_TORCH_FOUND_HOW "${MCI_TORCH_HOW}" CACHE INTERNAL "How it was chosen")
  endif()
endmacro()
