// mci: collective communication for data-parallel training.
#pragma once

#include "mci/backend_caps.hpp"
#include "mci/ddp.hpp"
#include "mci/device_memory.hpp"
#include "mci/errors.hpp"
#include "mci/init.hpp"
#include "mci/op_kind.hpp"
#include "mci/process_group.hpp"
#include "mci/store.hpp"
#include "mci/timing.hpp"
#include "mci/types.hpp"
#include "mci/work.hpp"
