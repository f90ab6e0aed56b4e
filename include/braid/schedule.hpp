// Schedule: per pipeline rank, the ordered list of instructions it executes in one iteration
// (DESIGN §3 and §8) — F, B, W of one (chunk, microbatch), the braided pairs FB, FW, FF, and
// OFFLOAD / RELOAD of saved activations. Generators produce schedules from (p, v, m, options) and
// know nothing of costs; the validator proves a schedule complete and deadlock-free. A Schedule is
// a value: the DAG lowering reads it, nothing writes back into it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braid {

enum class InstructionKind : std::uint8_t { F, B, W, FB, FW, FF, Offload, Reload };
// "F", "B", "W", "FB", "FW", "FF", "OFFLOAD", "RELOAD" (the schedule JSON's "op").
const char* name(InstructionKind op);
std::optional<InstructionKind> parse_instruction_kind(std::string_view text);
// OFFLOAD and RELOAD only copy saved activations between device and host; every other kind runs
// compute.
constexpr bool is_copy(InstructionKind op) {
  return op == InstructionKind::Offload || op == InstructionKind::Reload;
}
// FB, FW and FF are braided blocks of two passes (Instruction::a, then b), each starting with a
// forward; every other kind holds one pass (a).
constexpr bool is_braided(InstructionKind op) {
  return op == InstructionKind::FB || op == InstructionKind::FW || op == InstructionKind::FF;
}

// One pass of one (chunk, microbatch): its forward, its input-gradient backward (with or without
// the weight gradient) or its deferred weight gradient.
struct Pass {
  int chunk = 0;
  int mb = 0;
  bool defer_w = false;  // B only: the weight gradient runs later, at a W instruction
  bool operator==(const Pass&) const = default;
};

// F, B, W, Offload, Reload use `a`; FB: a = F, b = B; FW: a = F, b = W; FF: a and b are both F.
struct Instruction {
  InstructionKind op = InstructionKind::F;
  Pass a;
  Pass b;
  bool operator==(const Instruction&) const = default;
};

// What one pass of an instruction does: its forward, backward (input gradient, with the weight
// gradient unless deferred), deferred weight gradient, or a copy of its saved activations.
enum class PassKind : std::uint8_t { F, B, W, Offload, Reload };
struct PassPart {
  PassKind kind = PassKind::F;
  Pass pass;
};
// The passes an instruction runs, in the order they are checked and lowered (FB: F then B; FW: F
// then W; FF: a then b); returns how many (1 or 2) were written to `out`. The one decoding of
// braided blocks: everything that walks an instruction's passes asks this.
int parts_of(const Instruction& in, PassPart out[2]);
// The instruction that runs one pass alone (F, B, W, OFFLOAD or RELOAD of `part.pass`).
Instruction single(const PassPart& part);

// How virtual stages map to (rank, chunk).
enum class Placement : std::uint8_t {
  Loop,  // virtual stage k = c * p + r (GPipe, 1F1B, 1F1B-I, ZB-H1)
  V,     // chunk 0 of rank r is stage r, chunk 1 is stage 2p-1-r (ZB-V, STP, DualPipeV)
};
// "loop", "v" (the schedule JSON's "placement").
const char* name(Placement placement);
std::optional<Placement> parse_placement(std::string_view text);

struct RankProgram {
  int rank = 0;
  std::vector<Instruction> instructions;
};

// The runtime that executes a schedule's point-to-point sends and receives (lowering models its
// rules; docs/simulator.md, "P2P"):
enum class P2pRuntime : std::uint8_t {
  // Megatron-Core's pipeline schedules (schedules.py: forward_backward_pipelining_without_
  // interleaving, and _with_interleaving when a rank holds more than one chunk): each receive is
  // posted in the batch right before its consumer, and a send completes only once its receiver
  // has posted it (rendezvous).
  Megatron,
  // Receives posted ahead of where the order needs them (the zero-bubble runtime's planned
  // receives, the STP trainer's and DualPipe's hand-placed ones, braid's own for designed and
  // imported orders): no send waits for its receiver.
  PostedAhead,
};
// "megatron", "posted-ahead" (the schedule JSON's "p2p_runtime", --p2p-runtime).
const char* name(P2pRuntime runtime);
std::optional<P2pRuntime> parse_p2p_runtime(std::string_view text);

struct Schedule {
  std::string name;
  int pp = 1;
  int vpp = 1;  // chunks per rank
  int microbatches = 1;
  Placement placement = Placement::Loop;
  // Set by the generator (ScheduleTraits::p2p_runtime), read from a schedule file or given when a
  // CSV is imported; lowering reads this field, never the name.
  P2pRuntime p2p_runtime = P2pRuntime::PostedAhead;
  std::vector<RankProgram> ranks;

  int virtual_stages() const { return pp * vpp; }
  int virtual_stage(int rank, int chunk) const;
  std::vector<int> virtual_stages_of(int rank) const;  // in chunk order
  int rank_of(int virtual_stage) const;
  int chunk_of(int virtual_stage) const;
};

struct ScheduleOptions {
  int pp = 1;
  // Chunks per rank of a schedule that lets it be chosen (1f1b-i); the others have their own and
  // ignore it (chunks_per_rank gives the number a schedule runs with).
  int vpp = 2;
  int microbatches = 1;
  int group_size = 0;             // 1f1b-i: Megatron's microbatch group size N; 0 = p
  double offload_fraction = 1.0;  // stp-offload: share of chunk-0 microbatches offloaded
  // Every other schedule: share of chunk-0 microbatches offloaded by the shared post-pass (0 =
  // off). A schedule built with offload > 0 is named "<name>+offload".
  double offload = 0.0;
};

// The generated schedules, in the order `compare` lists them. Names are strings only at the edges
// (options, YAML, outputs): the library asks the trait table.
enum class ScheduleKind : std::uint8_t {
  GPipe,
  OneFOneB,
  Interleaved,
  ZbH1,
  ZbV,
  DualPipeV,
  Stp,
  StpOffload,
  Combined1F1B
};

struct ScheduleTraits {
  ScheduleKind kind;
  const char* name;     // the --schedule value and the label outputs print
  Placement placement;  // how its virtual stages map to (rank, chunk)
  int vpp;              // fixed chunks per rank; 0 = chosen with --vpp
  bool group_size;      // takes --group-size (Megatron's microbatch group size)
  // Offloads by its own --offload-fraction; --offload (the shared post-pass, which names the
  // result "<name>+offload") does not apply to it.
  bool own_offload;
  int microbatches_per_pp;  // needs m >= this * p (0: no such rule)
  P2pRuntime p2p_runtime;   // the runtime its order is written for
};
const ScheduleTraits& traits(ScheduleKind kind);
const char* name(ScheduleKind kind);
// The kind named `name`; throws InputError("--schedule", name, "unknown schedule; known: ...").
ScheduleKind parse_schedule_kind(std::string_view name);

// Names accepted by make_schedule, in the order `compare` lists them.
const std::vector<std::string>& schedule_names();
// Builds a schedule; throws InputError ("--schedule", "--microbatches", ...) on bad sizes.
Schedule make_schedule(ScheduleKind kind, const ScheduleOptions& options);
Schedule make_schedule(std::string_view name, const ScheduleOptions& options);
// Smallest microbatch count the schedule accepts for these options (pp, group_size); throws
// InputError for an unknown name.
int min_microbatches(std::string_view name, const ScheduleOptions& options);
// Chunks per rank the schedule uses: 1 (gpipe, 1f1b, zb-h1), 2 (V schedules) or 0 when it is
// chosen with --vpp (1f1b-i). Throws InputError for an unknown name.
int fixed_vpp(std::string_view name);
// The chunks per rank a schedule runs with when `requested` are asked for: its fixed number, or
// `requested` where it lets it be chosen (1f1b-i). The one home of that rule.
int chunks_per_rank(ScheduleKind kind, int requested);
int chunks_per_rank(std::string_view name, int requested);  // InputError for an unknown name

// DESIGN §3 text notation of one rank's program: `F0.3`, `B1.2*` (W deferred), `W` (the oldest
// deferred W) or `W1.4` (any other), `F1.1&B1.0*` (FB), `F0.8&W` (FW), `F0.4+F0.5` (FF),
// `OFF0.3` / `REL0.3` (offload / reload), separated by single spaces.
std::string format_program(const RankProgram& program);
// DESIGN §8 JSON: {"schedule","pp","vpp","microbatches","ranks":[{"rank","instructions"}],
// "placement":"loop"|"v"}.
std::string to_json(const Schedule& schedule);
// Reads that JSON back (`--schedule-file`; "placement" may be absent: V when the file has two
// chunks per rank and validates as V). The result is validated; throws InputError naming the
// file, the field ("ranks[1].instructions[4].op") and what is allowed.
Schedule read_schedule_json(std::istream& in, const std::string& file);

// The result of validation: empty `error` means valid.
struct ValidationResult {
  std::string error;                // names rank, position and instruction
  std::vector<int> peak_in_flight;  // per rank, in chunk-microbatches (F done, B not yet done)
  std::vector<int> peak_on_device;  // as peak_in_flight, less those offloaded and not reloaded
  bool ok() const { return error.empty(); }
};
ValidationResult validate(const Schedule& schedule);
// The per-rank half of validate(): sizes, rank programs in rank order, each pass in range, once
// and in order on its rank, every pass present; empty when all hold. No deadlock check: lower()
// calls this and leaves cycles to the DAG, whose cycle report names the ops on it.
std::string pass_order_error(const Schedule& schedule);

// PyTorch `torch.distributed.pipelining` compute-only CSV (one row per rank, global stage indices).
void write_pytorch_csv(const Schedule& schedule, std::ostream& out);
// Reads such a CSV; placement and chunks per rank are inferred. Throws InputError naming the file,
// the row and column, and the text, or the PyTorch validation rule that fails.
Schedule read_pytorch_csv(std::istream& in, const std::string& file, int microbatches = 0);

}  // namespace braid
