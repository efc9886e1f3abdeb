# Optional backends: found and reported, never required for the core. Each
# has its switch (AUTO: build it when found; ON: fail without it; OFF) and
# sets MCI_HAVE_X and the ", x" its configure line prints (cmake/optional.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/optional.cmake)

macro(mci_find_gloo)
  find_package(Gloo CONFIG QUIET)
endmacro()
mci_optional(GLOO "Build the gloo backend: AUTO, ON or OFF" mci_find_gloo
  ", gloo"
  "MCI_WITH_GLOO=ON but Gloo was not found (apt-get install libgloo-dev)"
  "Gloo not found: the gloo backend is not built (apt-get install libgloo-dev)"
  TARGET gloo)

macro(mci_find_nccl)
  set(MCI_CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA toolkit root (with NCCL)")
  find_package(CUDAToolkit QUIET)
  find_path(MCI_NCCL_INCLUDE nccl.h HINTS ${MCI_CUDA_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME PATH_SUFFIXES include)
  find_library(MCI_NCCL_LIB nccl HINTS ${MCI_CUDA_ROOT}/lib64 ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME PATH_SUFFIXES lib lib64)
endmacro()
mci_optional(NCCL "Build the nccl backend: AUTO, ON or OFF" mci_find_nccl
  ", nccl"
  "MCI_WITH_NCCL=ON but CUDA/NCCL were not found (set MCI_CUDA_ROOT)"
  "CUDA/NCCL not found: the nccl backend is not built"
  CUDAToolkit_FOUND AND MCI_NCCL_INCLUDE AND MCI_NCCL_LIB)

macro(mci_find_mpi)
  # MPI's C API through the C++ compiler (this project enables no C);
  # MPI_CXX_SKIP_MPICXX leaves out the deprecated C++ bindings.
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI QUIET COMPONENTS CXX)
endmacro()
mci_optional(MPI "Build the mpi backend: AUTO, ON or OFF" mci_find_mpi
  ", mpi"
  "MCI_WITH_MPI=ON but MPI was not found (apt-get install libopenmpi-dev)"
  "MPI not found: the mpi backend is not built (apt-get install libopenmpi-dev)"
  MPI_CXX_FOUND)

# LibTorch (PyTorch's C++ frontend): the optional mci::torch module
# (DistributedDataParallel for torch::nn::Module) and its examples. Found
# through Torch's own CMake package (Debian: libtorch-dev).
macro(mci_find_torch)
  find_package(Torch QUIET HINTS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/Torch)
endmacro()
mci_optional(TORCH "Build the LibTorch module (mci::torch): AUTO, ON or OFF" mci_find_torch
  "; module torch (LibTorch @Torch_VERSION@)"
  "MCI_WITH_TORCH=ON but LibTorch was not found (apt-get install libtorch-dev, or set Torch_DIR)"
  "LibTorch not found: the mci::torch module and train_ddp/train_multinode are not built (apt-get install libtorch-dev)"
  TARGET torch)
if(MCI_HAVE_TORCH)
  # Torch's targets carry their include folders as ordinary ones: mark
  # them system headers so their warnings do not stop our -Werror build.
  get_target_property(mci_torch_inc torch INTERFACE_INCLUDE_DIRECTORIES)
  if(mci_torch_inc)
    set_property(TARGET torch APPEND PROPERTY INTERFACE_SYSTEM_INCLUDE_DIRECTORIES ${mci_torch_inc})
  endif()
endif()
