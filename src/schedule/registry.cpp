// The schedule registry: names, size rules and dispatch to one generator per file.
#include <algorithm>
#include <string>

#include "braid/error.hpp"
#include "braid/schedule.hpp"
#include "builder.hpp"

namespace braid {

namespace {

using Generator = Schedule (*)(const ScheduleOptions&);

struct Entry {
  const char* name;
  Generator make;
  int vpp;  // fixed chunks per rank, 0 = chosen with --vpp
};

// In the order `compare` lists them: the classic ones, then the V-shaped ones, STP last.
constexpr Entry kEntries[] = {
    {"gpipe", detail::make_gpipe, 1},
    {"1f1b", detail::make_1f1b, 1},
    {"1f1b-i", detail::make_1f1b_interleaved, 0},
    {"zb-h1", detail::make_zb_h1, 1},
    {"zb-v", detail::make_zb_v, 2},
    {"dualpipe-v", detail::make_dualpipe_v, 2},
    {"stp", detail::make_stp, 2},
    {"stp-offload", detail::make_stp_offload, 2},
};

std::string known_names() {
  std::string out;
  for (const Entry& e : kEntries) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

const Entry& find(std::string_view name) {
  for (const Entry& e : kEntries)
    if (name == e.name) return e;
  throw InputError("--schedule", std::string(name), "unknown schedule; known: " + known_names());
}

}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Entry& e : kEntries) v.emplace_back(e.name);
    return v;
  }();
  return names;
}

int fixed_vpp(std::string_view name) { return find(name).vpp; }

int min_microbatches(std::string_view name, const ScheduleOptions& options) {
  find(name);
  if (name == "stp" || name == "stp-offload" || name == "dualpipe-v") return 2 * options.pp;
  if (name == "1f1b-i") {
    // One chunk per rank (plain 1F1B) or one rank (no pipeline) needs a single microbatch.
    if (options.vpp == 1 || options.pp == 1) return 1;
    return detail::interleaved_group_size(options);
  }
  return 1;
}

Schedule make_schedule(std::string_view name, const ScheduleOptions& options) {
  const Entry& entry = find(name);
  detail::check_pp(options);
  Schedule s = entry.make(options);
  s.name = entry.name;
  return s;
}

namespace detail {

void check_pp(const ScheduleOptions& options) {
  if (options.pp < 1)
    throw InputError("--pp", std::to_string(options.pp), "pipeline size must be >= 1");
  if (options.microbatches < 1)
    throw InputError("--microbatches", std::to_string(options.microbatches), "must be >= 1");
}

void check_min_microbatches(std::string_view name, const ScheduleOptions& options, int minimum,
                            const std::string& why) {
  if (options.microbatches < minimum)
    throw InputError("--microbatches", std::to_string(options.microbatches),
                     std::string(name) + " needs at least " + std::to_string(minimum) +
                         " microbatches (" + why + ")");
}

void prune_microbatches(Schedule& schedule, int m) {
  for (RankProgram& rank : schedule.ranks) {
    std::vector<Instruction> kept;
    kept.reserve(rank.instructions.size());
    for (const Instruction& in : rank.instructions) {
      bool pair = in.op == OpCode::FB || in.op == OpCode::FW || in.op == OpCode::FF;
      bool keep_a = in.a.mb < m;
      bool keep_b = pair && in.b.mb < m;
      if (pair && keep_a && keep_b) {
        kept.push_back(in);
      } else if (keep_a) {
        OpCode single =
            in.op == OpCode::FB || in.op == OpCode::FW || in.op == OpCode::FF ? OpCode::F : in.op;
        kept.push_back({single, in.a, {}});
      } else if (keep_b) {
        OpCode single = in.op == OpCode::FB   ? OpCode::B
                        : in.op == OpCode::FW ? OpCode::W
                                              : OpCode::F;
        kept.push_back({single, in.b, {}});
      }
    }
    rank.instructions = std::move(kept);
  }
  schedule.microbatches = m;
}

}  // namespace detail
}  // namespace braid
