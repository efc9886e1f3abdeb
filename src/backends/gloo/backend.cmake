# The gloo backend: the Gloo library (Debian's libgloo-dev), optional
# (cmake/optional_backends.cmake includes this file).
macro(mci_find_gloo)
  find_package(Gloo CONFIG QUIET)
endmacro()
mci_optional(GLOO "Build the gloo backend: AUTO, ON or OFF" mci_find_gloo
  ", gloo"
  "MCI_WITH_GLOO=ON but Gloo was not found (apt-get install libgloo-dev)"
  "Gloo not found: the gloo backend is not built (apt-get install libgloo-dev)"
  TARGET gloo)
mci_backend_parts(GLOO
  SOURCES gloo/gloo_backend.cpp gloo/gloo_recvs.cpp gloo/gloo_sends.cpp gloo/gloo_store.cpp
  LIBRARIES gloo)
