// Schedule generation and validation speed: the explorer builds and validates one schedule per
// grid point, so both must stay cheap. Run: build/schedule_bench
#include <benchmark/benchmark.h>

#include <string>

#include "braid/schedule.hpp"

namespace {

braid::ScheduleOptions sizes(int p, int m) {
  braid::ScheduleOptions o;
  o.pp = p;
  o.microbatches = m;
  return o;
}

void BM_Make(benchmark::State& state, const char* name, int p, int m) {
  for (auto _ : state) benchmark::DoNotOptimize(braid::make_schedule(name, sizes(p, m)));
}

void BM_Validate(benchmark::State& state, const char* name, int p, int m) {
  braid::Schedule s = braid::make_schedule(name, sizes(p, m));
  for (auto _ : state) benchmark::DoNotOptimize(braid::validate(s));
}

}  // namespace

BENCHMARK_CAPTURE(BM_Make, stp_p8_m64, "stp", 8, 64);
BENCHMARK_CAPTURE(BM_Make, stp_rebraided_p8_m20, "stp", 8, 20);
BENCHMARK_CAPTURE(BM_Make, stp_rebraided_p32_m64, "stp", 32, 64);
BENCHMARK_CAPTURE(BM_Make, zb_v_p8_m64, "zb-v", 8, 64);
BENCHMARK_CAPTURE(BM_Make, interleaved_p8_m64, "1f1b-i", 8, 64);
BENCHMARK_CAPTURE(BM_Validate, stp_p8_m64, "stp", 8, 64);
BENCHMARK_CAPTURE(BM_Validate, stp_p32_m1024, "stp", 32, 1024);
