// The --trace FILE and --svg FILE outputs of `braid simulate`: checked for writability before any
// work, then written atomically (output.hpp) from the simulated iteration. Thin glue over
// timeline_output.hpp; the command decides when to call them.
#pragma once

#include <string>

#include "braid/dag.hpp"
#include "braid/report.hpp"
#include "braid/simulator.hpp"

namespace braid::cli {

// Throws InputError("--trace" / "--svg", path, reason) for a path that cannot be written; empty
// paths are not asked for and pass.
void check_timeline_files(const std::string& trace, const std::string& svg);

// Whether either file is asked for: the simulation must then record memory samples
// (SimOptions::record_memory) for the memory counter track and sparkline.
inline bool wants_timeline_files(const std::string& trace, const std::string& svg) {
  return !trace.empty() || !svg.empty();
}

// Writes the Chrome trace JSON to `trace` and the SVG picture to `svg` (each when non-empty).
void write_timeline_files(const Dag& dag, const Timeline& timeline, const Report& report,
                          const std::string& trace, const std::string& svg);

}  // namespace braid::cli
