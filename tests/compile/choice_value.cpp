// Compiled by ctest alone (tests/CMakeLists.txt): with MCI_CHOICE_TYPO
// defined it must not compile, as a setting's choice is checked against its
// row at compile time (common/settings.hpp, ChoiceValue); without, it must.
#include "common/settings.hpp"

bool eager(const mci::Settings& s) {
#ifdef MCI_CHOICE_TYPO
  return s.is({"MCI_CONNECT", "eagre"});
#else
  return s.is({"MCI_CONNECT", "eager"});
#endif
}
