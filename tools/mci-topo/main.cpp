// mci-topo: how the devices are wired and what bandwidth the wiring allows.
// The logic lives in src/topo/ where the tests reach it.
#include <iostream>

#include "topo/app.hpp"

int main(int argc, char** argv) { return mci::topo::topo_main({argv, argv + argc}, std::cout, std::cerr); }
