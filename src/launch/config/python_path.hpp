// Where mci's Python package (mci_torch) is, seen from mcirun's own
// executable: installed, P/bin/mcirun and P/<libdir>/python3/dist-packages;
// in a build tree, build/bin/mcirun and build/python. mcirun puts it first
// on its children's PYTHONPATH, so `import mci_torch` works under mcirun.
#pragma once

#include <string>

namespace mci::launch {

// The folder holding mci_torch/, or "" when neither place has it.
std::string mci_python_path();

// Same, for an executable at exe_path (for tests).
std::string mci_python_path_for(const std::string& exe_path);

}  // namespace mci::launch
