# The job's store on etcd (src/store/etcd_store.cpp): etcd's v3 API through
# its JSON gateway, over cpp-httplib (Debian's libcpp-httplib-dev). Like the
# optional backends (cmake/optional.cmake): AUTO builds it when found, ON
# fails without it, OFF leaves it out. Sets MCI_HAVE_ETCD and the ", etcd
# store" the configure line prints.
include(${CMAKE_CURRENT_LIST_DIR}/optional.cmake)

macro(mci_find_etcd)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(MCI_HTTPLIB QUIET IMPORTED_TARGET cpp-httplib>=0.10)
  endif()
endmacro()
mci_optional(ETCD "Build the job's store on etcd (cpp-httplib): AUTO, ON or OFF" mci_find_etcd
  ", etcd"
  "MCI_WITH_ETCD=ON but cpp-httplib was not found (apt-get install libcpp-httplib-dev pkg-config)"
  "cpp-httplib not found: no store on etcd (apt-get install libcpp-httplib-dev)"
  MCI_HTTPLIB_FOUND)
