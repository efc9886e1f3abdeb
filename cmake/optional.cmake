# mci_optional(NAME DOC FIND MSG ON_MISSING AUTO_MISSING FOUND_IF...)
# An optional part, found and reported, never required for the core. Its
# switch is the cache entry MCI_WITH_NAME (DOC: its help): AUTO builds with
# it when found, ON fails without it, OFF leaves it out without looking.
# Unless OFF, it runs FIND (a macro naming what to look for) and tests the
# if() condition that ends the call (FOUND_IF...). Found: MCI_HAVE_NAME is ON
# and MCI_NAME_MSG is MSG, what the configure line prints (@VAR@ in it is
# read after FIND). Not found: a fatal ON_MISSING under ON, the status line
# AUTO_MISSING under AUTO.
# A macro, and its texts positional: what FIND finds lands in the caller's
# scope, and a text keeps its semicolons (cmake_parse_arguments would split
# "; module torch" in a macro).
include_guard(GLOBAL)

macro(mci_optional name doc find msg on_missing auto_missing)
  set(MCI_WITH_${name} AUTO CACHE STRING "${doc}")
  set(MCI_HAVE_${name} OFF)
  set(MCI_${name}_MSG "")
  if(NOT MCI_WITH_${name} STREQUAL "OFF")
    cmake_language(CALL ${find})
    if(${ARGN})
      set(MCI_HAVE_${name} ON)
      string(CONFIGURE "${msg}" MCI_${name}_MSG @ONLY)
    elseif(MCI_WITH_${name} STREQUAL "ON")
      message(FATAL_ERROR "${on_missing}")
    else()
      message(STATUS "${auto_missing}")
    endif()
  endif()
endmacro()
