// mci-top: a running job's ranks in a terminal, read from the page that
// mcirun --monitor serves. The logic lives in src/jobview/ where the tests
// reach it.
#include <iostream>

#include "jobview/top.hpp"

int main(int argc, char** argv) { return mci::jobview::top_main({argv, argv + argc}, std::cout, std::cerr); }
