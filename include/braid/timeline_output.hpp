// Timeline outputs: one simulated iteration (Dag + Timeline + Report) rendered for people — a
// Chrome trace / Perfetto JSON (every op on its rank's stream, activation memory as a counter
// track) and a self-contained SVG picture in the style of the STP paper's figure (one lane per
// rank, F/B/W coloured by chunk, braided blocks split, TP collectives and memory under each
// rank). Both are byte-stable for the same input. They compute no metrics: numbers come from the
// Report; the terminal table, JSON and CSV renderings live in report.hpp.
#pragma once

#include <string>

#include "braid/dag.hpp"
#include "braid/report.hpp"
#include "braid/simulator.hpp"

namespace braid {

// Chrome trace event format (JSON object with "traceEvents" and "displayTimeUnit"), as
// ui.perfetto.dev and chrome://tracing open it: process = rank ("rank r"), thread = stream
// (compute, tp, p2p-next, p2p-prev, d2h, h2d; only the streams a rank uses), one complete event
// ("X") per op named by op_name() (an op of zero duration: an instant event, "i"), timestamps in
// microseconds (uniform reports: one symbolic time unit is written as 1 us) with ts + dur never
// past the next slice's start in double arithmetic, a flow ("s" -> "f") from each P2P send to the
// op that consumes it. Activation memory is a counter track per rank ("C" events) when the
// timeline was simulated with SimOptions::record_memory.
std::string chrome_trace_json(const Dag& dag, const Timeline& timeline, const Report& report);

// How much detail the SVG draws in the compute lanes.
enum class SvgDetail {
  Auto,         // Unit when unit-level runs are wide enough to see, else Instruction
  Unit,         // one box per run of consecutive unit ops of one instruction side and phase
  Instruction,  // one box per instruction (braided: top half side a, bottom half side b)
};

// What a compute box says when its text fits (font 11 px down to 7 px; half boxes from 9 px),
// else it says nothing.
enum class SvgLabels {
  Microbatch,  // the microbatch number
  Op,          // phase and microbatch, "F12" (with chunks: "F1.12", chunk.microbatch)
  None,
};

struct SvgOptions {
  int width_px = 1600;  // the picture's width; its height follows from the rank count
  SvgDetail detail = SvgDetail::Auto;
  bool memory = true;  // draw the memory sparkline (needs Timeline::memory samples)
  SvgLabels labels = SvgLabels::Microbatch;
  // The time window drawn, in seconds (symbolic units for uniform reports); to_s < 0 is the end
  // of the iteration. Ops crossing an edge are cut at it.
  double from_s = 0, to_s = -1;
};

// The timeline picture as one SVG document (no external resources, fixed number formatting).
std::string timeline_svg(const Dag& dag, const Timeline& timeline, const Report& report,
                         const SvgOptions& options = {});

}  // namespace braid
