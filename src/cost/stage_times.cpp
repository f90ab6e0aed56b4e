// stage_times / stage_times_table (cost_model.hpp): per virtual stage, the forward + backward
// work of one microbatch, so the imbalance between stages (a light ViT stage, a heavy LM-head
// stage) is visible next to the simulated iteration.
#include <algorithm>
#include <string>
#include <vector>

#include "../util/format.hpp"
#include "../util/text_table.hpp"
#include "braid/cost_model.hpp"
#include "layout.hpp"

namespace braid {

std::vector<StageTime> stage_times(const CostModel& cost) {
  std::vector<StageTime> out;
  out.reserve(cost.chunks.size());
  for (const ChunkCost& c : cost.chunks) {
    StageTime st;
    st.virtual_stage = c.virtual_stage;
    auto add = [&st](const UnitCost& u) {
      for (const PhaseCost& p : u.phase) {
        st.compute_s += p.time_s;
        st.collective_s += p.collective_s();
      }
    };
    // A folded ViT's layers are prologue units: one layer per run of units of one layer number.
    int last_layer = -1;
    for (const UnitCost& u : c.prologue) {
      add(u);
      if (u.vision && u.layer >= 0 && u.layer != last_layer) ++st.vision_layers;
      last_layer = u.layer;
    }
    for (int l = 0; l < c.layer_count(); ++l) {
      for (const UnitCost& u : c.layer(l)) add(u);
      ++(c.layer(l).front().vision ? st.vision_layers : st.layers);
    }
    for (const UnitCost& u : c.epilogue) add(u);
    out.push_back(st);
  }
  return out;
}

std::string stage_times_table(const std::vector<StageTime>& stages) {
  double slowest = 0, sum = 0;
  for (const StageTime& s : stages) {
    slowest = std::max(slowest, s.total_s());
    sum += s.total_s();
  }
  const double mean = stages.empty() ? 0 : sum / stages.size();
  std::vector<std::vector<std::string>> rows{
      {"stage", "vit_layers", "lm_layers", "compute_ms", "tp_comm_ms", "total_ms", "of_slowest"}};
  for (const StageTime& s : stages)
    rows.push_back({std::to_string(s.virtual_stage), std::to_string(s.vision_layers),
                    std::to_string(s.layers), util::format("%.3f", s.compute_s * 1e3),
                    util::format("%.3f", s.collective_s * 1e3),
                    util::format("%.3f", s.total_s() * 1e3),
                    util::format("%.1f%%", slowest > 0 ? 100.0 * s.total_s() / slowest : 0.0)});
  return "virtual stages (forward + backward of one microbatch, compute and TP collectives "
         "alone):\n" +
         util::fixed_width_table(rows,
                                 {util::right(5), util::right(10), util::right(10), util::right(12),
                                  util::right(12), util::right(10), util::right(12)}) +
         util::format("slowest %.3f ms, mean %.3f ms: imbalance %.3f (slowest/mean)\n",
                      slowest * 1e3, mean * 1e3, mean > 0 ? slowest / mean : 0.0);
}

}  // namespace braid
