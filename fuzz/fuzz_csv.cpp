// libFuzzer target: the PyTorch schedule CSV importer (read_pytorch_csv), then the validator, and
// for a schedule that validates and is small, the lowering onto uniform costs and the simulation.
// Bad input may only surface as InputError (or a failed validation); any other exception, a
// crash or a sanitizer report is a bug. The first byte is the microbatch hint (byte % 9; 0 =
// infer), the rest the CSV. Seeds: tools/fuzz writes tests/data/*.csv with a 0 byte in front.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>

#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int microbatches = data[0] >= '0' && data[0] <= '8' ? data[0] - '0' : data[0] % 9;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  try {
    const braid::Schedule schedule = braid::read_pytorch_csv(in, "fuzz.csv", microbatches);
    if (!braid::validate(schedule).ok()) return 0;
    // Keep each run short: the simulation of a big imported schedule is not what is fuzzed here.
    if (schedule.pp > 16 || schedule.vpp > 8 || schedule.microbatches > 64) return 0;
    const braid::CostModel cost =
        braid::uniform_cost_model({1, 2, 1, 0.5, 1}, schedule.virtual_stages());
    const braid::Dag dag = braid::lower(schedule, cost);
    braid::simulate(dag);
  } catch (const braid::InputError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_csv: %s escaped: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
  return 0;
}
