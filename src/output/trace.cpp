// Chrome trace / Perfetto JSON of a simulated iteration. Layout of the file (byte-stable):
//   {"traceEvents":[
//   <metadata events: process_name, process_sort_index per rank; thread_name, thread_sort_index
//    per used stream>,
//   <one "X" event per op, rank by rank, stream by stream, in stream order (an op of zero
//    duration is an "i" instant event instead)>,
//   <a flow ("s" then "f") from each P2P send to the op on the peer rank that consumes it>,
//   <"C" activation-memory counter events per rank, in time order>
//   ],
//   "displayTimeUnit":"ms","otherData":{...}}
// one event per line so diffs of checked-in traces stay readable. Times are whole nanoseconds
// (printed as microseconds with at most three decimals) so that rounding can never make two ops
// of one stream overlap, and dur is cut by a nanosecond where ts + dur, added in floating point
// as viewers do (speedscope), would land past the op's end and so past the next op's start.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "../util/units.hpp"
#include "braid/timeline_output.hpp"

namespace braid {

namespace {

using json = nlohmann::ordered_json;

// Thread names as the trace shows them (the engine's StreamKind order is the thread order):
// name(StreamKind) with hyphens, the spelling docs/outputs.md gives for traces, so that traces
// written before and after stay comparable.
std::string thread_name(StreamKind s) {
  std::string text = name(s);
  std::replace(text.begin(), text.end(), '_', '-');
  return text;
}

const char* side_name(BlockSide s) {
  switch (s) {
    case BlockSide::Plain:
      return "plain";
    case BlockSide::First:
      return "a";
    case BlockSide::Second:
      return "b";
  }
  return "?";
}

// Trace time in integer nanoseconds: seconds for real reports, symbolic units (shown as
// microseconds) for uniform ones.
struct Clock {
  double ns_per_unit;
  std::int64_t ns(double t) const { return std::llround(t * ns_per_unit); }
  static double us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }
  // dur (us) of [b, e) ns such that us(b) + dur <= us(e) in double arithmetic.
  static double dur_us(std::int64_t b, std::int64_t e) {
    std::int64_t d = e - b;
    while (d > 0 && us(b) + us(d) > us(e)) --d;
    return us(d);
  }
};

// Process and thread ids. Perfetto treats pid 0 and tid 0 as the kernel's swapper, so ranks are
// pid r + 1; thread ids are unique over the whole trace, (r + 1) * 10 + stream: rank 0's compute
// stream is tid 10, its tp stream 11, rank 1's compute stream 20.
int pid(int rank) { return rank + 1; }
int tid(int rank, int stream) { return (rank + 1) * 10 + stream; }
static_assert(kStreamsPerRank <= 10, "thread ids assume at most 10 streams per rank");

void add_line(std::string& out, const json& event, bool& first) {
  if (!first) out += ",\n";
  first = false;
  out += event.dump();
}

json op_args(const DagOp& op, const OpCost& cost, int peer) {
  json a;
  a["microbatch"] = op.mb;
  a["chunk"] = op.chunk;
  a["virtual_stage"] = op.virtual_stage;
  if (op.layer >= 0) a["layer"] = op.layer;
  if (op.kind == OpKind::Compute || op.kind == OpKind::Collective) {
    a["unit"] = name(op.unit);
    if (op.vision) a["vision"] = true;
  }
  a["phase"] = name(op.phase);
  if (op.recompute) a["recompute"] = true;  // full recomputation's forward rerun
  if (op.kind == OpKind::Collective || op.kind == OpKind::DpSync)
    a["collective"] = name(op.collective);
  if (op.instruction >= 0) {
    a["instruction"] = op.instruction;
    a["instruction_op"] = name(op.instruction_op);
    a["side"] = side_name(op.side);
  }
  if (op.kind == OpKind::P2P) a["peer"] = peer;
  if (cost.bytes > 0) a["bytes"] = std::llround(cost.bytes);
  return a;
}

}  // namespace

std::string chrome_trace_json(const Dag& dag, const Timeline& timeline, const Report& report) {
  const Clock clock{report.uniform ? 1000.0 : 1e9};
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;

  // Metadata: names and order of processes (ranks) and threads (streams in use).
  for (int r = 0; r < dag.pp; ++r) {
    add_line(out,
             json{{"name", "process_name"},
                  {"ph", "M"},
                  {"pid", pid(r)},
                  {"args", json{{"name", "rank " + std::to_string(r)}}}},
             first);
    add_line(out,
             json{{"name", "process_sort_index"},
                  {"ph", "M"},
                  {"pid", pid(r)},
                  {"args", json{{"sort_index", r}}}},
             first);
    for (int s = 0; s < kStreamsPerRank; ++s) {
      const int sid = dag.stream_id(r, static_cast<StreamKind>(s));
      if (dag.stream_begin[sid] == dag.stream_begin[sid + 1]) continue;
      add_line(out,
               json{{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", pid(r)},
                    {"tid", tid(r, s)},
                    {"args", json{{"name", thread_name(static_cast<StreamKind>(s))}}}},
               first);
      add_line(out,
               json{{"name", "thread_sort_index"},
                    {"ph", "M"},
                    {"pid", pid(r)},
                    {"tid", tid(r, s)},
                    {"args", json{{"sort_index", s}}}},
               first);
    }
  }

  // Ops, in stream order.
  for (int r = 0; r < dag.pp; ++r) {
    for (int s = 0; s < kStreamsPerRank; ++s) {
      const int sid = dag.stream_id(r, static_cast<StreamKind>(s));
      for (int k = dag.stream_begin[sid]; k < dag.stream_begin[sid + 1]; ++k) {
        const int i = dag.stream_ops[k];
        const DagOp& op = dag.ops[i];
        const std::int64_t b = clock.ns(timeline.start_s[i]);
        const std::int64_t e = clock.ns(timeline.end_s[i]);
        json event{{"name", op_name(dag, i)}, {"cat", name(op.kind)}, {"ph", "X"},
                   {"pid", pid(r)},           {"tid", tid(r, s)},     {"ts", Clock::us(b)}};
        if (e > b) {
          event["dur"] = Clock::dur_us(b, e);
        } else {  // zero duration: a slice of it would break viewers' slice stacks
          event["ph"] = "i";
          event["s"] = "t";
        }
        event["args"] = op_args(op, dag.cost(i), peer_of(dag, i));
        add_line(out, event, first);
      }
    }
  }

  // Flows: each P2P send to its consumer on the peer rank (the earliest-starting successor
  // there), bound to the middle of both slices so that neither end is ambiguous.
  int flow_id = 0;
  const Successors succ = successors(dag);
  for (int i = 0; i < dag.size(); ++i) {
    const DagOp& send = dag.ops[i];
    // A send of zero duration is an instant event, which flows cannot bind to.
    if (send.kind != OpKind::P2P || clock.ns(timeline.end_s[i]) <= clock.ns(timeline.start_s[i]))
      continue;
    int consumer = -1;
    for (int j = succ.begin[i]; j < succ.begin[i + 1]; ++j) {
      const int c = succ.list[j];
      if (dag.ops[c].rank != peer_of(dag, i)) continue;
      if (consumer < 0 || timeline.start_s[c] < timeline.start_s[consumer]) consumer = c;
    }
    if (consumer < 0) continue;
    auto mid = [&](int op) {
      return Clock::us((clock.ns(timeline.start_s[op]) + clock.ns(timeline.end_s[op])) / 2);
    };
    if (clock.ns(timeline.end_s[consumer]) <= clock.ns(timeline.start_s[consumer])) continue;
    const DagOp& to = dag.ops[consumer];
    ++flow_id;
    add_line(out,
             json{{"name", "p2p"},
                  {"cat", "p2p"},
                  {"ph", "s"},
                  {"id", flow_id},
                  {"pid", pid(send.rank)},
                  {"tid", tid(send.rank, static_cast<int>(send.stream))},
                  {"ts", mid(i)}},
             first);
    add_line(out,
             json{{"name", "p2p"},
                  {"cat", "p2p"},
                  {"ph", "f"},
                  {"bp", "e"},
                  {"id", flow_id},
                  {"pid", pid(to.rank)},
                  {"tid", tid(to.rank, static_cast<int>(to.stream))},
                  {"ts", mid(consumer)}},
             first);
  }

  // Activation memory: one counter track per rank, in GiB (uniform reports: in M_a).
  const bool in_ma = report.uniform && report.ma_bytes > 0;
  const double scale = in_ma ? 1.0 / report.ma_bytes : 1.0 / kGiB;
  const char* series = in_ma ? "M_a" : "GiB";
  for (int r = 0; r < dag.pp; ++r) {
    for (const MemorySample& m : timeline.memory) {
      if (m.rank != r) continue;
      // Rounded to 1e-6 of the unit so the counter values print short and stable.
      const double v = std::round(m.activation_bytes * scale * 1e6) / 1e6;
      add_line(out,
               json{{"name", "activation memory"},
                    {"ph", "C"},
                    {"pid", pid(r)},
                    {"ts", Clock::us(clock.ns(m.time_s))},
                    {"args", json{{series, v}}}},
               first);
    }
  }

  // The run's identity and headline figures, under the report JSON's names, as one literal like
  // the events above.
  const json other = {{"schedule", report.schedule},
                      {"study", report.study},
                      {"uniform", report.uniform},
                      {"time_unit", report.uniform ? "symbolic (1 unit = 1 us)" : "us"},
                      {"pp", report.pp},
                      {"vpp", report.vpp},
                      {"tp", report.tp},
                      {"microbatches", report.microbatches},
                      {"iteration_time_s", report.iteration_time_s},
                      {"tp_bubble_rate", report.tp_bubble_rate},
                      {"pp_bubble_rate", report.pp_bubble_rate},
                      {"ops", dag.size()}};
  out += "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":";
  out += other.dump();
  out += "}\n";
  return out;
}

}  // namespace braid
