// Golden outputs: real commands through the built binary, compared byte for byte with the files
// of tests/data/golden/ (listed, with what each covers, in tests/data/README.md). They pin the
// text tables (`braid info`, `theory`, `design`) and every CSV braid writes, so that a refactor of
// their rendering shows any change. An intended change is regenerated with
//   BRAID_REGENERATE_GOLDEN=1 build/braid_tests "[golden]"
// and reviewed in the diff of tests/data/golden/.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "cli_run.hpp"

namespace {

namespace fs = std::filesystem;
using braid::test::CliRun;
using braid::test::run_braid;
using braid::test::slurp;

const fs::path kGoldenDir = fs::path(BRAID_SOURCE_DIR) / "tests" / "data" / "golden";
const char* const kRegenerate = "BRAID_REGENERATE_GOLDEN=1 build/braid_tests \"[golden]\"";

// One golden: the file under tests/data/golden/, the command's arguments ("{out}" is a fresh
// folder) and, for a command that writes its output to a file, that file's name in {out}
// (otherwise the golden is the command's stdout).
struct Golden {
  const char* file;
  const char* args;
  const char* written = nullptr;
};

// Small configurations (8 microbatches, few schedules): the whole tag runs in a few seconds.
const std::vector<Golden>& goldens() {
  static const std::vector<Golden> list = {
      // braid info: a dense LLM (A800 profile, curve GEMMs), its JSON, a Megatron study with full
      // recomputation (R rows), GEMM tiles and published collective rows, a VLM with the ViT folded
      // into stage 0 and one with the ViT on stages of its own, a measured profile, and an H100
      // study with sequence parallelism (all_gather<) and attention rows.
      {"info_default.txt", "info --study configs/studies/default.yaml"},
      {"info_default.json", "info --study configs/studies/default.yaml --json"},
      {"info_megatron_22b_full.txt",
       "info --study configs/studies/megatron/megatron-22b-full.yaml"},
      {"info_vl_14.9b_folded.txt",
       "info --study configs/studies/paper/mllm-qwen2-vl-14.9b-balanced-folded.yaml"},
      {"info_vl_14.9b_folded.json",
       "info --study configs/studies/paper/mllm-qwen2-vl-14.9b-balanced-folded.yaml --json"},
      {"info_vl_14.9b_imbalanced.txt",
       "info --study configs/studies/paper/mllm-qwen2-vl-14.9b-imbalanced.yaml"},
      {"info_default_measured.txt",
       "info --study configs/studies/default.yaml --profile "
       "tests/data/profile-synthetic-measured.yaml"},
      {"info_qwen2_7b_h100.txt",
       "info --study configs/studies/qwen2-7b-h20x16.yaml --cluster h100x64 --tp 4 --pp 2 "
       "--seq 4096 --sp on --recompute selective"},
      // braid theory: the closed-form table, a uniform scan, a scan and --explain on a study.
      {"theory_table.txt",
       "theory --schedules 1f1b,1f1b-i,zb-v,stp --pp 4 --microbatches 8 --unit-costs "
       "1,1,1,0.25"},
      {"theory_scan.txt",
       "theory --schedules 1f1b-i,stp --pp 4 --scan m=4..12 --step 4 --unit-costs 1,1,1,0.25"},
      {"theory_study_scan_explain.txt",
       "theory --study default --schedules 1f1b-i,stp --scan m=4..8 --step 4 --explain "
       "--microbatches 8"},
      // braid design: the table under an M_a cap (uniform costs) and under a GiB cap (a study).
      {"design_uniform.txt",
       "design --unit-costs 1,1,1,0.25 --pp 4 --microbatches 8 --mem-cap-ma 6 --max-candidates "
       "40 --budget 0 -o {out}/d.json"},
      {"design_default.txt",
       "design --study default --microbatches 8 --mem-cap 62 --max-candidates 12 --budget 0 "
       "--seeds 1f1b-i,stp -o {out}/d.json"},
      // Every CSV: simulate, compare, sweep, search and the PyTorch schedule export.
      {"simulate_default_stp.csv",
       "simulate --study default --schedule stp --microbatches 8 --csv"},
      {"compare_default.csv", "compare --study default --microbatches 8 --csv"},
      {"sweep_default.csv",
       "sweep --study default --microbatches 8 --tp 4,8 --schedules 1f1b-i,stp --csv "
       "{out}/sweep.csv",
       "sweep.csv"},
      {"search_default.csv",
       "search --study default --gpus 16 --global-batch 16 --mbs 1 --schedules 1f1b-i,stp --csv "
       "{out}/search.csv",
       "search.csv"},
      {"export_zb_v.csv",
       "export --format pytorch-csv --schedule zb-v --pp 4 --microbatches 8 -o {out}/zb-v.csv",
       "zb-v.csv"},
      // Launch arguments out: the torchtitan fragment of a GQA model with a V schedule, FSDP for
      // the distributed optimizer and SP off noted (docs/megatron.md, "Launch arguments out").
      {"emit_qwen2_7b_zb_v.toml",
       "simulate --study qwen2-7b-h20x16 --schedule zb-v --microbatches 8 --emit torchtitan "
       "--emit-file {out}/t.toml",
       "t.toml"},
  };
  return list;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// "line N" of the first difference, both lines quoted: enough to see what changed.
std::string first_difference(const std::string& want, const std::string& got) {
  std::size_t at = 0;
  while (at < want.size() && at < got.size() && want[at] == got[at]) ++at;
  const auto line_of = [at](const std::string& s) {
    const std::size_t begin = s.rfind('\n', at == 0 ? 0 : at - 1);
    const std::size_t from = begin == std::string::npos || at == 0 ? 0 : begin + 1;
    return s.substr(from, s.find('\n', from) - from);
  };
  const auto line = std::count(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  return "first difference on line " + std::to_string(line + 1) + ":\n  golden: " + line_of(want) +
         "\n  now:    " + line_of(got);
}

bool regenerating() {
  const char* v = std::getenv("BRAID_REGENERATE_GOLDEN");
  return v && std::string(v) == "1";
}

}  // namespace

TEST_CASE("every golden command prints (or writes) exactly its file under tests/data/golden",
          "[golden]") {
  REQUIRE(!goldens().empty());
  const fs::path out = fs::temp_directory_path() / ("braid_golden." + std::to_string(::getpid()));
  for (const Golden& g : goldens()) {
    fs::remove_all(out);
    fs::create_directories(out);
    const std::string args = replace_all(g.args, "{out}", out.string());
    const CliRun r = run_braid(args);
    INFO("braid " << g.args << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const std::string got = g.written ? slurp(out / g.written) : r.out;
    REQUIRE(!got.empty());
    // A study named by name prints its absolute path: such a golden would hold only here.
    CHECK(got.find(BRAID_SOURCE_DIR) == std::string::npos);
    const fs::path file = kGoldenDir / g.file;
    if (regenerating()) {
      fs::create_directories(kGoldenDir);
      std::ofstream(file, std::ios::binary) << got;
      WARN("regenerated " << file.string());
      continue;
    }
    REQUIRE(fs::exists(file));
    const std::string want = slurp(file);
    if (got != want)
      FAIL_CHECK("tests/data/golden/" << g.file << " differs from the output of `braid " << g.args
                                      << "`; " << first_difference(want, got)
                                      << "\nif the change is intended, regenerate with "
                                      << kRegenerate << " and review the diff");
  }
  fs::remove_all(out);
}

TEST_CASE("tests/data/golden holds exactly the goldens the test lists", "[golden]") {
  // A golden no command writes any more would pass forever, checking nothing.
  std::set<std::string> listed, present;
  for (const Golden& g : goldens()) listed.insert(g.file);
  for (const auto& entry : fs::directory_iterator(kGoldenDir))
    present.insert(entry.path().filename().string());
  CHECK(listed.size() == goldens().size());  // no file named twice
  CHECK(present == listed);
}
