// The schedule registry: names, size rules and dispatch to one generator per file.
#include <cstddef>
#include <iterator>
#include <string>

#include "../util/did_you_mean.hpp"
#include "braid/error.hpp"
#include "braid/schedule.hpp"
#include "builder.hpp"

namespace braid {

namespace {

using Generator = Schedule (*)(const ScheduleOptions&);

struct Entry {
  ScheduleTraits traits;
  Generator make;
};

// In the order `compare` lists them: the classic ones, then the V-shaped ones, STP, then Megatron's
// combined 1F1B (the newest, after the others so their order stays); one entry per ScheduleKind,
// in its order.
constexpr P2pRuntime kMegatron = P2pRuntime::Megatron;
constexpr P2pRuntime kAhead = P2pRuntime::PostedAhead;
// The runtimes: Megatron-Core's schedules.py runs gpipe and 1f1b
// (forward_backward_pipelining_without_interleaving) and 1f1b-i (_with_interleaving); the
// zero-bubble runtime zb-h1 and zb-v, DeepSeek's DualPipe dualpipe-v and the STP trainer stp and
// stp-offload post their receives ahead; combined-1f1b is schedules.py's again (with
// --overlap-moe-expert-parallel-comm).
constexpr Entry kEntries[] = {
    {{ScheduleKind::GPipe, "gpipe", Placement::Loop, 1, false, false, 1, kMegatron},
     detail::make_gpipe},
    {{ScheduleKind::OneFOneB, "1f1b", Placement::Loop, 1, false, false, 1, kMegatron},
     detail::make_1f1b},
    {{ScheduleKind::Interleaved, "1f1b-i", Placement::Loop, 0, true, false, 0, kMegatron},
     detail::make_1f1b_interleaved},
    {{ScheduleKind::ZbH1, "zb-h1", Placement::Loop, 1, false, false, 0, kAhead},
     detail::make_zb_h1},
    {{ScheduleKind::ZbV, "zb-v", Placement::V, 2, false, false, 0, kAhead}, detail::make_zb_v},
    {{ScheduleKind::DualPipeV, "dualpipe-v", Placement::V, 2, false, false, 2, kAhead},
     detail::make_dualpipe_v},
    {{ScheduleKind::Stp, "stp", Placement::V, 2, false, false, 2, kAhead}, detail::make_stp},
    {{ScheduleKind::StpOffload, "stp-offload", Placement::V, 2, false, true, 2, kAhead},
     detail::make_stp_offload},
    {{ScheduleKind::Combined1F1B, "combined-1f1b", Placement::Loop, 0, true, false, 0, kMegatron},
     detail::make_combined_1f1b},
};

constexpr bool in_kind_order() {
  for (std::size_t i = 0; i < std::size(kEntries); ++i)
    if (static_cast<std::size_t>(kEntries[i].traits.kind) != i) return false;
  return true;
}
static_assert(in_kind_order(), "kEntries must list the schedule kinds in ScheduleKind order");

const Entry& entry(ScheduleKind kind) { return kEntries[static_cast<std::size_t>(kind)]; }

std::string known_names() {
  std::string out;
  for (const Entry& e : kEntries) {
    if (!out.empty()) out += ", ";
    out += e.traits.name;
  }
  return out;
}

}  // namespace

const ScheduleTraits& traits(ScheduleKind kind) { return entry(kind).traits; }

const char* name(ScheduleKind kind) { return traits(kind).name; }

ScheduleKind parse_schedule_kind(std::string_view name) {
  for (const Entry& e : kEntries)
    if (name == e.traits.name) return e.traits.kind;
  throw InputError("--schedule", std::string(name),
                   "unknown schedule; known: " + known_names() +
                       util::did_you_mean(std::string(name), schedule_names()));
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Entry& e : kEntries) v.emplace_back(e.traits.name);
    return v;
  }();
  return names;
}

int fixed_vpp(std::string_view name) { return traits(parse_schedule_kind(name)).vpp; }

int chunks_per_rank(ScheduleKind kind, int requested) {
  const int fixed = traits(kind).vpp;
  return fixed != 0 ? fixed : requested;
}

int chunks_per_rank(std::string_view name, int requested) {
  return chunks_per_rank(parse_schedule_kind(name), requested);
}

int min_microbatches(std::string_view name, const ScheduleOptions& options) {
  const ScheduleTraits& t = traits(parse_schedule_kind(name));
  if (t.microbatches_per_pp > 0) return t.microbatches_per_pp * options.pp;
  if (t.group_size) {
    // One chunk per rank (plain 1F1B) or one rank (no pipeline) needs a single microbatch.
    if (options.vpp == 1 || options.pp == 1) return 1;
    return detail::interleaved_group_size(options);
  }
  return 1;
}

Schedule make_schedule(ScheduleKind kind, const ScheduleOptions& options) {
  const Entry& e = entry(kind);
  detail::check_pp(options);
  detail::check_fraction("--offload", options.offload);
  Schedule s = e.make(options);
  s.name = e.traits.name;
  s.p2p_runtime = e.traits.p2p_runtime;
  // --offload: the shared post-pass on any schedule that does not offload by its own option.
  if (options.offload > 0 && !e.traits.own_offload) {
    detail::insert_offload(s, options.offload);
    s.name += "+offload";
  }
  return s;
}

Schedule make_schedule(std::string_view name, const ScheduleOptions& options) {
  return make_schedule(parse_schedule_kind(name), options);
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

void check_microbatches_per_pp(std::string_view name, const ScheduleOptions& options) {
  const int per_pp = traits(parse_schedule_kind(name)).microbatches_per_pp;
  if (per_pp == 0) {
    check_min_microbatches(name, options, 1, "one per iteration");
    return;
  }
  check_min_microbatches(name, options, per_pp * options.pp,
                         (per_pp == 1 ? std::string() : std::to_string(per_pp)) +
                             "p with p = " + std::to_string(options.pp));
}

void prune_microbatches(Schedule& schedule, int m) {
  for (RankProgram& rank : schedule.ranks) {
    std::vector<Instruction> kept;
    kept.reserve(rank.instructions.size());
    for (const Instruction& in : rank.instructions) {
      PassPart parts[2];
      const bool pair = parts_of(in, parts) == 2;
      const bool keep_a = parts[0].pass.mb < m;
      const bool keep_b = pair && parts[1].pass.mb < m;
      if (pair && keep_a && keep_b)
        kept.push_back(in);
      else if (keep_a)
        kept.push_back(single(parts[0]));
      else if (keep_b)
        kept.push_back(single(parts[1]));
    }
    rank.instructions = std::move(kept);
  }
  schedule.microbatches = m;
}

}  // namespace detail
}  // namespace braid
