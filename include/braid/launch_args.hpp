// Launch arguments out (launch_args.cpp; docs/megatron.md, "Launch arguments out"): a study's
// layout written as the settings another trainer takes, the reverse of parse_megatron_args. Text
// only: what braid's study has that the trainer cannot express is written as `#` comment lines,
// never dropped silently. It knows schedules by name alone (the caller passes the chunks).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/config.hpp"

namespace braid {

enum class LaunchFormat { Megatron, Torchtitan };
// The --emit values in enum order (megatron, torchtitan); parse_launch_format reads them back
// (std::nullopt for any other text).
const std::vector<std::string>& launch_format_names();
std::optional<LaunchFormat> parse_launch_format(std::string_view text);

// The pipeline schedule the layout runs: braid's name ("1f1b-i") and its chunks (virtual
// stages) per pipeline rank (the schedule's fixed value, or the study's vpp for 1f1b-i).
struct LaunchSchedule {
  std::string name;
  int chunks_per_rank = 1;
};

// Megatron-LM pretrain_gpt.py flags, one per line with ` \` continuations after the comment
// lines; parse_megatron_args reads them back to the same study (tested for every field it sets).
std::string megatron_launch_args(const Study& study, const LaunchSchedule& schedule);
// A torchtitan job-config TOML fragment ([parallelism], [training], [activation_checkpoint]),
// the field names of torchtitan/config/job_config.py.
std::string torchtitan_toml(const Study& study, const LaunchSchedule& schedule);
std::string launch_fragment(LaunchFormat format, const Study& study,
                            const LaunchSchedule& schedule);

}  // namespace braid
