// `braid merge`: joins the shard files of `braid sweep --shard i/N` into what the unsharded sweep
// prints and writes (table or JSON, --csv, --svg), byte for byte.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../util/input_file.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "commands.hpp"
#include "explore_options.hpp"

namespace braid::cli {

namespace {

struct MergeArgs {
  std::vector<std::string> files;
  SweepOutputs out;
};

std::string read_shard_file(const std::string& path) {
  return util::read_input_file(path, util::kShardFile);
}

void run_merge(const MergeArgs& a) {
  check_sweep_outputs(a.out);
  std::vector<SweepShard> shards;
  for (const std::string& f : a.files) shards.push_back(decode_shard(read_shard_file(f), f));
  const SweepResult result = merge_shards(shards, a.files);
  write_sweep_outputs(result, a.out, shards.front().title);
}

}  // namespace

void register_merge(CLI::App& app) {
  auto args = std::make_shared<MergeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "merge",
      "join the shard files of braid sweep --shard i/N into the output of the unsharded sweep");
  cmd->footer(
      "Examples:\n"
      "  braid merge part1.bin part2.bin part3.bin\n"
      "  braid merge parts/*.bin --csv sweep.csv --svg sweep.svg --html sweep.html\n"
      "  braid merge parts/*.bin --json > sweep.json\n"
      "See docs/distributed.md (Slurm job arrays, GNU parallel).");
  cmd->add_option("files", args->files, "the shard files (every shard 1..N of one sweep, once)")
      ->required();
  add_sweep_output_options(*cmd, args->out);
  cmd->callback([args] { run_merge(*args); });
}

}  // namespace braid::cli
