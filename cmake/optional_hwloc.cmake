# hwloc for mci-topo's live view (CPUs, NUMA nodes, the PCI tree). Like the
# optional backends: AUTO builds with it when found, ON fails without it,
# OFF leaves it out; without it mci-topo reads sysfs itself. Sets
# MCI_HAVE_HWLOC and the ", hwloc" the configure line prints.
set(MCI_WITH_HWLOC AUTO CACHE STRING "Read the live topology through hwloc: AUTO, ON or OFF")

set(MCI_HAVE_HWLOC OFF)
set(MCI_HWLOC_MSG "")
if(NOT MCI_WITH_HWLOC STREQUAL "OFF")
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(MCI_HWLOC QUIET IMPORTED_TARGET hwloc>=2.0)
  endif()
  if(MCI_HWLOC_FOUND)
    set(MCI_HAVE_HWLOC ON)
    set(MCI_HWLOC_MSG ", hwloc")
  elseif(MCI_WITH_HWLOC STREQUAL "ON")
    message(FATAL_ERROR "MCI_WITH_HWLOC=ON but hwloc >= 2.0 was not found (apt-get install libhwloc-dev pkg-config)")
  else()
    message(STATUS "hwloc not found: mci-topo reads the live topology from sysfs (apt-get install libhwloc-dev)")
  endif()
endif()
