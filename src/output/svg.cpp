// The timeline picture (SVG) of a simulated iteration, in the style of the STP paper's figure.
//
// Per rank, top to bottom: the compute lane (F/B/W boxes coloured by phase, chunk 0 dark and the
// last chunk light; a braided block draws side a in the top half and side b in the bottom half),
// a thin TP lane (collectives coloured by phase, at true width; the report's tp_exposed intervals
// drawn red over them), a copy lane when the rank offloads, and a memory sparkline (activation
// bytes over time, common scale for all ranks, peak labelled). The legend lists only what is
// drawn. A time window (SvgOptions::from_s / to_s) draws part of the iteration at full width.
// Level of detail: at unit level a box is a run of consecutive unit ops of one instruction side
// and phase; at instruction level a box is an instruction (split only where the compute stream
// idles for more than a pixel). Auto picks unit level when its boxes are wide enough to see.
// Everything is placed on a pixel grid and printed with two decimals at most, so the same input
// gives the same bytes; compute boxes narrower than a pixel are merged with their neighbours,
// thin-lane pieces only where they touch (gap below the 0.01 px print resolution).
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../util/format.hpp"
#include "../util/units.hpp"
#include "braid/svg_text.hpp"
#include "braid/timeline_output.hpp"

namespace braid {

namespace {

// ---- geometry --------------------------------------------------------------------------------
constexpr double kLeft = 58;      // rank labels
constexpr double kRight = 104;    // memory peak labels
constexpr double kHeader = 92;    // title, summary line, legend
constexpr double kComputeH = 28;  // compute lane
constexpr double kThinGap = 2;    // between the lanes of one rank
constexpr double kTpH = 8;        // TP lane
constexpr double kCopyH = 6;      // offload / reload lane
constexpr double kMemH = 20;      // memory sparkline
constexpr double kRankGap = 12;   // between ranks
constexpr double kAxisH = 40;     // time axis below the last rank

// ---- number formatting (fixed, locale-free) ---------------------------------------------------
std::string num(double v, int decimals = 2) {
  std::string s = util::format("%.*f", decimals, v);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string fixed(double v, int decimals) { return util::format("%.*f", decimals, v); }

// ---- colours ----------------------------------------------------------------------------------
struct Rgb {
  double r, g, b;
};
// Phase colours, chunk 0 (dark) and the last chunk (light); chunks between are interpolated.
// Blue / orange / violet stay distinct for the common colour-vision deficiencies.
constexpr Rgb kDark[3] = {{0x1f, 0x4e, 0x9c}, {0xc4, 0x56, 0x1a}, {0x5b, 0x4a, 0x91}};
constexpr Rgb kLight[3] = {{0x9c, 0xc3, 0xef}, {0xf7, 0xbf, 0x8f}, {0xc6, 0xbc, 0xe6}};

Rgb chunk_colour(Phase p, int chunk, int vpp) {
  const int i = static_cast<int>(p);
  const double t = vpp > 1 ? static_cast<double>(chunk) / (vpp - 1) : 0.0;
  return {kDark[i].r + (kLight[i].r - kDark[i].r) * t, kDark[i].g + (kLight[i].g - kDark[i].g) * t,
          kDark[i].b + (kLight[i].b - kDark[i].b) * t};
}

std::string hex(const Rgb& c) {
  return util::format("#%02x%02x%02x", static_cast<int>(std::lround(c.r)),
                      static_cast<int>(std::lround(c.g)), static_cast<int>(std::lround(c.b)));
}

bool dark(const Rgb& c) { return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b < 150; }

// CSS class of a (phase, chunk) box: "F0", "B1", "W0", ...
std::string box_class(Phase p, int chunk) { return name(p) + std::to_string(chunk); }

// The phase a box shows at instruction level: the phase of its side's pass.
Phase side_phase(InstructionKind op, BlockSide side) {
  switch (op) {
    case InstructionKind::F:
    case InstructionKind::FF:
      return Phase::F;
    case InstructionKind::B:
      return Phase::B;
    case InstructionKind::W:
      return Phase::W;
    case InstructionKind::FB:
      return side == BlockSide::Second ? Phase::B : Phase::F;
    case InstructionKind::FW:
      return side == BlockSide::Second ? Phase::W : Phase::F;
    case InstructionKind::Offload:
    case InstructionKind::Reload:
      break;
  }
  return Phase::F;
}

// ---- time axis --------------------------------------------------------------------------------
struct AxisUnit {
  double per_s;       // axis unit per second of timeline time
  const char* label;  // "ms", "s", "us", or "" (symbolic)
};

AxisUnit axis_unit(const Report& report, double total) {
  if (report.uniform) return {1.0, ""};
  if (total >= 10) return {1.0, "s"};
  if (total >= 1e-3) return {1e3, "ms"};
  return {1e6, "us"};
}

// ---- the picture ------------------------------------------------------------------------------
struct Interval {
  double b, e;
};

// Appends [b, e) to a list of disjoint sorted pixel intervals, merging with the last one when the
// gap is below `merge_px`.
void push_merged(std::vector<Interval>& v, double b, double e, double merge_px) {
  if (!v.empty() && b - v.back().e < merge_px) {
    v.back().e = std::max(v.back().e, e);
  } else {
    v.push_back({b, e});
  }
}

// A compute box being built: ops [first op, last op] of one instruction side (and phase at unit
// level) that run without a visible gap.
struct Box {
  double x0, x1;  // pixels
  int instruction;
  BlockSide side;
  Phase phase;
  int chunk;
  int mb;
};

class SvgWriter {
 public:
  SvgWriter(const Dag& dag, const Timeline& t, const Report& report, const SvgOptions& o)
      : dag_(dag), t_(t), report_(report), o_(o) {
    total_ = t.iteration_time_s > 0 ? t.iteration_time_s : 1.0;
    from_ = std::clamp(o.from_s, 0.0, total_);
    to_ = o.to_s < 0 ? total_ : std::clamp(o.to_s, from_, total_);
    if (to_ <= from_) {  // an empty window draws the whole iteration
      from_ = 0;
      to_ = total_;
    }
    span_ = to_ - from_;
    plot_w_ = std::max(100.0, o.width_px - kLeft - kRight);
    vpp_ = std::max(1, dag.vpp);
    has_memory_ = o.memory && !t.memory.empty();
    copy_lane_.assign(dag.pp, false);
    for (int r = 0; r < dag.pp; ++r)
      for (StreamKind s : {StreamKind::D2H, StreamKind::H2D}) {
        const int sid = dag.stream_id(r, s);
        if (dag.stream_begin[sid] < dag.stream_begin[sid + 1]) copy_lane_[r] = true;
      }
    // A lane per collective group beyond TP whose stream runs anything (context parallelism's,
    // expert parallelism's), on every rank alike.
    for (StreamKind s : {StreamKind::Cp, StreamKind::Ep})
      for (int r = 0; r < dag.pp; ++r) {
        const int sid = dag.stream_id(r, s);
        if (dag.stream_begin[sid] == dag.stream_begin[sid + 1]) continue;
        group_lanes_.push_back(s);
        break;
      }
    unit_level_ =
        o.detail == SvgDetail::Unit || (o.detail == SvgDetail::Auto && unit_runs_visible());
  }

  std::string render() {
    // Layout: y of each rank block.
    double y = kHeader;
    rank_y_.clear();
    for (int r = 0; r < dag_.pp; ++r) {
      rank_y_.push_back(y);
      y += rank_height(r) + kRankGap;
    }
    const double plot_bottom = y - kRankGap;
    const double height = plot_bottom + kAxisH;

    // The ranks first: the legend lists only what they drew.
    for (int r = 0; r < dag_.pp; ++r) rank(r);
    std::string lanes;
    lanes.swap(out_);
    out_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(o_.width_px) +
            "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(o_.width_px) + " " +
            num(height) + "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
    style();
    out_ += "<rect class=\"bg\" width=\"100%\" height=\"100%\"/>\n";
    header();
    grid(plot_bottom);
    out_ += lanes;
    axis(plot_bottom);
    out_ += "</svg>\n";
    return out_;
  }

 private:
  double px(double time_s) const { return kLeft + (time_s - from_) / span_ * plot_w_; }
  // [b, e) in pixels, cut to the window; false when nothing of it is inside.
  bool visible(double b_s, double e_s, double& x0, double& x1) const {
    const bool outside = b_s < e_s ? e_s <= from_ || b_s >= to_ : b_s < from_ || b_s > to_;
    if (outside) return false;
    x0 = px(std::max(b_s, from_));
    x1 = px(std::min(e_s, to_));
    return true;
  }
  double rank_height(int r) const {
    double h = kComputeH + kThinGap + kTpH;
    h += static_cast<double>(group_lanes_.size()) * (kThinGap + kTpH);
    if (copy_lane_[r]) h += kThinGap + kCopyH;
    if (has_memory_) h += kThinGap + kMemH;
    return h;
  }

  // Unit level is readable when the median run of one instruction side and phase is at least
  // 6 px wide (narrower runs read as noise).
  bool unit_runs_visible() const {
    std::vector<double> widths;
    for (int r = 0; r < dag_.pp; ++r) {
      const int cs = dag_.stream_id(r, StreamKind::Compute);
      int prev = -1;
      double b = 0, e = 0;
      for (int k = dag_.stream_begin[cs]; k < dag_.stream_begin[cs + 1]; ++k) {
        const int i = dag_.stream_ops[k];
        const DagOp& op = dag_.ops[i];
        if (prev >= 0) {
          const DagOp& p = dag_.ops[prev];
          if (p.instruction == op.instruction && p.side == op.side && p.phase == op.phase) {
            e = t_.end_s[i];
            prev = i;
            continue;
          }
          widths.push_back((e - b) / span_ * plot_w_);
        }
        b = t_.start_s[i];
        e = t_.end_s[i];
        prev = i;
      }
      if (prev >= 0) widths.push_back((e - b) / span_ * plot_w_);
    }
    if (widths.empty()) return true;
    std::nth_element(widths.begin(), widths.begin() + widths.size() / 2, widths.end());
    return widths[widths.size() / 2] >= 6.0;
  }

  void style() {
    out_ += "<style>\n";
    out_ +=
        ".bg{fill:#ffffff}.lane{fill:#efefef}.thin{fill:#f6f6f6}.grid{stroke:#d4d4d4;"
        "stroke-width:0.6}.axis{stroke:#444;stroke-width:1}\n";
    out_ +=
        "text{fill:#222}.t{font-size:16px;font-weight:bold}.s{font-size:12px}"
        ".l{font-size:11px}.k{font-size:9px;fill:#777}.rl{font-size:12px;font-weight:bold}"
        ".lt{fill:#fff}.mb{text-anchor:middle}.m7{font-size:7px}.m8{font-size:8px}.m9{font-size:"
        "9px}"
        ".m10{font-size:10px}.m11{font-size:11px}"
        ".pk{font-size:9px;fill:#444}\n";
    for (Phase p : {Phase::F, Phase::B, Phase::W})
      for (int c = 0; c < vpp_; ++c) {
        out_ += '.';
        out_ += box_class(p, c);
        out_ += "{fill:";
        out_ += hex(chunk_colour(p, c, vpp_));
        out_ += '}';
      }
    out_ +=
        "\n.cF{fill:#5d8fd0}.cB{fill:#e39a5e}.cW{fill:#9c8fcc}.ex{fill:#d62728}"
        ".off{fill:#8c5a3c}.rel{fill:#2a9d8f}.mem{fill:#cfcfe0;stroke:#555577;"
        "stroke-width:0.8}.pkd{fill:#d62728}\n";
    // The group lanes' colours, only where there are such lanes.
    for (StreamKind s : group_lanes_)
      out_ += s == StreamKind::Cp ? ".ccp{fill:#b39ddb}.xcp{fill:#6a1b9a}\n"
                                  : ".cep{fill:#80cbc4}.xep{fill:#00695c}\n";
    out_ += "</style>\n";
  }

  void text(double x, double y, const std::string& cls, const std::string& s,
            const char* anchor = nullptr) {
    out_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" class=\"" + cls + "\"";
    if (anchor) out_ += std::string(" text-anchor=\"") + anchor + "\"";
    out_ += ">" + xml_escape(s) + "</text>\n";
  }

  void rect(double x, double y, double w, double h, const std::string& cls) {
    out_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" +
            num(h) + "\" class=\"" + cls + "\"/>\n";
  }

  std::string time_text(double s) const {
    if (report_.uniform) return num(s, 3);
    if (s >= 1) return fixed(s, 3) + " s";
    if (s >= 1e-3) return fixed(s * 1e3, 2) + " ms";
    return fixed(s * 1e6, 1) + " us";
  }

  void header() {
    std::string title =
        report_.schedule + " \xe2\x80\x94 " +
        (report_.uniform ? std::string("uniform unit costs") : "study " + report_.study);
    text(kLeft, 22, "t", title);
    std::string s = "p " + std::to_string(report_.pp) + ", v " + std::to_string(report_.vpp) +
                    ", m " + std::to_string(report_.microbatches);
    if (!report_.uniform) s += ", tp " + std::to_string(report_.tp);
    s += "  \xc2\xb7  iteration " + time_text(report_.iteration_time_s);
    s += "  \xc2\xb7  TP bubble " + fixed(report_.tp_bubble_rate * 100, 2) + "%";
    s += "  \xc2\xb7  PP bubble " + fixed(report_.pp_bubble_rate * 100, 2) + "%";
    if (report_.offload_stall_rate > 0)
      s += "  \xc2\xb7  offload stall " + fixed(report_.offload_stall_rate * 100, 2) + "%";
    if (!report_.uniform && report_.max_peak_memory_gib > 0)
      s += "  \xc2\xb7  peak memory " + fixed(report_.max_peak_memory_gib, 1) + " GiB" +
           (report_.oom ? " (OOM)" : "");
    s += "  \xc2\xb7  " + std::string(unit_level_ ? "unit-level boxes" : "one box per instruction");
    if (from_ > 0 || to_ < total_)
      s += "  \xc2\xb7  window " + time_text(from_) + " to " + time_text(to_);
    text(kLeft, 42, "s", s);
    out_ += "<g id=\"legend\">\n";
    legend(56);
    out_ += "</g>\n";
  }

  // Swatches for what the ranks drew, in two rows: the compute boxes (phase x chunk, braided
  // halves), then the thin lanes (TP forward / backward, exposed, copies) and memory.
  void legend(double y) {
    double x = kLeft;
    const double sw = 16, sh = 12;
    auto entry = [&](const std::string& cls, const std::string& label) {
      rect(x, y, sw, sh, cls);
      text(x + sw + 4, y + sh - 2, "l", label);
      x += sw + 10 + 6.2 * static_cast<double>(label.size());
    };
    for (Phase p : {Phase::F, Phase::B, Phase::W})
      for (int c = 0; c < vpp_; ++c) {
        if (!used_box_.count(box_class(p, c))) continue;
        entry(box_class(p, c), vpp_ == 1 ? std::string(name(p))
                                         : name(p) + std::string(" chunk ") + std::to_string(c));
      }
    if (used_braided_) {  // top half side a, bottom half side b
      rect(x, y, sw, sh / 2, box_class(Phase::F, 0));
      rect(x, y + sh / 2, sw, sh / 2, box_class(Phase::B, vpp_ - 1));
      const std::string braided = "braided (top: side a, bottom: side b)";
      text(x + sw + 4, y + sh - 2, "l", braided);
    }
    x = kLeft;
    y += 18;
    if (used_.count("cF")) entry("cF", "TP collective (forward)");
    if (used_.count("cB")) entry("cB", "TP collective (backward)");
    if (used_.count("cW")) entry("cW", "TP collective (weight)");
    if (used_.count("ex")) entry("ex", "TP exposed (report's attribution)");
    for (StreamKind s : group_lanes_) {
      const std::string g = name(s), upper = s == StreamKind::Cp ? "CP" : "EP";
      if (used_.count("c" + g)) entry("c" + g, upper + " collective");
      if (used_.count("x" + g)) entry("x" + g, upper + " exposed");
    }
    if (used_.count("off")) entry("off", "offload (D2H)");
    if (used_.count("rel")) entry("rel", "reload (H2D)");
    if (used_.count("mem")) entry("mem", "activation memory");
    std::string note;
    if (o_.labels == SvgLabels::Microbatch) note = "number in a box: microbatch";
    if (o_.labels == SvgLabels::Op)
      note = vpp_ > 1 ? "text in a box: phase chunk.microbatch" : "text in a box: phase microbatch";
    if (used_.count("mem")) note += std::string(note.empty() ? "" : "; ") + "memory on one scale";
    if (!note.empty()) text(kLeft + plot_w_, y + sh - 2, "k", note, "end");
  }

  void grid(double plot_bottom) {
    const AxisUnit u = axis_unit(report_, span_);
    step_ = nice_step(span_ * u.per_s, 12);
    for (const double tick : ticks(u)) {
      if (tick <= from_ * u.per_s) continue;
      const double x = px(tick / u.per_s);
      out_ += "<line x1=\"" + num(x) + "\" y1=\"" + num(kHeader - 4) + "\" x2=\"" + num(x) +
              "\" y2=\"" + num(plot_bottom) + "\" class=\"grid\"/>\n";
    }
  }

  // Tick values (in the axis unit) on the step grid inside the window.
  std::vector<double> ticks(const AxisUnit& u) const {
    std::vector<double> v;
    const double lo = from_ * u.per_s, hi = to_ * u.per_s;
    for (auto k = static_cast<long long>(std::ceil(lo / step_ - 1e-7));
         static_cast<double>(k) * step_ <= hi + span_ * u.per_s * 1e-7; ++k)
      v.push_back(static_cast<double>(k) * step_);
    return v;
  }

  void axis(double plot_bottom) {
    const AxisUnit u = axis_unit(report_, span_);
    const double y = plot_bottom + 6;
    out_ += "<g id=\"axis\">\n";
    out_ += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(y) + "\" x2=\"" + num(kLeft + plot_w_) +
            "\" y2=\"" + num(y) + "\" class=\"axis\"/>\n";
    const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step_) + 1e-9)));
    for (const double tick : ticks(u)) {
      const double x = px(tick / u.per_s);
      out_ += "<line x1=\"" + num(x) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x) + "\" y2=\"" +
              num(y + 5) + "\" class=\"axis\"/>\n";
      text(x, y + 17, "l", fixed(tick, decimals), "middle");
    }
    const std::string label =
        report_.uniform ? "time (symbolic units)" : std::string("time (") + u.label + ")";
    text(kLeft + plot_w_, y + 32, "l", label, "end");
    out_ += "</g>\n";
  }

  void rank(int r) {
    const double y0 = rank_y_[r];
    out_ += "<g id=\"rank" + std::to_string(r) + "\">\n";
    text(kLeft - 8, y0 + kComputeH / 2 + 4, "rl", "rank " + std::to_string(r), "end");
    rect(kLeft, y0, plot_w_, kComputeH, "lane");
    compute_lane(r, y0);
    double y = y0 + kComputeH + kThinGap;
    text(kLeft - 8, y + kTpH - 0.5, "k", "tp", "end");
    rect(kLeft, y, plot_w_, kTpH, "thin");
    tp_lane(r, y);
    y += kTpH;
    for (StreamKind s : group_lanes_) {
      y += kThinGap;
      text(kLeft - 8, y + kTpH - 0.5, "k", name(s), "end");
      rect(kLeft, y, plot_w_, kTpH, "thin");
      group_lane(r, y, s);
      y += kTpH;
    }
    if (copy_lane_[r]) {
      y += kThinGap;
      text(kLeft - 8, y + kCopyH, "k", "copy", "end");
      rect(kLeft, y, plot_w_, kCopyH, "thin");
      copy_lane(r, y);
      y += kCopyH;
    }
    if (has_memory_) {
      y += kThinGap;
      memory_lane(r, y);
    }
    out_ += "</g>\n";
  }

  // Compute lane: boxes, then labels per instruction side on top.
  void compute_lane(int r, double y0) {
    const int cs = dag_.stream_id(r, StreamKind::Compute);
    std::vector<Box> boxes;
    const double merge_px = unit_level_ ? 0.5 : 1.0;
    double prev_end = 0;
    for (int k = dag_.stream_begin[cs]; k < dag_.stream_begin[cs + 1]; ++k) {
      const int i = dag_.stream_ops[k];
      const DagOp& op = dag_.ops[i];
      double b = 0, e = 0;
      if (!visible(t_.start_s[i], t_.end_s[i], b, e)) continue;
      const Phase phase = unit_level_ ? op.phase : side_phase(op.instruction_op, op.side);
      // Extend the latest box of the same instruction side (and phase at unit level) when the
      // compute stream did not visibly idle before this op. At instruction level the other
      // side's ops in between do not break a box: the halves of a braided block run on.
      Box* open = nullptr;
      for (auto it = boxes.rbegin(); it != boxes.rend() && it->instruction == op.instruction;
           ++it) {
        if (it->side == op.side) {
          open = &*it;
          break;
        }
        if (unit_level_) break;
      }
      if (open && open->phase == phase && b - prev_end < merge_px) {
        open->x1 = std::max(open->x1, e);
      } else {
        boxes.push_back({b, e, op.instruction, op.side, phase, op.chunk, op.mb});
      }
      prev_end = e;
    }
    for (std::size_t j = 0; j < boxes.size(); ++j) {
      const Box& bx = boxes[j];
      double x0 = bx.x0, w = std::max(bx.x1 - bx.x0, 0.4);
      // A hairline gap where an instruction follows one of the same colour and side.
      const Box* before = nullptr;
      for (std::size_t q = j; q-- > 0;)
        if (boxes[q].side == bx.side || bx.side == BlockSide::Plain ||
            boxes[q].side == BlockSide::Plain) {
          before = &boxes[q];
          break;
        }
      if (before && before->instruction != bx.instruction && before->phase == bx.phase &&
          before->chunk == bx.chunk && bx.x0 - before->x1 < 0.5 && w > 2) {
        x0 += 0.5;
        w -= 0.5;
      }
      double y = y0, h = kComputeH;
      if (bx.side == BlockSide::First) h = kComputeH / 2;
      if (bx.side == BlockSide::Second) {
        y = y0 + kComputeH / 2;
        h = kComputeH / 2;
      }
      if (bx.side != BlockSide::Plain) used_braided_ = true;
      used_box_.insert(box_class(bx.phase, bx.chunk));
      rect(x0, y, w, h, box_class(bx.phase, bx.chunk));
    }
    if (o_.labels == SvgLabels::None) return;
    // Labels: one per instruction side, in its widest box.
    for (std::size_t j = 0; j < boxes.size();) {
      std::size_t end = j;
      while (end < boxes.size() && boxes[end].instruction == boxes[j].instruction) ++end;
      for (BlockSide side : {BlockSide::Plain, BlockSide::First, BlockSide::Second}) {
        const Box* best = nullptr;
        for (std::size_t q = j; q < end; ++q)
          if (boxes[q].side == side && (!best || boxes[q].x1 - boxes[q].x0 > best->x1 - best->x0))
            best = &boxes[q];
        if (best) label(*best, y0);
      }
      j = end;
    }
  }

  std::string label_text(const Box& l) const {
    if (o_.labels == SvgLabels::Op)
      return std::string(name(l.phase)) + (vpp_ > 1 ? std::to_string(l.chunk) + "." : "") +
             std::to_string(l.mb);
    return std::to_string(l.mb);
  }

  // The label of a box, centred, in the largest font from 11 px (9 px in a half box) down to
  // 7 px that fits its width (a Helvetica digit is 0.556 em wide, plus half a pixel each side);
  // none fits: no label.
  void label(const Box& l, double y0) {
    const bool half = l.side != BlockSide::Plain;
    const std::string s = label_text(l);
    int font = 0;
    for (int f = half ? 9 : 11; f >= 7 && !font; --f)
      if (0.56 * f * static_cast<double>(s.size()) + 1 <= l.x1 - l.x0) font = f;
    if (!font) return;
    const double cy = !half                        ? y0 + kComputeH / 2
                      : l.side == BlockSide::First ? y0 + kComputeH / 4
                                                   : y0 + 3 * kComputeH / 4;
    const bool light = dark(chunk_colour(l.phase, l.chunk, vpp_));
    out_ += "<text x=\"" + num((l.x0 + l.x1) / 2) + "\" y=\"" + num(cy + font * 0.36) +
            "\" class=\"mb m" + std::to_string(font) + (light ? " lt" : "") + "\">" + s +
            "</text>\n";
  }

  // Thin-lane rectangles at true width: pieces are joined only where they touch at the print
  // resolution (0.01 px); nothing is widened.
  void thin_rects(const std::vector<Interval>& v, double y, double h, const std::string& cls) {
    for (const Interval& iv : v) {
      if (iv.e - iv.b < 0.005) continue;  // prints as width 0
      rect(iv.b, y, iv.e - iv.b, h, cls);
      used_.insert(cls);
    }
  }

  // TP collectives (the ring exchange's copy-engine transfers among them), and in the same lane the
  // data-parallel sync ops (phase W: drawn like the backward's weight side), with their exposed
  // parts.
  void tp_lane(int r, double y) {
    std::vector<Interval> fwd, bwd, other;
    for (StreamKind stream : {StreamKind::Tp, StreamKind::TpRing, StreamKind::Dp}) {
      const int ts = dag_.stream_id(r, stream);
      for (int k = dag_.stream_begin[ts]; k < dag_.stream_begin[ts + 1]; ++k) {
        const int i = dag_.stream_ops[k];
        const DagOp& op = dag_.ops[i];
        double b = 0, e = 0;
        if (!visible(t_.start_s[i], t_.end_s[i], b, e)) continue;
        std::vector<Interval>& lane =
            op.phase == Phase::F ? fwd : (op.phase == Phase::B ? bwd : other);
        push_merged(lane, b, e, 0.01);
      }
    }
    thin_rects(fwd, y, kTpH, "cF");
    thin_rects(bwd, y, kTpH, "cB");
    thin_rects(other, y, kTpH, "cW");
    // Exposed TP: exactly the report's intervals (attribute_idle), one rectangle each.
    thin_rects(exposed(r, StreamKind::Tp), y, kTpH, "ex");
  }

  // The report's exposed intervals of rank r's collectives on `stream`, in the window.
  std::vector<Interval> exposed(int r, StreamKind stream) const {
    std::vector<Interval> out;
    if (r < static_cast<int>(report_.ranks.size()))
      for (const TimeInterval& iv : exposed_intervals(report_.ranks[r], stream)) {
        double b = 0, e = 0;
        if (visible(iv.begin_s, iv.end_s, b, e)) out.push_back({b, e});
      }
    return out;
  }

  // The collectives of another group (cp, ep) on their own lane, with their exposed parts.
  void group_lane(int r, double y, StreamKind stream) {
    std::vector<Interval> ops;
    const int sid = dag_.stream_id(r, stream);
    for (int k = dag_.stream_begin[sid]; k < dag_.stream_begin[sid + 1]; ++k) {
      const int i = dag_.stream_ops[k];
      double b = 0, e = 0;
      if (visible(t_.start_s[i], t_.end_s[i], b, e)) push_merged(ops, b, e, 0.01);
    }
    const std::string g = name(stream);
    thin_rects(ops, y, kTpH, "c" + g);
    thin_rects(exposed(r, stream), y, kTpH, "x" + g);
  }

  void copy_lane(int r, double y) {
    for (StreamKind s : {StreamKind::D2H, StreamKind::H2D}) {
      const int sid = dag_.stream_id(r, s);
      std::vector<Interval> v;
      for (int k = dag_.stream_begin[sid]; k < dag_.stream_begin[sid + 1]; ++k) {
        const int i = dag_.stream_ops[k];
        double b = 0, e = 0;
        if (visible(t_.start_s[i], t_.end_s[i], b, e)) push_merged(v, b, e, 0.01);
      }
      const char* cls = s == StreamKind::D2H ? "off" : "rel";
      const double h = kCopyH / 2, yy = s == StreamKind::D2H ? y : y + h;
      thin_rects(v, yy, h, cls);
    }
  }

  // Step plot of activation bytes in the window, downsampled to the maximum per pixel column.
  void memory_lane(int r, double y) {
    double scale_max = 0;
    for (double p : t_.peak_activation_bytes) scale_max = std::max(scale_max, p);
    text(kLeft - 8, y + kMemH / 2 + 3, "k", "mem", "end");
    if (scale_max <= 0) return;
    used_.insert("mem");
    const int cols = static_cast<int>(std::ceil(plot_w_));
    std::vector<double> col(static_cast<std::size_t>(cols), 0.0);
    const MemorySample* prev = nullptr;
    auto fill = [&](const MemorySample& s, double until) {
      if (until < from_ || s.time_s > to_) return;
      const double x0 = (std::max(s.time_s, from_) - from_) / span_ * plot_w_;
      const double x1 = (std::min(until, to_) - from_) / span_ * plot_w_;
      const int c0 = std::clamp(static_cast<int>(std::floor(x0)), 0, cols - 1);
      const int c1 = std::clamp(static_cast<int>(std::ceil(x1)) - 1, c0, cols - 1);
      for (int c = c0; c <= c1; ++c) col[c] = std::max(col[c], s.activation_bytes);
    };
    for (const MemorySample& s : t_.memory) {
      if (s.rank != r) continue;
      if (prev) fill(*prev, s.time_s);
      prev = &s;
    }
    if (prev) fill(*prev, total_);
    const double base = y + kMemH;
    auto vy = [&](double v) { return base - v / scale_max * (kMemH - 1); };
    std::string d = "M" + num(kLeft) + " " + num(base);
    double last = -1;
    for (int c = 0; c < cols; ++c) {
      const double yy = std::round(vy(col[c]) * 100) / 100;
      if (yy != last) {
        d += "H" + num(kLeft + c) + "V" + num(yy);
        last = yy;
      }
    }
    d += "H" + num(kLeft + cols) + "V" + num(base) + "Z";
    out_ += "<path d=\"" + d + "\" class=\"mem\"/>\n";
    // The peak: a dot where it is first reached (when inside the window), and its value at the
    // right.
    const double peak =
        r < static_cast<int>(t_.peak_activation_bytes.size()) ? t_.peak_activation_bytes[r] : 0.0;
    const double peak_t =
        r < static_cast<int>(t_.peak_activation_time_s.size()) ? t_.peak_activation_time_s[r] : 0.0;
    if (peak_t >= from_ && peak_t <= to_)
      out_ += "<circle cx=\"" + num(px(peak_t)) + "\" cy=\"" + num(vy(peak)) +
              "\" r=\"2\" class=\"pkd\"/>\n";
    const double x = kLeft + plot_w_ + 6;
    const double ma = report_.ma_bytes;
    if (report_.uniform) {
      text(x, y + 12, "pk", "act. peak " + (ma > 0 ? num(peak / ma, 2) + " M_a" : num(peak, 2)));
    } else {
      text(x, y + 8, "pk", "act. peak " + fixed(peak / kGiB, 2) + " GiB");
      if (ma > 0) text(x, y + 18, "pk", "= " + fixed(peak / ma, 2) + " M_a");
    }
  }

  const Dag& dag_;
  const Timeline& t_;
  const Report& report_;
  const SvgOptions& o_;
  double total_ = 1, plot_w_ = 100, step_ = 1;
  double from_ = 0, to_ = 1, span_ = 1;  // the window drawn
  int vpp_ = 1;
  bool has_memory_ = false, unit_level_ = false;
  // What the ranks drew, for the legend: box classes, thin-lane classes, braided halves.
  std::set<std::string> used_box_, used_;
  bool used_braided_ = false;
  std::vector<bool> copy_lane_;
  std::vector<StreamKind> group_lanes_;  // Cp, Ep: the collective lanes beyond TP that are drawn
  std::vector<double> rank_y_;
  std::string out_;
};

}  // namespace

std::string timeline_svg(const Dag& dag, const Timeline& timeline, const Report& report,
                         const SvgOptions& options) {
  SvgWriter w(dag, timeline, report, options);
  return w.render();
}

}  // namespace braid
