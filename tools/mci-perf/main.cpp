// mci-perf: nccl-tests-style sweeps of mci's collectives. The logic lives in
// src/perf/ where the tests reach it.
#include <iostream>

#include "perf/app.hpp"

int main(int argc, char** argv) { return mci::perf::perf_main({argv, argv + argc}, std::cout, std::cerr); }
