#include "ddp/most_advanced.hpp"

#include "mci/types.hpp"

namespace mci::ddp {

MostAdvanced most_advanced(ProcessGroup& pg, std::uint64_t steps_done) {
  auto most = static_cast<std::int64_t>(steps_done);
  pg.all_reduce(view(&most, 1), ReduceOp::max);
  // Ranks that are not that far offer the group's size: above any rank.
  std::int32_t source = static_cast<std::int64_t>(steps_done) == most ? pg.rank() : pg.size();
  pg.all_reduce(view(&source, 1), ReduceOp::min);
  return {source, static_cast<std::uint64_t>(most)};
}

}  // namespace mci::ddp
