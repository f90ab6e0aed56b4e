// Text helpers shared by the explorer's renderings (sweep table, search text, SVG). Internal.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "../util/text_table.hpp"
#include "braid/explore.hpp"

namespace braid::explore {

// A Configuration field's value as text and tables write it ("stp", "8", "on", "selective") and
// as JSON holds it (strings, numbers, booleans; an enum by its name).
inline std::string field_text(const std::string& v) { return v; }
inline std::string field_text(int v) { return std::to_string(v); }
inline std::string field_text(bool v) { return v ? "on" : "off"; }
inline std::string field_text(Recompute v) { return name(v); }
inline std::string field_text(CpCommType v) { return name(v); }
template <typename T>
nlohmann::ordered_json field_json(const T& v) {
  if constexpr (std::is_enum_v<T>)
    return name(v);
  else
    return v;
}

// The samples one iteration of the row runs: dp x mbs x microbatches (0 for an invalid row, whose
// dp is 0).
inline int global_batch(const Evaluation& e) { return e.dp * e.config.mbs * e.config.microbatches; }

// The layout of an evaluated row as the sweep's and search's tables, CSV and JSON show it: the
// configuration's fields (visit_config_fields) with two derived ones, dp after vpp and the
// global batch (dp x mbs x microbatches) after the microbatches.
template <typename F>
void visit_layout_fields(const Evaluation& e, F&& f) {
  visit_config_fields(e.config, [&](const ConfigField& field, const auto& v) {
    f(field, v);
    const std::string_view key = field.key;
    if (key == "vpp") f(ConfigField{"dp", "dp"}, e.dp);
    if (key == "microbatches") f(ConfigField{"global_batch", "global batch"}, global_batch(e));
  });
}

// "stp tp 8 pp 2 vpp 2 seq 6144 mbs 1 m 64 sp off recompute none"
std::string describe(const Configuration& c);
// The columns of one evaluated layout in the sweep and search tables (schedule .. margin GiB),
// the margin the report holds under the memory cap ("thin" when under the threshold).
// The columns follow `sample`'s fields (a row of the same result: they all name the same ones).
std::vector<std::string> layout_header(const Evaluation& sample);
std::vector<std::string> layout_cells(const Evaluation& e);
// The invalid and ruled-out rows of a sweep or search after its table, under `title` ("invalid",
// "invalid or ruled out"). By default one line per reason with its count, the numbers that differ
// between the rows of a reason written N ("1440 x tp N > 8 GPUs per node ..."), most frequent
// first; `show_all` lists every row with its own reason instead. "" when there is none.
std::string invalid_text(const std::vector<const Evaluation*>& invalid, const std::string& title,
                         bool show_all);
// The shared table renderer and percentage format (src/util/text_table.hpp).
using util::percent;
using util::text_table;

}  // namespace braid::explore
