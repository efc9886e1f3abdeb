# The mpi backend: the job's MPI library (Debian's libopenmpi-dev),
# optional (cmake/optional_backends.cmake includes this file).
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
mci_backend_parts(MPI
  SOURCES mpi/mpi_backend.cpp
  DEFINITIONS OMPI_SKIP_MPICXX MPICH_SKIP_MPICXX
  LIBRARIES MPI::MPI_CXX)
