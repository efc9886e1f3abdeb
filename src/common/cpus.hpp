// How many CPUs this process may run on (its affinity mask), for wait
// policies: spinning pays off only while every waiting rank has a core.
#pragma once

namespace mci {

int online_cpus();

}  // namespace mci
