// The members of a study (config.hpp) and of the explorer's options, listed for the shard
// fingerprint: two shards merge only when everything that can change a row is the same. Each
// visitor lists every member of its struct (explore_test compares the counts with the structs'
// own, so a new field fails a test until it is listed here). Internal to src/explore.
#pragma once

#include "braid/config.hpp"
#include "braid/dag.hpp"
#include "braid/explore.hpp"
#include "braid/simulator.hpp"

namespace braid::explore {

// f(name, member) for every member, in declaration order.
template <typename F>
void visit_study_fields(const VisionConfig& v, F&& f) {
  f("depth", v.depth);
  f("hidden", v.hidden);
  f("heads", v.heads);
  f("mlp_ratio", v.mlp_ratio);
  f("patch", v.patch);
  f("temporal_patch", v.temporal_patch);
  f("in_channels", v.in_channels);
  f("spatial_merge", v.spatial_merge);
  f("tokens_per_sample", v.tokens_per_sample);
}

template <typename F>
void visit_study_fields(const MoeConfig& e, F&& f) {
  f("experts", e.experts);
  f("top_k", e.top_k);
  f("expert_ffn", e.expert_ffn);
  f("shared_experts", e.shared_experts);
  f("shared_expert_ffn", e.shared_expert_ffn);
  f("layer_freq", e.layer_freq);
  f("first_k_dense", e.first_k_dense);
  f("router_score", e.router_score);
  f("router_groups", e.router_groups);
  f("router_group_top_k", e.router_group_top_k);
  f("capacity_factor", e.capacity_factor);
  f("pad_to_capacity", e.pad_to_capacity);
  f("dispatcher", e.dispatcher);
  f("fp8_dispatch", e.fp8_dispatch);
}

template <typename F>
void visit_study_fields(const MlaConfig& a, F&& f) {
  f("q_lora_rank", a.q_lora_rank);
  f("kv_lora_rank", a.kv_lora_rank);
  f("qk_head_dim", a.qk_head_dim);
  f("qk_pos_emb_head_dim", a.qk_pos_emb_head_dim);
  f("v_head_dim", a.v_head_dim);
}

template <typename F>
void visit_study_fields(const MoeRouting& r, F&& f) {
  f("kind", r.kind);
  f("skew", r.skew);
  f("file", r.file);
  f("weights", r.weights);
  f("seed", r.seed);
}

template <typename F>
void visit_study_fields(const ModelConfig& m, F&& f) {
  f("name", m.name);
  f("file", m.file);
  f("layers", m.layers);
  f("hidden", m.hidden);
  f("heads", m.heads);
  f("kv_heads", m.kv_heads);
  f("head_dim", m.head_dim);
  f("ffn", m.ffn);
  f("vocab", m.vocab);
  f("tied_embeddings", m.tied_embeddings);
  f("qkv_bias", m.qkv_bias);
  f("activation", m.activation);
  f("norm", m.norm);
  f("linear_bias", m.linear_bias);
  f("position", m.position);
  f("max_positions", m.max_positions);
  f("dropout", m.dropout);
  f("flash_attention", m.flash_attention);
  f("attention_impl", m.attention_impl);
  f("sliding_window", m.sliding_window);
  f("full_attention_every", m.full_attention_every);
  f("vision", m.vision);
  f("moe", m.moe);
  f("mla", m.mla);
}

template <typename F>
void visit_study_fields(const LinkConfig& l, F&& f) {
  f("name", l.name);
}

template <typename F>
void visit_study_fields(const NetworkConfig& n, F&& f) {
  f("nics_per_node", n.nics_per_node);
  f("nic_Bps", n.nic_Bps);
  f("nic_efficiency", n.nic_efficiency);
}

template <typename F>
void visit_study_fields(const ClusterConfig& c, F&& f) {
  f("name", c.name);
  f("file", c.file);
  f("nodes", c.nodes);
  f("gpus_per_node", c.gpus_per_node);
  f("profile", c.profile);
  f("intra_node", c.intra_node);
  f("inter_node", c.inter_node);
  f("host", c.host);
  f("network", c.network);
}

template <typename F>
void visit_study_fields(const ParallelConfig& p, F&& f) {
  f("tp", p.tp);
  f("pp", p.pp);
  f("vpp", p.vpp);
  f("sequence_parallel", p.sequence_parallel);
  f("cp", p.cp);
  f("cp_comm_type", p.cp_comm_type);
  f("hierarchical_cp", p.hierarchical_cp);
  f("dp", p.dp);
  f("ep", p.ep);
  f("etp", p.etp);
}

template <typename F>
void visit_study_fields(const TrainingConfig& t, F&& f) {
  f("seq", t.seq);
  f("micro_batch_size", t.micro_batch_size);
  f("microbatches", t.microbatches);
  f("dtype_bytes", t.dtype_bytes);
  f("optimizer_bytes_per_param", t.optimizer_bytes_per_param);
  f("grad_bytes_per_param", t.grad_bytes_per_param);
  f("weight_bytes_per_param", t.weight_bytes_per_param);
  f("distributed_optimizer", t.distributed_optimizer);
  f("overlap_grad_reduce", t.overlap_grad_reduce);
  f("overlap_param_gather", t.overlap_param_gather);
  f("bucket_params", t.bucket_params);
  f("gradient_accumulation_fusion", t.gradient_accumulation_fusion);
  f("tp_comm_overlap", t.tp_comm_overlap);
  f("moe_shared_expert_overlap", t.moe_shared_expert_overlap);
  f("p2p_scatter_gather", t.p2p_scatter_gather);
  f("p2p_batched", t.p2p_batched);
  f("overlap_p2p_comm", t.overlap_p2p_comm);
  f("defer_embedding_wgrad_compute", t.defer_embedding_wgrad_compute);
  f("wgrad_deferral_limit", t.wgrad_deferral_limit);
  f("recompute", t.recompute);
  f("offload", t.offload);
  f("precision", t.precision);
  f("fp8_param_gather", t.fp8_param_gather);
  f("moe_routing", t.moe_routing);
}

template <typename F>
void visit_study_fields(const LayoutConfig& l, F&& f) {
  f("vision_placement", l.vision_placement);
  f("balance", l.balance);
  f("layers_per_stage", l.layers_per_stage);
}

template <typename F>
void visit_study_fields(const Study& s, F&& f) {
  f("name", s.name);
  f("file", s.file);
  f("model", s.model);
  f("cluster", s.cluster);
  f("parallel", s.parallel);
  f("training", s.training);
  f("layout", s.layout);
  f("schedules", s.schedules);
}

template <typename F>
void visit_study_fields(const LowerOptions& o, F&& f) {
  f("p2p", o.p2p);
  f("fold_zero_time", o.fold_zero_time);
}

template <typename F>
void visit_study_fields(const SimOptions& o, F&& f) {
  f("contention", o.contention);
  f("record_memory", o.record_memory);
}

template <typename F>
void visit_study_fields(const MemoryCap& c, F&& f) {
  f("hbm_bytes", c.hbm_bytes);
  f("fixed_overhead_bytes", c.fixed_overhead_bytes);
  f("margin_bytes", c.allocator_margin_bytes);
  f("cap_bytes", c.cap_bytes);
  f("given", c.given);
}

// The options that change a row, and those that do not (listed so that a new option has to be
// placed on one side): jobs, cache and retime give identical rows by construction (explore_test),
// progress and group only report and share the work; the caps are in the MemoryCap.
template <typename F, typename Skip>
void visit_study_fields(const ExploreOptions& o, F&& f, Skip&& skip) {
  skip("mem_cap_bytes", o.mem_cap_bytes);
  skip("mem_margin_bytes", o.mem_margin_bytes);
  f("tp_across_nodes", o.tp_across_nodes);
  skip("jobs", o.jobs);
  skip("cache", o.cache);
  skip("retime", o.retime);
  f("lower", o.lower);
  f("sim", o.sim);
  skip("progress", o.progress);
  skip("group", o.group);
  f("design_budget_s", o.design_budget_s);
  // The configurations carry the microbatches it gives (any count above 0 fixes the batch) and
  // a configuration where it gives none is never valid; what it adds to a row is the reason text.
  skip("fixed_global_batch", o.fixed_global_batch);
}

}  // namespace braid::explore
