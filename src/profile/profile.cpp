// Loading GPU profiles (profile.hpp). Every field is required: a profile that omits one is an
// error naming it, so no number silently falls back to a default.
#include "braid/profile.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "../util/physical_bounds.hpp"
#include "../util/units.hpp"
#include "../util/yaml_reader.hpp"
#include "braid/config.hpp"
#include "braid/error.hpp"
#include "braid/measured.hpp"

namespace braid {

namespace fs = std::filesystem;
using detail::bounded_number;
using detail::bounded_number_or;
using detail::check_bound;
using detail::kBandwidthBound;
using detail::kGflopBound;
using detail::kMemoryGbBound;
using detail::kOverheadGibBound;
using detail::kSlowdownBound;
using detail::kTflopsBound;
using detail::kTimeUsBound;
using detail::YamlMap;

namespace {

// links.<name>.measured: rows per collective, {ranks, bytes, time_us} each.
CollectiveRows read_link_rows(YamlMap& measured) {
  CollectiveRows rows;
  for (CollectiveKind kind : {CollectiveKind::AllReduce, CollectiveKind::AllGather,
                              CollectiveKind::ReduceScatter, CollectiveKind::AllToAll}) {
    const std::string key = name(kind);
    if (!measured.has(key)) continue;
    YAML::Node list = measured.node(key);
    const std::string field = measured.path(key);
    if (!list.IsSequence())
      throw InputError(measured.file(), field, "expected a list of {ranks, bytes, time_us} rows");
    std::vector<MeasuredComm>& table = rows[kind];
    int index = 0;
    for (const auto& row : list) {
      YamlMap r(row, measured.file(), field + "[" + std::to_string(index++) + "]");
      MeasuredComm point;
      point.ranks = r.positive_int("ranks");
      point.bytes = r.positive_number("bytes");
      point.time_s = bounded_number(r, "time_us", {1e-9, 1e12, "us"}) * 1e-6;
      r.finish();
      table.push_back(point);
    }
    // In (ranks, bytes) order, as `braid info` lists them.
    std::sort(table.begin(), table.end(), [](const MeasuredComm& a, const MeasuredComm& b) {
      return a.ranks != b.ranks ? a.ranks < b.ranks : a.bytes < b.bytes;
    });
  }
  measured.finish();
  return rows;
}

// One row of links.<name>.published: {ranks, bytes, time_us or busbw_gbps, source}. A busbw row
// (a derived one, or a table that prints only bus bandwidth) gives time = bus factor x bytes /
// busbw, nccl-tests' definition read backwards.
MeasuredComm read_published_row(YamlMap& r, CollectiveKind kind, std::string& source) {
  MeasuredComm point;
  point.ranks = r.positive_int("ranks");
  if (point.ranks < 2) r.fail("ranks", "must be at least 2 (a collective needs two GPUs)");
  point.bytes = r.positive_number("bytes");
  const bool has_time = r.has("time_us"), has_busbw = r.has("busbw_gbps");
  if (has_time == has_busbw)
    r.fail(has_time ? "busbw_gbps" : "time_us",
           "give exactly one of time_us (nccl-tests' time column) or busbw_gbps");
  point.time_s = has_time ? bounded_number(r, "time_us", {1e-9, 1e12, "us"}) * 1e-6
                          : bus_factor(kind, point.ranks) * point.bytes /
                                (bounded_number(r, "busbw_gbps", kBandwidthBound) * kGB);
  source = r.string("source");
  if (source.empty()) r.fail("source", "must name where the row was published (URL and output)");
  r.finish();
  return point;
}

// links.<name>.published: nccl-tests rows that others measured and published, per collective, in
// increasing (ranks, bytes) order, each naming its source. They go into the same store as
// measured rows (LinkProfile::measured), with their sources beside them.
void read_published_rows(YamlMap& published, LinkProfile& link) {
  CollectiveRows rows;
  for (CollectiveKind kind : {CollectiveKind::AllReduce, CollectiveKind::AllGather,
                              CollectiveKind::ReduceScatter, CollectiveKind::AllToAll}) {
    const std::string key = name(kind);
    if (!published.has(key)) continue;
    YAML::Node list = published.node(key);
    const std::string field = published.path(key);
    if (!list.IsSequence() || list.size() == 0)
      throw InputError(published.file(), field,
                       "expected a list of {ranks, bytes, time_us or busbw_gbps, source} rows");
    std::vector<MeasuredComm>& table = rows[kind];
    std::vector<std::string>& sources = link.row_sources[kind];
    for (const auto& row : list) {
      const std::string at = field + "[" + std::to_string(table.size()) + "]";
      YamlMap r(row, published.file(), at);
      std::string source;
      const MeasuredComm point = read_published_row(r, kind, source);
      if (!table.empty() && !(std::pair(table.back().ranks, table.back().bytes) <
                              std::pair(point.ranks, point.bytes)))
        throw InputError(published.file(), at,
                         "rows must be in increasing (ranks, bytes) order without repeats; this "
                         "row repeats or precedes the one before it");
      table.push_back(point);
      sources.push_back(source);
    }
  }
  if (rows.empty())
    published.fail("",
                   "lists no rows; give all_reduce, all_gather, reduce_scatter or all_to_all rows");
  published.finish();
  link.measured = std::make_shared<const CollectiveRows>(std::move(rows));
  link.published = true;
}

LinkProfile read_link(YamlMap& l, const std::string& name) {
  LinkProfile link;
  link.name = name;
  link.latency_s = bounded_number(l, "latency_us", kTimeUsBound) * 1e-6;
  link.bus_bandwidth_Bps = bounded_number(l, "bus_bandwidth_gbps", kBandwidthBound) * kGB;
  link.p2p_bandwidth_Bps = bounded_number(l, "p2p_bandwidth_gbps", kBandwidthBound) * kGB;
  if (l.has("measured") && l.has("published"))
    l.fail("published", "a link lists measured or published rows, not both");
  if (auto measured = l.map_if_present("measured"))
    link.measured = std::make_shared<const CollectiveRows>(read_link_rows(*measured));
  if (auto published = l.map_if_present("published")) read_published_rows(*published, link);
  l.finish();
  return link;
}

// braid-profile's `measured:` section (measured.hpp). A link that lists no measured rows of its
// own points at the section's rows for it, so collective_time_s answers from them (a link's own
// measured rows replace the section's; the section's replace published rows).
void read_measured_tables(const YAML::Node& node, Profile& profile) {
  auto tables = std::make_shared<MeasuredTables>(parse_measured(node, profile.file));
  if (!(tables->peak_flops > 0)) tables->peak_flops = profile.peak_flops;
  profile.measured = tables;
  for (const auto& [link_name, rows] : tables->comm) {
    auto link = profile.links.find(link_name);
    // Our own measurement replaces published rows; a link's own measured rows stay.
    if (link == profile.links.end() || (link->second.measured && !link->second.published)) continue;
    // Shares ownership of the tables: the rows live once, in Profile::measured.
    link->second.measured = std::shared_ptr<const CollectiveRows>(profile.measured, &rows);
    link->second.published = false;
    link->second.row_sources.clear();
  }
}

// gemm: the tile and wave model (gemm.tiles) or the saturation curve (max_efficiency,
// half_gflop), not both.
void read_gemm(YamlMap& gemm, Profile& profile) {
  if (auto tiles = gemm.map_if_present("tiles")) {
    if (gemm.has("max_efficiency") || gemm.has("half_gflop"))
      gemm.fail("tiles",
                "give the tile model or the saturation curve (max_efficiency, "
                "half_gflop), not both");
    if (profile.sms <= 0) gemm.fail("tiles", "needs the profile's sms (SM count)");
    GemmTileModel& t = profile.gemm.tiles;
    t.tile_m = tiles->positive_int("tile_m");
    t.tile_n = tiles->positive_int("tile_n");
    t.wave_efficiency = tiles->positive_number("wave_efficiency");
    if (t.wave_efficiency > 1) tiles->fail("wave_efficiency", "must be at most 1");
    t.k_overhead = bounded_number(*tiles, "k_overhead", {0, 1e6, ""});
    t.fixed_s = bounded_number(*tiles, "fixed_us", kTimeUsBound) * 1e-6;
    t.source = tiles->string("source");
    if (t.source.empty())
      tiles->fail("source", "must name the measurements the parameters come from");
    tiles->finish();
  } else {
    profile.gemm.max_efficiency = gemm.positive_number("max_efficiency");
    if (profile.gemm.max_efficiency > 1) gemm.fail("max_efficiency", "must be at most 1");
    profile.gemm.half_flops = bounded_number(gemm, "half_gflop", kGflopBound) * 1e9;
  }
  gemm.finish();
}

// attention.rows: per fused kernel, head size and mask, the published forward (and backward)
// TFLOP/s at increasing sequence lengths, each with its source.
void read_attention_rows(YamlMap& attn, Profile& profile) {
  YAML::Node list = attn.node("rows");
  const std::string field = attn.path("rows");
  if (!list.IsSequence() || list.size() == 0)
    throw InputError(attn.file(), field,
                     "expected a list of {impl, head_dim, causal, seq, fwd_tflops, source} rows");
  // The fused kernels only: `default` names none, `unfused` is not a row (Megatron's GEMMs).
  const std::vector<std::string> kernels = {"flash2", "flash3", "cudnn"};
  for (const auto& node : list) {
    const std::string at = field + "[" + std::to_string(profile.attention_rows.size()) + "]";
    YamlMap r(node, attn.file(), at);
    AttentionRow row;
    row.impl = *parse_attention_impl(kernels[static_cast<std::size_t>(r.choice("impl", kernels))]);
    row.head_dim = r.positive_int("head_dim");
    row.causal = r.boolean("causal");
    row.seq = r.positive_number_list("seq");
    for (double tf : r.positive_number_list("fwd_tflops")) row.fwd_flops_per_s.push_back(tf * 1e12);
    if (r.has("bwd_tflops"))
      for (double tf : r.positive_number_list("bwd_tflops"))
        row.bwd_flops_per_s.push_back(tf * 1e12);
    row.source = r.string("source");
    if (row.source.empty()) r.fail("source", "must name where the row was published");
    if (!std::is_sorted(row.seq.begin(), row.seq.end()) ||
        std::adjacent_find(row.seq.begin(), row.seq.end()) != row.seq.end())
      r.fail("seq", "must be increasing");
    if (row.fwd_flops_per_s.size() != row.seq.size())
      r.fail("fwd_tflops", "needs one value per seq entry");
    if (!row.bwd_flops_per_s.empty() && row.bwd_flops_per_s.size() != row.seq.size())
      r.fail("bwd_tflops", "needs one value per seq entry");
    for (const AttentionRow& other : profile.attention_rows)
      if (other.impl == row.impl && other.head_dim == row.head_dim && other.causal == row.causal)
        r.fail("head_dim", "repeats the row of the same impl, head_dim and causal");
    r.finish();
    profile.attention_rows.push_back(std::move(row));
  }
}

void read_contention(YamlMap& contention, Profile& profile) {
  profile.contention.comm_slowdown = contention.positive_number("comm_slowdown");
  if (profile.contention.comm_slowdown < 1)
    contention.fail("comm_slowdown", "must be 1 or more (1 = no slowdown)");
  check_bound(contention, "comm_slowdown", profile.contention.comm_slowdown, kSlowdownBound);
  if (contention.has("comm_sms")) {
    // The SMs the communication kernels hold: compute runs on the rest.
    if (contention.has("compute_slowdown"))
      contention.fail("comm_sms", "give compute_slowdown or comm_sms, not both");
    if (profile.sms <= 0) contention.fail("comm_sms", "needs the profile's sms (SM count)");
    const int comm = contention.positive_int("comm_sms");
    if (comm >= profile.sms)
      contention.fail("comm_sms", "must be less than sms (" + std::to_string(profile.sms) + ")");
    profile.contention.comm_sms = comm;
    profile.contention.compute_slowdown = sm_share_slowdown(profile.sms, comm);
  } else {
    profile.contention.compute_slowdown = contention.positive_number("compute_slowdown");
    if (profile.contention.compute_slowdown < 1)
      contention.fail("compute_slowdown", "must be 1 or more (1 = no slowdown)");
    check_bound(contention, "compute_slowdown", profile.contention.compute_slowdown,
                kSlowdownBound);
  }
  contention.finish();
}

}  // namespace

double sm_share_slowdown(int sms, int comm_sms) {
  if (sms <= 0 || comm_sms < 0 || comm_sms >= sms)
    throw InternalError("sm_share_slowdown: needs 0 <= comm_sms < sms");
  return static_cast<double>(sms) / (sms - comm_sms);
}

const LinkProfile& Profile::link(const std::string& link_name) const {
  auto it = links.find(link_name);
  if (it == links.end()) {
    std::vector<std::string> known;
    for (const auto& kv : links) known.push_back(kv.first);
    throw InputError(file, "links." + link_name,
                     "profile " + name + " has no link class '" + link_name +
                         "' (the cluster names it); known: " + detail::join(known));
  }
  return it->second;
}

std::string precision_refusal(Precision precision, const Profile& profile) {
  if (precision == Precision::Bf16) return "";
  const std::string gpu = "profile " + profile.name + " (" + profile.gpu + ")";
  if (precision == Precision::Mxfp8)
    return "mxfp8 needs a Blackwell GPU (Transformer Engine's MXFP8BlockScaling: compute "
           "capability 10.0); " +
           gpu + " is not one: use fp8-blockwise, fp8-current or fp8-delayed on Hopper, or bf16";
  if (profile.fp8_peak_flops > 0) return "";
  return std::string(name(precision)) + " needs FP8 tensor cores and " + gpu +
         " gives no peak_fp8_tflops (Ampere has none; a GPU whose datasheet gives one may add it "
         "with its source): use bf16, or a GPU with FP8 (h100, h200)";
}

Profile load_profile(const fs::path& name_or_file) {
  fs::path file = resolve_config("profiles", name_or_file.string());
  YamlMap p(detail::load_yaml_file(file), file.string(), "");
  Profile profile;
  profile.file = file.string();
  profile.name = p.string_or("name", file.stem().string());
  profile.source = p.choice("source", {"spec-derived", "measured"}) == 0 ? Source::SpecDerived
                                                                         : Source::Measured;
  profile.gpu = p.string("gpu");
  p.string_or("notes", "");  // free text: where and when a measured profile was taken
  profile.peak_flops = bounded_number(p, "peak_tflops", kTflopsBound) * 1e12;
  profile.fp8_peak_flops = bounded_number_or(p, "peak_fp8_tflops", 0, kTflopsBound) * 1e12;
  profile.hbm_bytes = bounded_number(p, "hbm_gb", kMemoryGbBound) * kGB;
  profile.hbm_bandwidth_Bps = bounded_number(p, "hbm_bandwidth_gbps", kBandwidthBound) * kGB;
  profile.memory_bound_efficiency = p.positive_number("memory_bound_efficiency");
  if (profile.memory_bound_efficiency > 1) p.fail("memory_bound_efficiency", "must be at most 1");
  profile.memory_kernel_s = bounded_number_or(p, "memory_kernel_us", 0, kTimeUsBound) * 1e-6;
  profile.sms = p.positive_int_or("sms", 0);

  YamlMap gemm = p.map("gemm");
  read_gemm(gemm, profile);

  YamlMap attn = p.map("attention");
  profile.attention_fwd_efficiency = attn.positive_number("fwd_efficiency");
  profile.attention_bwd_efficiency = attn.positive_number("bwd_efficiency");
  if (profile.attention_fwd_efficiency > 1) attn.fail("fwd_efficiency", "must be at most 1");
  if (profile.attention_bwd_efficiency > 1) attn.fail("bwd_efficiency", "must be at most 1");
  if (attn.has("default_impl")) {
    const std::vector<std::string> kernels = {"flash2", "flash3", "cudnn"};
    profile.attention_default_impl = *parse_attention_impl(
        kernels[static_cast<std::size_t>(attn.choice("default_impl", kernels))]);
  }
  if (attn.has("rows")) read_attention_rows(attn, profile);
  attn.finish();

  YamlMap links = p.map("links");
  YAML::Node links_node = p.node("links");
  for (const auto& kv : links_node) {
    std::string link_name = links.key_name(kv.first);
    YamlMap l = links.map(link_name);
    profile.links[link_name] = read_link(l, link_name);
  }
  if (profile.links.empty()) p.fail("links", "at least one link class (e.g. nvlink) is required");
  links.finish();

  YamlMap host = p.map("host");
  profile.host_d2h_Bps = bounded_number(host, "d2h_gbps", kBandwidthBound) * kGB;
  profile.host_h2d_Bps = bounded_number(host, "h2d_gbps", kBandwidthBound) * kGB;
  profile.copy_contention.d2h_slowdown = host.positive_number_or("bidir_d2h_slowdown", 1.0);
  profile.copy_contention.h2d_slowdown = host.positive_number_or("bidir_h2d_slowdown", 1.0);
  if (profile.copy_contention.d2h_slowdown < 1)
    host.fail("bidir_d2h_slowdown", "must be 1 or more (1 = no slowdown)");
  if (profile.copy_contention.h2d_slowdown < 1)
    host.fail("bidir_h2d_slowdown", "must be 1 or more (1 = no slowdown)");
  check_bound(host, "bidir_d2h_slowdown", profile.copy_contention.d2h_slowdown, kSlowdownBound);
  check_bound(host, "bidir_h2d_slowdown", profile.copy_contention.h2d_slowdown, kSlowdownBound);
  host.finish();

  YamlMap contention = p.map("contention");
  read_contention(contention, profile);

  profile.fixed_overhead_bytes = bounded_number(p, "fixed_overhead_gib", kOverheadGibBound) * kGiB;
  if (p.has("measured")) read_measured_tables(p.node("measured"), profile);
  p.finish();
  return profile;
}

}  // namespace braid
