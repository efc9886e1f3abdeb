# The wheel that `pip install .` builds (pyproject.toml, scikit-build-core,
# which defines SKBUILD): libmci, mcirun and mci_torch with its C++
# extension, laid out for a Python environment:
#   <site-packages>/mci_torch/             the package, _C (the extension) and
#                                          _libpath.py naming lib/ beside it
#   <site-packages>/mci_torch/lib/libmci.so
#   <environment>/bin/mcirun               on the environment's PATH
# Included by the top-level CMakeLists.txt before any target (so the
# settings below reach every target); mci_wheel_install(), called by
# bindings/python/CMakeLists.txt once the targets exist, adds the wheel's
# install rules (component "wheel", the only one pyproject.toml installs)
# and the target mci_wheel (the only one it builds).
include_guard(GLOBAL)

# A user's pip compiles through ccache when it is installed: the second
# `pip install .` of a changed clone, and CI's install test, rebuild only
# what changed. A launcher given by the caller wins.
if(NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(MCI_CCACHE ccache)
  if(MCI_CCACHE)
    set(CMAKE_CXX_COMPILER_LAUNCHER ${MCI_CCACHE})
  endif()
endif()

function(mci_wheel_install)
  # libmci is private to the package, so one file with no version in its
  # name: a wheel (a zip) would store the libmci.so.0 links as copies.
  set_property(TARGET mci PROPERTY VERSION)
  set_property(TARGET mci PROPERTY SOVERSION)
  install(TARGETS mci LIBRARY DESTINATION mci_torch/lib COMPONENT wheel)

  # mcirun links none of our libraries (docs/architecture.md).
  set_property(TARGET mcirun PROPERTY INSTALL_RPATH "")
  install(TARGETS mcirun RUNTIME DESTINATION ${SKBUILD_SCRIPTS_DIR} COMPONENT wheel)

  install(FILES ${MCI_PY_FILES} DESTINATION mci_torch COMPONENT wheel)
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/python-wheel/_libpath.py
    CONTENT "# Where libmci is: in lib/ beside this file (the wheel's layout, cmake/wheel.cmake).\nimport os\n\nLIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), \"lib\", \"$<TARGET_FILE_NAME:mci>\")\n")
  install(FILES ${CMAKE_BINARY_DIR}/python-wheel/_libpath.py DESTINATION mci_torch COMPONENT wheel)

  add_custom_target(mci_wheel)
  add_dependencies(mci_wheel mci mcirun)
  if(MCI_HAVE_TORCH_EXT)
    # libmci from lib/ beside it; torch's libraries are not searched for:
    # `import torch` has loaded them before mci_torch imports _C, and the
    # loader matches them by name.
    set_target_properties(mci_torch_ext PROPERTIES INSTALL_RPATH "$ORIGIN/lib" INSTALL_RPATH_USE_LINK_PATH OFF)
    install(TARGETS mci_torch_ext LIBRARY DESTINATION mci_torch COMPONENT wheel)
    add_dependencies(mci_wheel mci_torch_ext)
    message(STATUS "mci wheel: mci_torch's C++ extension is built for torch ${MCI_TORCH_EXT_TORCH_VERSION} (${MCI_TORCH_EXT_PYTHON})")
  else()
    set(why "${mci_torch_ext_why}")
    if(NOT why)
      set(why "MCI_WITH_TORCH_EXT=OFF")
    endif()
    message(WARNING "mci wheel: no C++ extension for mci_torch: ${why}. mci_torch will use its "
      "pure-Python backend; to get the extension, install torch 2.x into this environment and run pip install again.")
  endif()
endfunction()
