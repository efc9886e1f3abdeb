# The nccl backend: NVIDIA NCCL and the CUDA toolkit, optional
# (cmake/optional_backends.cmake includes this file). MCI_HAVE_CUDA also
# makes the cpu backend stage CUDA buffers (src/backends/CMakeLists.txt).
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
mci_backend_parts(NCCL
  SOURCES nccl/nccl_backend.cpp
  DEFINITIONS MCI_HAVE_CUDA
  INCLUDES ${MCI_NCCL_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS}
  PUBLIC_LIBRARIES CUDA::cudart ${MCI_NCCL_LIB})
