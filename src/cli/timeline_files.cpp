#include "timeline_files.hpp"

#include "braid/timeline_output.hpp"
#include "output.hpp"

namespace braid::cli {

void check_timeline_files(const std::string& trace, const std::string& svg) {
  if (!trace.empty()) check_writable("--trace", trace);
  if (!svg.empty()) check_writable("--svg", svg);
}

void write_timeline_files(const Dag& dag, const Timeline& timeline, const Report& report,
                          const std::string& trace, const std::string& svg) {
  if (!trace.empty()) write_file("--trace", trace, chrome_trace_json(dag, timeline, report));
  if (!svg.empty()) write_file("--svg", svg, timeline_svg(dag, timeline, report));
}

}  // namespace braid::cli
