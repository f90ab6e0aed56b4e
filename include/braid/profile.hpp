// Profile: what one GPU type and its links can do — peak FLOP/s, achieved efficiencies, memory
// bandwidth, a collective model per link class, copy bandwidths, compute/communication contention
// and fixed framework memory. Loaded from profiles/<gpu>.yaml; either spec-derived (every number
// names its public source in the file) or measured by braid-profile. It is data, not a cost model:
// cost_model.hpp turns it into unit times.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/config.hpp"

namespace braid {

// Where a number comes from. Published: another party's measurement (the published nccl-tests
// rows of a link, links.<name>.published), as opposed to braid-profile's own (Measured).
enum class Source { SpecDerived, Measured, Published };

struct MeasuredTables;  // measured.hpp: braid-profile's per-shape tables

// The communication a link carries: the TP, CP and DP collectives (None: a unit without one),
// the pipeline's point-to-point sends and the all-to-all (context parallelism's Ulysses
// exchange; the same kind MoE's token dispatch and combine are). One kind for the cost model,
// the DAG and the measured tables.
enum class CollectiveKind : std::uint8_t {
  None,
  AllReduce,
  AllGather,
  ReduceScatter,
  P2P,
  AllToAll
};
// nccl-tests' names, as profiles spell them: "all_reduce", "all_gather", "reduce_scatter", "p2p",
// "all_to_all" ("none" for None).
const char* name(CollectiveKind k);
// The inverse of name() for the measurable kinds; nullopt for anything else ("none" too).
std::optional<CollectiveKind> parse_collective_kind(const std::string& s);
// "all_reduce, all_gather, reduce_scatter, p2p, all_to_all": the names parse_collective_kind
// accepts.
std::string collective_kind_names();
// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw * factor, with
// algbw = bytes / time and bytes the nccl-tests "size" (the full, gathered buffer for
// all_gather / reduce_scatter, each rank's whole send buffer for alltoall): 2(n-1)/n for
// all_reduce, (n-1)/n for all_gather, reduce_scatter and all_to_all, 1 for p2p (0 for None).
double bus_factor(CollectiveKind kind, int ranks);

// One measured point of a collective or copy: group size, payload bytes per rank, seconds.
struct MeasuredComm {
  int ranks = 0;
  double bytes = 0;
  double time_s = 0;
};
// Measured points of one link class per collective, in the order the file lists them.
using CollectiveRows = std::map<CollectiveKind, std::vector<MeasuredComm>>;

// Collective cost on one link class: time = latency + bus factor * bytes / bus bandwidth, unless
// rows for the collective are present (they take precedence; cost_model.hpp: collective_time_s).
struct LinkProfile {
  std::string name;
  double latency_s = 0;
  double bus_bandwidth_Bps = 0;  // nccl-tests busbw plateau, bytes/s
  double p2p_bandwidth_Bps = 0;  // point-to-point, one direction, bytes/s
  // The link's measured rows: its own (links.<name>.measured) or, when it lists none, those of
  // the profile's `measured:` section (measured.comm.<name>, shared with Profile::measured, not
  // copied). Null when there are none.
  std::shared_ptr<const CollectiveRows> measured;
  // True when `measured` holds the link's published rows (links.<name>.published: nccl-tests
  // output that others measured and published), not braid-profile's. A measured profile's own
  // rows for the link replace them.
  bool published = false;
  // Per published row, where it was published (URL and which output), in the order of
  // measured->at(kind) (the file's order, which the loader checks is by ranks, then bytes).
  std::map<CollectiveKind, std::vector<std::string>> row_sources;
};

// The tile and wave model of one GEMM (docs/cost-model.md, "GEMM"): the library computes the
// output in tile_m x tile_n tiles (either orientation), one tile per SM at a time, in waves of
// Profile::sms tiles; a tile costs (K + k_overhead) steps at wave_efficiency of the SM's share of
// peak, split-K is used when it is faster, and every GEMM pays fixed_s. tile_m == 0: not given
// (the saturation curve of GemmEfficiency answers).
struct GemmTileModel {
  int tile_m = 0, tile_n = 0;
  double wave_efficiency = 0;  // achieved fraction of peak while a full wave runs
  double k_overhead = 0;       // per-tile fixed cost (pipeline fill, epilogue), in units of K
  double fixed_s = 0;          // per-GEMM fixed time (launch and ramp), seconds
  std::string source;          // the measurements the parameters come from
  bool enabled() const { return tile_m > 0; }
};

// Achieved GEMM efficiency: the tile model when the profile gives one, else a function of size
// alone, eff = max_eff * flops / (flops + half_flops) (the older saturation curve).
struct GemmEfficiency {
  double max_efficiency = 0.8;
  double half_flops = 0;  // FLOPs of a GEMM that reaches half of max_efficiency
  GemmTileModel tiles;
};

// Published rates of one fused-attention kernel (attention.rows of a profile): for one head
// size and mask, the forward (and, where published, backward) FLOP/s at each sequence length, as
// FlashAttention counts FLOPs (forward 4 b s^2 h d, halved when causal; backward 2.5 x that).
struct AttentionRow {
  AttentionImpl impl = AttentionImpl::Flash2;
  int head_dim = 0;
  bool causal = false;
  std::vector<double> seq;              // increasing
  std::vector<double> fwd_flops_per_s;  // one per seq
  std::vector<double> bwd_flops_per_s;  // one per seq, or empty: not published
  std::string source;                   // where it was published
};

// Contention: while a collective (or P2P) and compute run together on one GPU, each runs this
// many times slower than alone. A spec-derived profile may give the SMs the communication
// kernels hold instead (comm_sms): compute then runs on the others, sms / (sms - comm_sms)
// times slower (docs/cost-model.md, "Compute/communication contention").
struct Contention {
  double compute_slowdown = 1.0;
  double comm_slowdown = 1.0;
  int comm_sms = 0;  // 0: not given (compute_slowdown as written)
};

// The fluid SM-share slowdown: compute on the sms - comm_sms SMs that communication kernels leave
// runs sms / (sms - comm_sms) times slower. Requires 0 <= comm_sms < sms (InternalError else).
double sm_share_slowdown(int sms, int comm_sms);

// Copy contention on the host link: while a D2H and an H2D copy run at the same time on one GPU,
// each runs this many times slower than alone (PCIe is full duplex, but measured bidirectional
// copies fall short of twice one direction; sources in the profiles).
struct CopyContention {
  double d2h_slowdown = 1.0;
  double h2d_slowdown = 1.0;
};

struct Profile {
  std::string name;
  std::string file;
  Source source = Source::SpecDerived;
  std::string gpu;               // marketing name
  double peak_flops = 0;         // dense bf16, FLOP/s
  double fp8_peak_flops = 0;     // dense FP8, FLOP/s; 0: none (Ampere) or no datasheet gives it
  double hbm_bytes = 0;          // device memory, bytes
  double hbm_bandwidth_Bps = 0;  // bytes/s
  int sms = 0;                   // streaming multiprocessors (0: not given)
  GemmEfficiency gemm;
  double attention_fwd_efficiency = 0;  // fraction of peak for fused attention forward
  double attention_bwd_efficiency = 0;
  // attention.default_impl: the kernel a model's `attention_impl: default` means on this GPU
  // (Default: none named; the flat efficiencies above answer).
  AttentionImpl attention_default_impl = AttentionImpl::Default;
  std::vector<AttentionRow> attention_rows;  // attention.rows; may be empty
  double memory_bound_efficiency = 0.85;     // fraction of HBM bandwidth elementwise kernels reach
  double memory_kernel_s = 0;  // fixed time of each memory-bound kernel (memory_kernel_us)
  std::map<std::string, LinkProfile> links;  // keyed by link class name (nvlink, ib, pcie, ...)
  double host_d2h_Bps = 0;                   // pinned copies over the host link, per direction
  double host_h2d_Bps = 0;
  CopyContention copy_contention;  // host.bidir_*_slowdown; 1, 1 when absent
  Contention contention;
  double fixed_overhead_bytes = 0;  // CUDA context, NCCL buffers, allocator slack
  // The `measured:` section braid-profile writes (GEMM, attention, elementwise, collective and
  // copy tables); null for a spec-derived profile. Where it answers, the cost model uses it
  // instead of the spec model (cost_model.hpp).
  std::shared_ptr<const MeasuredTables> measured;

  const LinkProfile& link(const std::string& name) const;  // throws InputError if missing
};

// Why `precision` cannot run on `profile`'s GPU, with what is allowed and how to fix it (one
// line), or "" when it can: FP8 needs the profile's FP8 peak (Hopper and later; Transformer
// Engine's check_fp8_support in pytorch/fp8.py); MXFP8 needs Blackwell (check_mxfp8_support:
// compute capability 10.0), which no profile of braid's is.
std::string precision_refusal(Precision precision, const Profile& profile);

// Resolves a name ("a800") or path under data_root()/profiles and loads it.
Profile load_profile(const std::filesystem::path& file);

}  // namespace braid
