// --trace FILE and --svg FILE of `braid simulate` (declared in simulation.hpp): the paths are
// checked writable before any work, and after the simulation the Chrome trace / Perfetto JSON
// and the SVG picture (timeline_output.hpp) are written atomically (output.hpp). The command
// turns on SimOptions::record_memory when either is asked for.
#include "braid/timeline_output.hpp"
#include "output.hpp"
#include "simulation.hpp"

namespace braid::cli {

void check_timeline_outputs(const std::string& trace, const std::string& svg) {
  if (!trace.empty()) check_writable("--trace", trace);
  if (!svg.empty()) check_writable("--svg", svg);
}

void write_timeline_outputs(const SimulationResult& result, const std::string& trace,
                            const std::string& svg) {
  if (!trace.empty())
    write_file("--trace", trace, chrome_trace_json(result.dag, result.timeline, result.report));
  if (!svg.empty())
    write_file("--svg", svg, timeline_svg(result.dag, result.timeline, result.report));
}

}  // namespace braid::cli
