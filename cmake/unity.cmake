# MCI_UNITY_BUILD: each target's C++ sources compiled in batches, each batch
# one generated file that includes its sources, so that the headers they
# share (ours, the standard library's, fmt's, GoogleTest's) are parsed once
# a batch instead of once a source. CI's clang, Debug and sanitizer trees
# (scripts/test.sh) and the wheel (pyproject.toml) use it: a clean g++ Debug build takes half
# the CPU time (540 s, then 270 s). The plain build/ compiles each source
# alone, which keeps every source's own includes checked.
#
# Not CMake's CMAKE_UNITY_BUILD: CMake 3.25 writes the sources' absolute
# paths into its batch files, so a clone in another folder never finds
# ccache's objects; here a batch names its sources relative to itself
# (ccache rewrites the compiler's own paths relative to the clone: its
# base_dir, scripts/cache-root.sh).
option(MCI_UNITY_BUILD "Compile each target's sources in batches (CI's clang, Debug and sanitizer trees, the wheel)" OFF)
set(MCI_UNITY_BATCH_SIZE 8 CACHE STRING "Sources per batch of MCI_UNITY_BUILD")
# g++ sees a class that a batched source defines, with a member of that
# source's anonymous-namespace type, as a header's, and warns
# (-Wsubobject-linkage) about what is, source by source, correct code.
if(MCI_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND MCI_WARNINGS -Wno-subobject-linkage)
endif()

# mci_unity_target(TARGET): TARGET's .cpp sources that have no properties of
# their own replaced by batch files under its binary folder.
function(mci_unity_target target)
  get_target_property(type ${target} TYPE)
  if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|EXECUTABLE|OBJECT_LIBRARY)$")
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  get_target_property(binary_dir ${target} BINARY_DIR)
  # Headers holding the clone's paths (MCI_UNITY_ALONE_INCLUDES): a source
  # that includes one would make its whole batch a ccache miss in every new
  # clone.
  get_property(alone_includes GLOBAL PROPERTY MCI_UNITY_ALONE_INCLUDES)
  list(TRANSFORM alone_includes REPLACE "\\." "\\\\.")
  list(JOIN alone_includes "|" alone_pattern)
  set(kept)
  set(batched)
  foreach(s ${sources})
    set(path ${s})
    if(NOT s MATCHES "\\$<" AND NOT IS_ABSOLUTE ${s})
      set(path ${source_dir}/${s})
    endif()
    set(alone FALSE)
    # Generator expressions, other languages, generated files (in the build
    # tree) and sources with flags of their own stay as they are.
    if(s MATCHES "\\$<" OR NOT s MATCHES "\\.cpp$" OR NOT EXISTS ${path})
      set(alone TRUE)
    else()
      cmake_path(IS_PREFIX CMAKE_BINARY_DIR ${path} NORMALIZE generated)
      if(generated)
        set(alone TRUE)
      endif()
      if(alone_pattern)
        file(STRINGS ${path} hit REGEX "^#include \"(.*/)?(${alone_pattern})\"")
        if(hit)
          set(alone TRUE)
        endif()
      endif()
      foreach(p COMPILE_OPTIONS COMPILE_DEFINITIONS COMPILE_FLAGS INCLUDE_DIRECTORIES)
        get_source_file_property(v ${path} DIRECTORY ${source_dir} ${p})
        if(v)
          set(alone TRUE)
        endif()
      endforeach()
    endif()
    if(alone)
      list(APPEND kept ${s})
    else()
      list(APPEND batched ${path})
    endif()
  endforeach()
  list(LENGTH batched count)
  if(count LESS 2)
    return()
  endif()
  set(folder ${binary_dir}/mci-unity/${target})
  set(batches)
  math(EXPR last "(${count} - 1) / ${MCI_UNITY_BATCH_SIZE}")
  foreach(index RANGE ${last})
    math(EXPR first "${index} * ${MCI_UNITY_BATCH_SIZE}")
    list(SUBLIST batched ${first} ${MCI_UNITY_BATCH_SIZE} members)
    set(content "// Generated (cmake/unity.cmake).\n")
    foreach(path ${members})
      file(RELATIVE_PATH rel ${folder} ${path})
      string(APPEND content "#include \"${rel}\"\n")
    endforeach()
    # file(CONFIGURE) rewrites a batch only when it changed.
    file(CONFIGURE OUTPUT ${folder}/batch_${index}.cpp CONTENT "${content}" @ONLY)
    list(APPEND batches ${folder}/batch_${index}.cpp)
  endforeach()
  set_property(TARGET ${target} PROPERTY SOURCES ${kept} ${batches})
endfunction()

# mci_unity_build(DIR): every target defined in DIR and below.
function(mci_unity_build dir)
  if(NOT MCI_UNITY_BUILD)
    return()
  endif()
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${targets})
    mci_unity_target(${t})
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(d ${subdirs})
    mci_unity_build(${d})
  endforeach()
endfunction()
