// The timeline files of `braid simulate` (declared in simulation.hpp): --trace, --svg, --html and
// --report-data, with the SVG's --width, --from, --to, --detail and --labels. The paths are checked
// writable and the options parsed before any work; after the simulation the files are written
// atomically and put in place together (output.hpp). The command turns on SimOptions::record_memory
// when any is asked for.
#include <cmath>
#include <string>

#include "braid/error.hpp"
#include "braid/html_report.hpp"
#include "braid/timeline_output.hpp"
#include "option_values.hpp"
#include "output.hpp"
#include "simulation.hpp"

namespace braid::cli {

namespace {

// "12.5ms", "300us", "0.2s" or a plain number (seconds; symbolic units for --unit-costs).
double parse_time(const char* option, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string suffix = used ? text.substr(used) : "";
  double scale = 0;
  if (suffix.empty() || suffix == "s") scale = 1;
  if (suffix == "ms") scale = 1e-3;
  if (suffix == "us") scale = 1e-6;
  if (!used || scale == 0 || !std::isfinite(v) || v < 0)
    throw InputError(option, text,
                     "give a time of 0 or more: seconds, or with a unit (12.5ms, 300us, 0.2s); "
                     "symbolic units for --unit-costs");
  return v * scale;
}

}  // namespace

void add_timeline_options(CLI::App& cmd, TimelineFiles& files) {
  cmd.add_option("--trace", files.trace,
                 "write a Chrome trace / Perfetto JSON timeline (one process per rank)")
      ->check(file_name());
  cmd.add_option("--svg", files.svg, "write an SVG timeline picture")->check(file_name());
  cmd.add_option("--html", files.html,
                 "write an interactive HTML report (one self-contained file: timeline, per-rank "
                 "breakdown, memory over time)")
      ->check(file_name());
  cmd.add_option("--report-data", files.report_data,
                 "write the HTML report's data as JSON, for braid report")
      ->check(file_name());
  cmd.add_option("--width", files.svg_options.width_px, "SVG width in pixels (default 1600)")
      ->check(CLI::Range(400, 20000));
  cmd.add_option("--from", files.from, "SVG time window start (e.g. 120ms; default 0)");
  cmd.add_option("--to", files.to, "SVG time window end (e.g. 180ms; default the iteration end)");
  cmd.add_option("--detail", files.detail,
                 "SVG compute boxes: auto (default), unit (one per run of units) or instruction");
  cmd.add_option("--labels", files.labels,
                 "SVG box labels: mb (microbatch, default), op (phase and microbatch) or none");
}

void check_timeline_outputs(TimelineFiles& files) {
  if (!files.trace.empty()) check_writable("--trace", files.trace);
  if (!files.svg.empty()) check_writable("--svg", files.svg);
  if (!files.html.empty()) check_writable("--html", files.html);
  if (!files.report_data.empty()) check_writable("--report-data", files.report_data);
  if (!files.from.empty()) files.svg_options.from_s = parse_time("--from", files.from);
  if (!files.to.empty()) files.svg_options.to_s = parse_time("--to", files.to);
  if (!files.from.empty() && !files.to.empty() &&
      files.svg_options.to_s <= files.svg_options.from_s)
    throw InputError("--to", files.to, "must be later than --from " + files.from);
  if (files.detail == "auto")
    files.svg_options.detail = SvgDetail::Auto;
  else if (files.detail == "unit")
    files.svg_options.detail = SvgDetail::Unit;
  else if (files.detail == "instruction")
    files.svg_options.detail = SvgDetail::Instruction;
  else
    throw InputError("--detail", files.detail, "allowed: auto, unit, instruction");
  if (files.labels == "mb")
    files.svg_options.labels = SvgLabels::Microbatch;
  else if (files.labels == "op")
    files.svg_options.labels = SvgLabels::Op;
  else if (files.labels == "none")
    files.svg_options.labels = SvgLabels::None;
  else
    throw InputError("--labels", files.labels, "allowed: mb, op, none");
}

bool TimelineFiles::any() const {
  return !trace.empty() || !svg.empty() || !html.empty() || !report_data.empty();
}

void write_timeline_outputs(const SimulationResult& result, const TimelineFiles& files) {
  const Report& rep = result.report;
  // All four are put in place together at the end: a run stopped between two leaves none new.
  OutputFiles out;
  if (!files.trace.empty())
    out.add("--trace", files.trace, chrome_trace_json(result.dag, result.timeline, rep));
  if (!files.svg.empty())
    out.add("--svg", files.svg, timeline_svg(result.dag, result.timeline, rep, files.svg_options));
  if (!files.html.empty() || !files.report_data.empty()) {
    const std::string data =
        html_report_data("braid simulate: " + rep.schedule + " on " + rep.study,
                         {html_run_data(result.dag, result.timeline, rep)});
    if (!files.report_data.empty()) out.add("--report-data", files.report_data, data);
    if (!files.html.empty()) out.add("--html", files.html, html_report(data));
  }
  out.commit();
}

}  // namespace braid::cli
