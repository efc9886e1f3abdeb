# hwloc for mci-topo's live view (CPUs, NUMA nodes, the PCI tree). Like the
# optional backends (cmake/optional.cmake): AUTO builds with it when found,
# ON fails without it, OFF leaves it out; without it mci-topo reads sysfs
# itself. Sets MCI_HAVE_HWLOC and the ", hwloc" the configure line prints.
include(${CMAKE_CURRENT_LIST_DIR}/optional.cmake)

macro(mci_find_hwloc)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(MCI_HWLOC QUIET IMPORTED_TARGET hwloc>=2.0)
  endif()
endmacro()
mci_optional(HWLOC "Read the live topology through hwloc: AUTO, ON or OFF" mci_find_hwloc
  ", hwloc"
  "MCI_WITH_HWLOC=ON but hwloc >= 2.0 was not found (apt-get install libhwloc-dev pkg-config)"
  "hwloc not found: mci-topo reads the live topology from sysfs (apt-get install libhwloc-dev)"
  MCI_HWLOC_FOUND)
