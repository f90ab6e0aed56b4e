// Renderings of a design result: JSON (the search trace and every seed) and a short table.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../util/format.hpp"
#include "../util/text_table.hpp"
#include "../util/units.hpp"
#include "braid/design.hpp"

namespace braid {

namespace {

double gain(const DesignResult& r) {
  return r.best_hand.empty() || r.report.iteration_time_s <= 0
             ? 0
             : r.best_hand_time_s / r.report.iteration_time_s - 1;
}

}  // namespace

std::string design_json(const DesignResult& r, const DesignOptions& o) {
  using json = nlohmann::ordered_json;
  json hand = json::array();
  for (std::size_t i = 0; i < r.hand.size(); ++i)
    hand.push_back({{"schedule", r.hand[i].schedule},
                    {"iteration_time_s", r.hand[i].iteration_time_s},
                    {"peak_gib", r.hand_peak_bytes[i] / kGiB},
                    {"peak_ma", r.hand_peak_ma[i]},
                    {"fits", static_cast<bool>(r.hand_fits[i])}});
  json trace = json::array();
  for (const DesignStep& s : r.trace)
    trace.push_back({{"candidate", s.candidate}, {"best_time_s", s.best_time_s}, {"move", s.move}});
  json out{{"study", r.report.study},
           {"schedule", r.schedule.name},
           {"pp", r.schedule.pp},
           {"microbatches", r.schedule.microbatches},
           {"iteration_time_s", r.report.iteration_time_s},
           {"tp_bubble_rate", r.report.tp_bubble_rate},
           {"pp_bubble_rate", r.report.pp_bubble_rate},
           {"peak_gib", r.peak_bytes / kGiB},
           {"peak_ma", r.peak_ma},
           {"mem_cap_gib", o.mem_cap_bytes >= 0 ? json(o.mem_cap_bytes / kGiB) : json(nullptr)},
           {"mem_cap_ma", o.mem_cap_ma >= 0 ? json(o.mem_cap_ma) : json(nullptr)},
           {"origin", r.seed},
           {"best_hand", r.best_hand},
           {"best_hand_time_s", r.best_hand_time_s},
           {"speedup_over_best_hand", gain(r)},
           {"rng_seed", o.seed},
           {"max_candidates", o.max_candidates},
           {"candidates", r.candidates},
           {"invalid", r.invalid},
           {"duplicates", r.duplicates},
           {"over_cap", r.over_cap},
           {"stopped_by", r.budget_exhausted_by_time ? "time" : "candidates"},
           {"hand", std::move(hand)},
           {"trace", std::move(trace)}};
  return out.dump(2) + "\n";
}

std::string design_table(const DesignResult& r, const DesignOptions& o) {
  std::string out = "study " + r.report.study + ": pp " + std::to_string(r.schedule.pp) + ", " +
                    std::to_string(r.schedule.microbatches) + " microbatches";
  if (o.mem_cap_bytes >= 0) out += ", cap " + util::format("%.2f", o.mem_cap_bytes / kGiB) + " GiB";
  if (o.mem_cap_ma >= 0) out += ", cap " + util::format("%g", o.mem_cap_ma) + " M_a";
  std::vector<std::vector<std::string>> rows{
      {"schedule", "iteration", "peak GiB", "peak M_a", "under cap"}};
  auto row = [&rows](const std::string& name, double t, double bytes, double ma, bool fits) {
    rows.push_back({name, util::format("%.6g", t), util::format("%.2f", bytes / kGiB),
                    util::format("%.2f", ma), fits ? "yes" : "no"});
  };
  for (std::size_t i = 0; i < r.hand.size(); ++i)
    row(r.hand[i].schedule, r.hand[i].iteration_time_s, r.hand_peak_bytes[i], r.hand_peak_ma[i],
        r.hand_fits[i]);
  row(kDesignedName, r.report.iteration_time_s, r.peak_bytes, r.peak_ma, true);
  out += "\n\n" + util::fixed_width_table(rows, {util::left(20),
                                                 util::right(10),
                                                 util::right(10),
                                                 util::right(9),
                                                 {util::Align::Left, 0, 1}});
  out += "\ndesigned from " + r.seed + " after " + std::to_string(r.candidates) + " candidates (" +
         std::to_string(r.invalid) + " invalid, " + std::to_string(r.duplicates) + " repeated, " +
         std::to_string(r.over_cap) + " over the cap)";
  if (!r.best_hand.empty())
    out += "; " + util::format("%+.2f", 100 * gain(r)) + " % over the best hand-designed (" +
           r.best_hand + ")";
  return out + "\n";
}

}  // namespace braid
