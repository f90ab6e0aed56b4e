// `braid info`'s rendering of a cost model (cost_model.hpp: cost_model_table, cost_model_json):
// parameter counts, FLOPs, per-chunk memory, per-stage work and the distinct units' costs. Field
// names of the JSON are documented in docs/cost-model.md.
#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../util/format.hpp"
#include "../util/text_table.hpp"
#include "../util/units.hpp"
#include "braid/cost_model.hpp"
#include "units.hpp"

namespace braid {

namespace {

const char* source_name(Source s) {
  switch (s) {
    case Source::Measured:
      return "measured";
    case Source::Published:
      return "published";
    case Source::SpecDerived:
      break;
  }
  return "spec-derived";
}

// The distinct units of the model: layer costs are identical for every LM layer (and every ViT
// layer), so one row per unit kind and where it runs.
struct UnitRow {
  std::string where;  // "stage 0", "every layer", "every vision layer", "last stage"
  const UnitCost* unit;
};

// With a sliding window (the model's sliding_window) the first windowed and the first
// full-attention LM layer each.
std::vector<UnitRow> distinct_units(const CostModel& cm, const ModelConfig& m) {
  std::vector<UnitRow> rows;
  bool vision_done = false, lm_done = false, full_done = m.sliding_window == 0;
  // Non-layer units where they run, and the first ViT layer and the first LM layer (wherever the
  // layout put them: a folded ViT's layers are prologue units of stage 0).
  for (const auto& c : cm.chunks) {
    const std::string where = "stage " + std::to_string(c.virtual_stage);
    for (const auto& u : c.prologue) {
      if (u.layer < 0) {
        rows.push_back({where, &u});
      } else if (u.vision && !vision_done) {
        // The first folded ViT layer: its four units, found by their layer number.
        for (const auto& v : c.prologue)
          if (v.vision && v.layer == u.layer) rows.push_back({"every vision layer", &v});
        vision_done = true;
      }
    }
    for (int l = 0; l < c.layer_count(); ++l) {
      const std::span<const UnitCost> units = c.layer(l);
      const bool vision = units.front().vision;
      const bool window =
          !vision && m.sliding_window > 0 && is_window_layer(m, units.front().layer);
      const bool full = !vision && m.sliding_window > 0 && !window;
      bool& done = vision ? vision_done : full ? full_done : lm_done;
      if (done) continue;
      const char* where = vision   ? "every vision layer"
                          : window ? "window layers"
                          : full   ? "full layers"
                                   : "every layer";
      for (const auto& u : units) rows.push_back({where, &u});
      done = true;
    }
    for (const auto& u : c.epilogue) rows.push_back({where, &u});
  }
  return rows;
}

// The profile's published collective rows (links.<name>.published), each with its source: what
// `info` lists so that every published number can be traced.
struct PublishedRow {
  std::string link;
  CollectiveKind kind;
  const MeasuredComm* row;
  const std::string* source;
};

std::vector<PublishedRow> published_rows(const Profile& prof) {
  std::vector<PublishedRow> out;
  for (const auto& [link_name, link] : prof.links) {
    if (!link.published || !link.measured) continue;
    for (const auto& [kind, rows] : *link.measured) {
      const auto sources = link.row_sources.find(kind);
      for (std::size_t i = 0; i < rows.size(); ++i)
        out.push_back({link_name, kind, &rows[i],
                       sources != link.row_sources.end() && i < sources->second.size()
                           ? &sources->second[i]
                           : nullptr});
    }
  }
  return out;
}

double busbw_gbps(const PublishedRow& r) {
  return bus_factor(r.kind, r.row->ranks) * r.row->bytes / r.row->time_s / 1e9;
}

// A phase's collectives as the table shows them: "none", or each kind with '<' (before the
// compute), '>' (after it) or '~' (inside it), and its group when not the TP group, joined by '+'
// ("all_gather<", "all_to_all>ep+reduce_scatter>").
std::string collectives_label(const PhaseCost& p) {
  if (p.collectives.empty()) return name(CollectiveKind::None);
  std::string out;
  for (const Collective& c : p.collectives) {
    if (!out.empty()) out += "+";
    out += name(c.kind);
    out += c.position == CollectivePosition::Before   ? "<"
           : c.position == CollectivePosition::Inside ? "~"
                                                      : ">";
    if (c.group != Group::Tp) out += name(c.group);
  }
  return out;
}

double collectives_bytes(const PhaseCost& p) {
  double bytes = 0;
  for (const Collective& c : p.collectives) bytes += c.bytes;
  return bytes;
}

// --- one LM layer's GEMMs and attention kernels, as the spec model times them ----------------

// Which model answered a kernel: the measured table, the tile model, the saturation curve, the
// attention rows or the flat attention efficiency.
const char* kernel_model(const detail::KernelCall& c) {
  if (c.measured) return "measured";
  if (c.kind == detail::KernelKind::Gemm) return c.gemm.waves > 0 ? "tiles" : "curve";
  return c.attention ? "rows" : "flat";
}

// "flash3 hd128 causal" for an attention row.
std::string row_label(const AttentionRow& r) {
  return std::string(name(r.impl)) + " hd" + std::to_string(r.head_dim) +
         (r.causal ? " causal" : " full");
}

// The distinct attention rows the layer's kernels used, in first-use order.
std::vector<const AttentionRow*> rows_used(const std::vector<detail::LayerKernel>& kernels) {
  std::vector<const AttentionRow*> rows;
  auto add = [&rows](const AttentionRow* r) {
    if (r && std::find(rows.begin(), rows.end(), r) == rows.end()) rows.push_back(r);
  };
  for (const detail::LayerKernel& k : kernels)
    if (k.call.attention) {
      add(k.call.attention->lower);
      add(k.call.attention->upper);
    }
  return rows;
}

// A kernel's shape: "MxNxK" (" bB" for a batch of B GEMMs), or the attention's sequence, head
// dimension, mask and implementation.
std::string kernel_shape(const detail::KernelCall& c) {
  if (c.kind == detail::KernelKind::Gemm)
    return util::format("%.0fx%.0fx%.0f", c.m, c.n, c.k) +
           (c.batch > 1 ? " b" + std::to_string(std::lround(c.batch)) : "");
  return util::format("s%.0f hd%.0f %s %s", c.seq, c.head_dim, c.causal ? "causal" : "full",
                      c.measured ? "" : name(c.impl));
}

// The table `braid info` prints after the unit costs (one row per kernel, then the sources).
std::string layer_kernel_table(const Profile& prof, const ModelConfig& model,
                               const std::vector<detail::LayerKernel>& kernels) {
  std::vector<std::vector<std::string>> rows{{"unit", "phase", "kernel", "shape", "gflop",
                                              "time_ms", "eff", "waves", "split", "tile", "model"}};
  for (const detail::LayerKernel& k : kernels) {
    const detail::KernelCall& c = k.call;
    const bool tiles = c.kind == detail::KernelKind::Gemm && c.gemm.waves > 0;
    rows.push_back(
        {name(k.unit), name(k.phase), c.kind == detail::KernelKind::Gemm ? "gemm" : "attention",
         kernel_shape(c), util::format("%.2f", c.flops / 1e9), util::format("%.4f", c.time_s * 1e3),
         util::format("%.3f", c.efficiency), tiles ? std::to_string(c.gemm.waves) : "-",
         tiles ? std::to_string(c.gemm.split_k) : "-",
         tiles ? util::format("%dx%d", c.gemm.tile_m, c.gemm.tile_n) : "-", kernel_model(c)});
  }
  std::string out =
      std::string(model.moe ? "\nkernels of one LM layer's attention half (per microbatch, one "
                              "GPU of the TP group; the experts are in the unit table):\n"
                            : "\nkernels of one LM layer (per microbatch, one GPU of the TP "
                              "group):\n") +
      util::fixed_width_table(rows, {util::left(8), util::left(5), util::left(9), util::left(28),
                                     util::right(9), util::right(9), util::right(6), util::right(6),
                                     util::right(5), util::left(8), util::left(8)});
  const GemmTileModel& t = prof.gemm.tiles;
  if (t.enabled()) {
    out += util::format(
        "gemm tiles: %dx%d on %d SMs, wave efficiency %.3f, k_overhead %.0f, fixed %.1f us; "
        "source: %s\n",
        t.tile_m, t.tile_n, prof.sms, t.wave_efficiency, t.k_overhead, t.fixed_s * 1e6,
        t.source.c_str());
  } else {
    out +=
        util::format("gemm curve: max efficiency %.3f, half point %.1f GFLOP (profile comments)\n",
                     prof.gemm.max_efficiency, prof.gemm.half_flops / 1e9);
  }
  for (const AttentionRow* r : rows_used(kernels))
    out += "attention row " + row_label(*r) + ": source: " + r->source + "\n";
  return out;
}

nlohmann::ordered_json layer_kernel_json(const std::vector<detail::LayerKernel>& kernels) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const detail::LayerKernel& k : kernels) {
    const detail::KernelCall& c = k.call;
    nlohmann::ordered_json j;
    j["unit"] = name(k.unit);
    j["phase"] = name(k.phase);
    j["kernel"] = c.kind == detail::KernelKind::Gemm ? "gemm" : "attention";
    j["model"] = kernel_model(c);
    if (c.kind == detail::KernelKind::Gemm) {
      j["m"] = c.m;
      j["n"] = c.n;
      j["k"] = c.k;
      j["batch"] = c.batch;
      j["waves"] = c.gemm.waves;
      j["split_k"] = c.gemm.split_k;
      j["tile"] = {c.gemm.tile_m, c.gemm.tile_n};
    } else {
      j["seq"] = c.seq;
      j["head_dim"] = c.head_dim;
      j["causal"] = c.causal;
      j["backward"] = c.backward;
      j["impl"] = name(c.impl);
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      if (c.attention)
        for (const AttentionRow* r : {c.attention->lower, c.attention->upper})
          if (rows.empty() || r != c.attention->lower)
            rows.push_back({{"row", row_label(*r)}, {"source", r->source}});
      j["rows"] = rows;
      j["backward_from_forward"] = c.attention && c.attention->backward_from_forward;
    }
    j["flops"] = c.flops;
    j["time_s"] = c.time_s;
    j["efficiency"] = c.efficiency;
    list.push_back(j);
  }
  return list;
}

nlohmann::json phase_json(const PhaseCost& p) {
  nlohmann::json j;
  j["time_s"] = p.time_s;
  j["flops"] = p.flops;
  j["hw_flops"] = p.hw_flops;
  nlohmann::json collectives = nlohmann::json::array();
  for (const Collective& c : p.collectives)
    collectives.push_back({{"kind", name(c.kind)},
                           {"group", name(c.group)},
                           {"position", name(c.position)},
                           {"bytes", c.bytes},
                           {"time_s", c.time_s}});
  j["collectives"] = std::move(collectives);
  j["alloc_bytes"] = p.alloc_bytes;
  j["free_bytes"] = p.free_bytes;
  j["source"] = source_name(p.source);
  return j;
}

// An MoE model's fields as info's JSON names them (docs/cost-model.md).
nlohmann::ordered_json moe_json(const ModelConfig& m) {
  const MoeConfig& e = *m.moe;
  nlohmann::ordered_json moe;
  moe["layers"] = moe_layer_count(e, m.layers);
  moe["experts"] = e.experts;
  moe["top_k"] = e.top_k;
  moe["expert_ffn"] = e.expert_ffn;
  moe["shared_experts"] = e.shared_experts;
  moe["shared_expert_ffn"] = e.shared_expert_ffn;
  moe["layer_freq"] = e.layer_freq;
  moe["first_k_dense"] = e.first_k_dense;
  moe["router_score"] = name(e.router_score);
  moe["router_groups"] = e.router_groups;
  moe["router_group_top_k"] = e.router_group_top_k;
  moe["pad_to_capacity"] = e.pad_to_capacity;
  moe["dispatcher"] = name(e.dispatcher);
  moe["fp8_dispatch"] = e.fp8_dispatch;
  moe["capacity_factor"] = e.capacity_factor ? nlohmann::ordered_json(*e.capacity_factor)
                                             : nlohmann::ordered_json(nullptr);
  return moe;
}

}  // namespace

std::string cost_model_json(const Study& s, const Profile& prof, const CostModel& cm,
                            const ParameterCount& pc) {
  nlohmann::ordered_json j;
  j["study"] = s.name;
  j["model"] = s.model.name;
  j["cluster"] = s.cluster.name;
  j["profile"] = prof.name;
  j["profile_source"] = source_name(prof.source);
  j["tp"] = s.parallel.tp;
  j["pp"] = s.parallel.pp;
  j["vpp"] = s.parallel.vpp;
  j["cp"] = s.parallel.cp;
  j["dp"] = s.parallel.dp;
  j["sequence_parallel"] = s.parallel.sequence_parallel;
  j["virtual_stages"] = static_cast<int>(cm.chunks.size());
  j["seq"] = s.training.seq;
  j["micro_batch_size"] = s.training.micro_batch_size;
  j["microbatches"] = s.training.microbatches;
  j["gpus"] = cm.gpus;
  j["params_total"] = pc.total;
  j["params_non_embedding"] = pc.non_embedding;
  j["params_per_layer"] = pc.per_layer;
  j["params_embedding"] = pc.embedding;
  j["params_head"] = pc.head;
  j["params_vision"] = pc.vision;
  if (s.model.moe) {
    j["params_active"] = pc.active;
    j["params_per_moe_layer"] = pc.per_moe_layer;
    j["ep"] = s.parallel.ep;
    j["etp"] = rank_layout(s).etp;  // the dense tp when not given
    j["moe"] = moe_json(s.model);
  }
  j["model_flops_per_iteration"] = cm.model_flops;
  j["hardware_flops_per_iteration"] = cm.hardware_flops;
  j["recompute"] = name(s.training.recompute);
  j["tokens_per_iteration"] = cm.tokens_per_iteration;
  j["samples_per_iteration"] = cm.samples_per_iteration;
  j["model_flops_per_token"] = cm.model_flops / cm.tokens_per_iteration;
  j["peak_flops"] = cm.peak_flops;
  j["hbm_bytes"] = cm.hbm_bytes;
  j["fixed_overhead_bytes"] = cm.fixed_overhead_bytes;
  nlohmann::ordered_json chunks = nlohmann::ordered_json::array();
  for (const auto& c : cm.chunks) {
    nlohmann::ordered_json cj;
    cj["virtual_stage"] = c.virtual_stage;
    cj["layers"] = static_cast<int>(c.layers.size());
    cj["first_layer"] = c.layer_units.empty() ? -1 : c.layer_units.front().layer;
    nlohmann::ordered_json pro = nlohmann::ordered_json::array(),
                           epi = nlohmann::ordered_json::array();
    for (const auto& u : c.prologue) {
      if (u.layer < 0) pro.push_back(name(u.kind));
    }
    for (const auto& u : c.epilogue) epi.push_back(name(u.kind));
    cj["prologue"] = pro;
    cj["epilogue"] = epi;
    cj["params_per_gpu"] = c.params;
    cj["static_bytes"] = c.static_bytes;
    cj["static_gib"] = c.static_bytes / kGiB;
    // Per chunk (a rank holding a tied pair keeps one copy: tied_copy_gib is the second).
    cj["static_parts_gib"] = nlohmann::ordered_json{{"layers", c.parts.layers_bytes / kGiB},
                                                    {"embeddings", c.parts.embeddings_bytes / kGiB},
                                                    {"other", c.parts.other_bytes / kGiB}};
    cj["tied_copy_gib"] = c.tied_copy_bytes / kGiB;
    double reduce_s = 0, gather_s = 0;
    for (const GradBucket& b : c.grad_buckets) {
      reduce_s += b.reduce_s;
      gather_s += b.gather_s;
    }
    cj["grad_buckets"] = static_cast<int>(c.grad_buckets.size());
    cj["grad_reduce_s"] = reduce_s;
    cj["param_gather_s"] = gather_s;
    cj["optimizer_s"] = c.optimizer_s;
    cj["activation_bytes"] = c.activation_bytes;
    cj["activation_gib"] = c.activation_bytes / kGiB;
    cj["output_bytes"] = c.output_bytes;
    chunks.push_back(cj);
  }
  // Per-virtual-stage forward + backward work (StageTime): the imbalance between stages.
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (const StageTime& st : stage_times(cm)) {
    nlohmann::ordered_json sj;
    sj["virtual_stage"] = st.virtual_stage;
    sj["vision_layers"] = st.vision_layers;
    sj["layers"] = st.layers;
    sj["compute_s"] = st.compute_s;
    sj["collective_s"] = st.collective_s;
    sj["total_s"] = st.total_s();
    stages.push_back(sj);
  }
  j["stage_times"] = stages;
  j["chunks"] = chunks;
  nlohmann::ordered_json units = nlohmann::ordered_json::array();
  for (const auto& row : distinct_units(cm, s.model)) {
    nlohmann::ordered_json uj;
    uj["unit"] = name(row.unit->kind);
    uj["where"] = row.where;
    uj["vision"] = row.unit->vision;
    nlohmann::ordered_json phases;
    for (Phase p : {Phase::F, Phase::B, Phase::W}) phases[name(p)] = phase_json((*row.unit)[p]);
    // Full recomputation: the forward rerun before the layer's backward.
    if (cm.recompute == Recompute::Full && row.unit->layer >= 0) {
      phases["recompute"] = phase_json(row.unit->recompute);
    }
    uj["phases"] = phases;
    units.push_back(uj);
  }
  j["units"] = units;
  nlohmann::ordered_json published = nlohmann::ordered_json::array();
  for (const PublishedRow& r : published_rows(prof)) {
    published.push_back({{"link", r.link},
                         {"collective", name(r.kind)},
                         {"ranks", r.row->ranks},
                         {"bytes", r.row->bytes},
                         {"time_s", r.row->time_s},
                         {"busbw_gbps", busbw_gbps(r)},
                         {"source", r.source ? *r.source : ""}});
  }
  j["published_collective_rows"] = published;
  j["layer_kernels"] = layer_kernel_json(detail::lm_layer_kernels(s, prof));
  return j.dump(2) + "\n";
}

namespace {

// The model's shape and the layer's form (MLP activation, norm, biases) in one line: the form
// changes the cost and parameter count, so it is shown beside the sizes it multiplies.
std::string model_line(const ModelConfig& m) {
  return util::format(
      "model %s: %d layers, hidden %d, heads %d, kv_heads %d, ffn %d, vocab %d; %s, %s, %s%s\n",
      m.name.c_str(), m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.vocab, name(m.activation),
      name(m.norm), m.linear_bias ? "linear biases" : "no linear biases",
      m.vision ? "; with ViT" : "");
}

// An MoE model's layers, experts and router in one line (docs/moe.md).
std::string moe_line(const ModelConfig& m) {
  const MoeConfig& e = *m.moe;
  std::string layers = util::format("%d of %d layers", moe_layer_count(e, m.layers), m.layers);
  if (e.first_k_dense > 0) layers += util::format(", first %d dense", e.first_k_dense);
  if (e.layer_freq > 1) layers += util::format(", every %d", e.layer_freq);
  std::string out = util::format(
      "  MoE: %s; %d experts, top-%d, expert ffn %d, shared experts %d (ffn %d), router %s",
      layers.c_str(), e.experts, e.top_k, e.expert_ffn, e.shared_experts, e.shared_expert_ffn,
      name(e.router_score));
  if (e.router_groups > 0)
    out += util::format(", %d groups (top %d)", e.router_groups, e.router_group_top_k);
  if (e.dispatcher != MoeDispatcher::AllToAll)
    out += util::format(", %s dispatcher%s", name(e.dispatcher),
                        e.fp8_dispatch ? " (FP8 dispatch)" : "");
  return out + (e.capacity_factor ? util::format(", capacity factor %g%s\n", *e.capacity_factor,
                                                 e.pad_to_capacity ? " (padded to it)" : "")
                                  : std::string(", dropless\n"));
}

// A model's multi-head latent attention in one line (docs/moe.md, "Multi-head latent attention").
std::string mla_line(const MlaConfig& a) {
  return util::format(
      "  MLA: q_lora_rank %d%s, kv_lora_rank %d, q/k head %d + rope %d, v head %d\n", a.q_lora_rank,
      a.q_lora_rank == 0 ? " (no q compression)" : "", a.kv_lora_rank, a.qk_head_dim,
      a.qk_pos_emb_head_dim, a.v_head_dim);
}

// The parameter counts: an MoE model's total beside what one token passes through.
std::string parameter_line(const ModelConfig& m, const ParameterCount& pc) {
  if (m.moe)
    return util::format(
        "  parameters: total %.3f B, active per token %.3f B, non-embedding %.3f B, embedding "
        "%.3f B, head %.3f B; per MoE layer %.3f B\n",
        pc.total / 1e9, pc.active / 1e9, pc.non_embedding / 1e9, pc.embedding / 1e9, pc.head / 1e9,
        pc.per_moe_layer / 1e9);
  return util::format(
      "  parameters: total %.3f B, non-embedding %.3f B (layers %.3f B, vision %.3f B), "
      "embedding %.3f B, head %.3f B\n",
      pc.total / 1e9, pc.non_embedding / 1e9, pc.layers / 1e9, pc.vision / 1e9, pc.embedding / 1e9,
      pc.head / 1e9);
}

// The study, model, cluster, parallel sizes, layout and training in a few lines, with the
// parameter counts and the FLOPs per iteration.
std::string study_lines(const Study& s, const Profile& prof, const CostModel& cm,
                        const ParameterCount& pc) {
  const auto& m = s.model;
  const auto& p = s.parallel;
  const auto& t = s.training;
  std::string out = "study " + s.name + " (" + s.file + ")\n";
  out += model_line(m);
  if (m.moe) out += moe_line(m);
  if (m.mla) out += mla_line(*m.mla);
  if (m.sliding_window > 0) {
    int windowed = 0;
    for (int l = 0; l < m.layers; ++l) windowed += is_window_layer(m, l) ? 1 : 0;
    out += util::format("  sliding window: %d keys on %d of %d layers\n", m.sliding_window,
                        windowed, m.layers);
  }
  out += parameter_line(m, pc);
  out += util::format("cluster %s: %d x %d GPUs, profile %s (%s, %s)\n", s.cluster.name.c_str(),
                      s.cluster.nodes, s.cluster.gpus_per_node, prof.name.c_str(), prof.gpu.c_str(),
                      source_name(prof.source));
  out += util::format(
      "parallel: tp %d, pp %d, vpp %d (%zu virtual stages), dp %d, sequence parallel %s", p.tp,
      p.pp, p.vpp, cm.chunks.size(), p.dp, p.sequence_parallel ? "on" : "off");
  if (m.moe) out += util::format(", ep %d, etp %d", p.ep, rank_layout(s).etp);
  if (p.cp > 1 && p.cp_comm_type == CpCommType::A2AP2P)
    out += util::format(", context parallel %d (all-to-all in groups of %d, KV ring of %d, %s)",
                        p.cp, p.hierarchical_cp.at(0), p.hierarchical_cp.at(1),
                        rank_layout(s).spans_nodes(Group::Cp) ? "across nodes" : "inside a node");
  else if (p.cp > 1)
    out += util::format(", context parallel %d (%s %s)", p.cp,
                        p.cp_comm_type == CpCommType::A2A ? "all-to-all" : "KV ring",
                        rank_layout(s).spans_nodes(Group::Cp) ? "across nodes" : "inside a node");
  out += "\n";
  out += std::string("layout: ") +
         (!s.layout.layers_per_stage.empty()       ? "layers per stage by hand"
          : s.layout.balance == StageBalance::Cost ? "balanced by cost"
                                                   : "uniform") +
         (!m.vision ? ""
          : s.layout.vision_placement == VisionPlacement::FirstStage
              ? ", ViT folded into the first stage"
              : ", ViT on virtual stage(s) of its own") +
         "\n";
  if (m.vision) {
    out += util::format(
        "  ViT: %d layers, hidden %d, heads %d, %d patches -> %d LM tokens per sample "
        "(part of seq %d)\n",
        m.vision->depth, m.vision->hidden, m.vision->heads,
        m.vision->tokens_per_sample * m.vision->spatial_merge * m.vision->spatial_merge,
        m.vision->tokens_per_sample, t.seq);
  }
  out += util::format(
      "training: seq %d, micro-batch %d, %d microbatches x dp %d = %.0f samples, %.0f "
      "tokens per iteration, precision %s\n",
      t.seq, t.micro_batch_size, t.microbatches, p.dp, cm.samples_per_iteration,
      cm.tokens_per_iteration, name(t.precision));
  out += util::format(
      "model FLOPs per iteration: %.4e (%.3f GFLOP per token; forward + backward, causal "
      "attention halved, no recompute)\n",
      cm.model_flops, cm.model_flops / cm.tokens_per_iteration / 1e9);
  out += util::format(
      "hardware FLOPs per iteration: %.4e (what the GPUs execute, recomputation included)\n",
      cm.hardware_flops);
  return out;
}

// A chunk's non-layer units in order, joined by '+'; a folded ViT's layers (prologue units) as
// "ViTx<depth>".
std::string non_layer_units(const ChunkCost& c, const ModelConfig& m) {
  std::string out;
  auto add = [&out](const std::string& label) { out += (out.empty() ? "" : "+") + label; };
  bool folded_vit = false;
  for (const auto& u : c.prologue) {
    if (u.layer < 0) {
      add(name(u.kind));
    } else if (u.vision && !folded_vit) {
      add("ViTx" + std::to_string(m.vision ? m.vision->depth : 0));
      folded_vit = true;
    }
  }
  for (const auto& u : c.epilogue) add(name(u.kind));
  return out.empty() ? "-" : out;
}

std::string chunk_table(const Study& s, const CostModel& cm) {
  std::vector<std::vector<std::string>> rows{{"stage", "layers", "non-layer units", "params_M",
                                              "static_gib", "layers/emb/other", "M_a_gib",
                                              "output_mib", "buckets", "dp_sync_ms", "optim_ms"}};
  for (const auto& c : cm.chunks) {
    double sync_s = 0;
    for (const GradBucket& b : c.grad_buckets) sync_s += b.reduce_s + b.gather_s;
    rows.push_back({std::to_string(c.virtual_stage), std::to_string(c.layers.size()),
                    non_layer_units(c, s.model), util::format("%.2f", c.params / 1e6),
                    util::format("%.3f", c.static_bytes / kGiB),
                    util::format("%.2f/%.2f/%.2f", c.parts.layers_bytes / kGiB,
                                 c.parts.embeddings_bytes / kGiB, c.parts.other_bytes / kGiB),
                    util::format("%.3f", c.activation_bytes / kGiB),
                    util::format("%.2f", c.output_bytes / kMiB),
                    std::to_string(c.grad_buckets.size()), util::format("%.3f", sync_s * 1e3),
                    util::format("%.3f", c.optimizer_s * 1e3)});
  }
  // printf's fixed fields: a long list of non-layer units pushes the rest of its row only.
  return "\nchunks (per GPU of the TP group):\n" +
         util::fixed_width_table(rows,
                                 {util::right(5), util::right(7), util::left(40), util::right(12),
                                  util::right(10), util::left(20), util::right(10), util::right(12),
                                  util::right(8), util::right(10), util::right(9)});
}

// One row per distinct unit and phase (F, B, W, then R: full recomputation's forward rerun
// before the layer's backward), then the legend of the collective marks.
std::string unit_cost_table(const CostModel& cm, const ModelConfig& m) {
  std::vector<std::vector<std::string>> rows{{"unit", "where", "phase", "time_ms", "gflop",
                                              "collective", "coll_mib", "coll_ms", "alloc_mib",
                                              "free_mib", "source"}};
  // The legend says what the table shows: '~' and group names only where a collective has them.
  bool beyond_tp = false;
  for (const auto& row : distinct_units(cm, m)) {
    const bool rerun = cm.recompute == Recompute::Full && row.unit->layer >= 0;
    for (int k = 0; k < (rerun ? 4 : 3); ++k) {
      const Phase ph = static_cast<Phase>(k < 3 ? k : 0);
      const PhaseCost& c = k < 3 ? (*row.unit)[ph] : row.unit->recompute;
      rows.push_back({name(row.unit->kind), row.where, k < 3 ? name(ph) : "R",
                      util::format("%.4f", c.time_s * 1e3), util::format("%.2f", c.flops / 1e9),
                      collectives_label(c), util::format("%.2f", collectives_bytes(c) / kMiB),
                      util::format("%.4f", c.collective_s() * 1e3),
                      util::format("%.2f", c.alloc_bytes / kMiB),
                      util::format("%.2f", c.free_bytes / kMiB), source_name(c.source)});
    }
    for (const PhaseCost* p : {&(*row.unit)[Phase::F], &(*row.unit)[Phase::B],
                               &(*row.unit)[Phase::W], &row.unit->recompute})
      for (const Collective& c : p->collectives)
        beyond_tp = beyond_tp || c.group != Group::Tp || c.position == CollectivePosition::Inside;
  }
  // The collective column fits its longest label (a unit may run several collectives).
  std::size_t label_width = 14;
  for (const auto& r : rows) label_width = std::max(label_width, r[5].size());
  return "\nunit costs per microbatch on one GPU (time alone, no contention):\n" +
         util::fixed_width_table(
             rows, {util::left(13), util::left(19), util::left(5), util::right(9), util::right(9),
                    util::left(label_width), util::right(10), util::right(9), util::right(9),
                    util::right(9), util::left(12)}) +
         (beyond_tp ? "(collective '>' runs after the unit's compute, '<' before it, '~' inside "
                      "it; a group other than tp follows the mark)\n"
                    : "(collective '>' runs after the unit's compute, '<' before it)\n");
}

// The profile's published collective rows with their sources; empty when it has none.
std::string published_table(const Profile& prof) {
  const auto published = published_rows(prof);
  if (published.empty()) return "";
  std::vector<std::vector<std::string>> rows{
      {"link", "collective", "ranks", "bytes", "time_us", "busbw_gbps", "source"}};
  for (const PublishedRow& r : published)
    rows.push_back({r.link, name(r.kind), std::to_string(r.row->ranks),
                    util::format("%.0f", r.row->bytes), util::format("%.2f", r.row->time_s * 1e6),
                    util::format("%.2f", busbw_gbps(r)), r.source ? *r.source : ""});
  return "\npublished collective rows of profile " + prof.name +
         " (nccl-tests output by others):\n" +
         util::fixed_width_table(rows, {util::left(8),
                                        util::left(15),
                                        util::right(5),
                                        util::right(12),
                                        util::right(11),
                                        util::right(10),
                                        {util::Align::Left, 0, 1}});
}

}  // namespace

std::string cost_model_table(const Study& s, const Profile& prof, const CostModel& cm,
                             const ParameterCount& pc) {
  return study_lines(s, prof, cm, pc) + chunk_table(s, cm) + "\n" +
         stage_times_table(stage_times(cm)) + unit_cost_table(cm, s.model) +
         layer_kernel_table(prof, s.model, detail::lm_layer_kernels(s, prof)) +
         published_table(prof);
}

}  // namespace braid
