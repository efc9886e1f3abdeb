// mcirun: the launcher. Everything but this line lives in src/launch/.
#include "launch/launcher.hpp"

int main(int argc, char** argv) { return mci::launch::mcirun_main({argv, argv + argc}); }
