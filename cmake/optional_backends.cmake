# Optional backends: found and reported, never required for the core. Each
# is described by its folder's src/backends/NAME/backend.cmake, included
# here (before src/, whose layers read MCI_HAVE_X): a find and its
# mci_optional call (the switch MCI_WITH_X, AUTO: build it when found; ON:
# fail without it; OFF; cmake/optional.cmake), then mci_backend_parts with
# what the backends layer compiles for it. So a backend adds no line here,
# in src/backends/CMakeLists.txt or in the configure line.
include(${CMAKE_CURRENT_LIST_DIR}/optional.cmake)

# mci_backend_parts(NAME SOURCES file... [DEFINITIONS d...] [INCLUDES dir...]
#                   [LIBRARIES lib...] [PUBLIC_LIBRARIES lib...])
# After NAME's mci_optional: when it was found, its sources (relative to
# src/backends), definitions (MCI_HAVE_NAME always: registry.cpp's row reads
# it), system include folders and libraries (PUBLIC_LIBRARIES: also for the
# layers above) join the backends layer; its configure words join
# MCI_BACKENDS_MSG. Its switch joins MCI_BACKEND_SWITCHES either way.
macro(mci_backend_parts name)
  cmake_parse_arguments(mci_bp "" "" "SOURCES;DEFINITIONS;INCLUDES;LIBRARIES;PUBLIC_LIBRARIES" ${ARGN})
  list(APPEND MCI_BACKEND_SWITCHES MCI_WITH_${name})
  if(MCI_HAVE_${name})
    string(APPEND MCI_BACKENDS_MSG "${MCI_${name}_MSG}")
    list(APPEND MCI_BACKEND_PART_SOURCES ${mci_bp_SOURCES})
    list(APPEND MCI_BACKEND_PART_DEFINITIONS MCI_HAVE_${name} ${mci_bp_DEFINITIONS})
    list(APPEND MCI_BACKEND_PART_INCLUDES ${mci_bp_INCLUDES})
    list(APPEND MCI_BACKEND_PART_LIBRARIES ${mci_bp_LIBRARIES})
    list(APPEND MCI_BACKEND_PART_PUBLIC_LIBRARIES ${mci_bp_PUBLIC_LIBRARIES})
  endif()
endmacro()

set(MCI_BACKENDS_MSG "")
set(MCI_BACKEND_SWITCHES "")
# CONFIGURE_DEPENDS: a backend folder added or removed is seen at the next
# build (the fragments themselves are tracked as any included file is).
file(GLOB mci_backend_fragments CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backends/*/backend.cmake)
list(SORT mci_backend_fragments)
foreach(fragment ${mci_backend_fragments})
  include(${fragment})
endforeach()
list(JOIN MCI_BACKEND_SWITCHES ", " MCI_BACKEND_SWITCHES)

# LibTorch (PyTorch's C++ frontend): the optional mci::torch module
# (DistributedDataParallel for torch::nn::Module) and its examples. Found
# through Torch's own CMake package: Torch_DIR, a pip wheel's (the active
# venv's) or Debian's libtorch-dev (cmake/find_libtorch.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/find_libtorch.cmake)
mci_optional(TORCH "Build the LibTorch module (mci::torch): AUTO, ON or OFF" mci_find_torch
  "; module torch (LibTorch @Torch_VERSION@, @MCI_TORCH_HOW@: @Torch_DIR@)"
  "MCI_WITH_TORCH=ON but LibTorch was not found (apt-get install libtorch-dev, or set Torch_DIR, or MCI_LIBTORCH_PYTHON to a Python with torch 2.7 or newer)"
  "LibTorch not found: the mci::torch module and train_ddp/train_multinode are not built (apt-get install libtorch-dev)"
  TARGET torch)
if(MCI_HAVE_TORCH)
  # Torch's targets carry their include folders as ordinary ones: mark
  # them system headers so their warnings do not stop our -Werror build.
  get_target_property(mci_torch_inc torch INTERFACE_INCLUDE_DIRECTORIES)
  if(mci_torch_inc)
    set_property(TARGET torch APPEND PROPERTY INTERFACE_SYSTEM_INCLUDE_DIRECTORIES ${mci_torch_inc})
    # A wheel's include folder carries its own {fmt} (a newer one than
    # Debian's libfmt-dev, which fmt::fmt links): code that sees torch's
    # headers then gets that fmt's headers, whose functions must come from
    # the headers too, not from Debian's libfmt.so.
    list(GET mci_torch_inc 0 mci_torch_inc0)
    if(NOT mci_torch_inc0 STREQUAL "/usr/include" AND EXISTS ${mci_torch_inc0}/fmt/format.h)
      set_property(TARGET torch APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY)
    endif()
    # A CUDA wheel's libraries find their CUDA and NCCL in the pip packages
    # beside torch (RPATH $ORIGIN/../../nvidia/*/lib); ld, linking a program,
    # would take the system's older libnccl.so.2 instead: look there first.
    file(GLOB mci_torch_nvidia_libs LIST_DIRECTORIES TRUE ${mci_torch_inc0}/../../nvidia/*/lib)
    foreach(d ${mci_torch_nvidia_libs})
      set_property(TARGET torch APPEND PROPERTY INTERFACE_LINK_OPTIONS "-Wl,-rpath-link,${d}")
    endforeach()
  endif()
endif()
