#!/usr/bin/env bash
# ctest mpi_identical_outputs: `braid sweep` and `braid search` (one process, no MPI library)
# write byte-identical outputs to `braid-mpi` under mpirun with 2 and 3 ranks; the invalid rows
# evaluated on every rank appear in rank 0's output; bad input exits 2 on every rank with one
# message; plain braid links no MPI library and, started by mpirun, refuses with one line.
# Usage: tests/mpi_test.sh BRAID BRAID_MPI MPIEXEC
#        (BRAID_MPI and MPIEXEC empty: built without MPI, skipped with 77)
set -euo pipefail
braid=$1
braid_mpi=${2:-}
mpiexec=${3:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
# The dynamic section's NEEDED entries (none when braid is linked fully static, the default);
# readelf rather than ldd, which fails on a static executable and would hide a link to MPI.
needed() { readelf -d "$1" | { grep NEEDED || true; }; }
[ -x "$braid" ] || fail "$braid: no such executable"
if needed "$braid" | grep -q libmpi; then fail "$braid links an MPI library"; fi
if [ -z "$mpiexec" ] || [ -z "$braid_mpi" ]; then
  echo "braid built without MPI (BRAID_MPI=OFF): skipped"
  exit 77
fi
# The check above can see an MPI library where there is one.
needed "$braid_mpi" | grep -q libmpi ||
  fail "$braid_mpi lists no MPI library: the check above cannot see one"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# n = 1: plain braid (no MPI at all); n > 1: braid-mpi under mpirun.
run() {
  local n=$1; shift
  if [ "$n" -eq 1 ]; then "$braid" "$@"; else
    "$mpiexec" --allow-run-as-root --oversubscribe -n "$n" "$braid_mpi" "$@"; fi
}

# tp 16 exceeds the 8 GPUs per node: 12 invalid rows, cost 1 each, spread over the ranks.
sweep=(sweep --tp 2,4,16 --pp 2,4 --seq 2048 --microbatches 8,16 --schedules 1f1b-i,stp,zb-v
       --jobs 1)
search=(search --gpus 16 --global-batch 32 --mbs 1,2 --schedules 1f1b-i,stp --seq 2048 --jobs 1)
for n in 1 2 3; do
  d=$dir/n$n
  mkdir -p "$d"
  # --show-invalid: each invalid row in the table, so that every rank's rows can be counted.
  run "$n" "${sweep[@]}" --show-invalid --csv "$d/sweep.csv" --svg "$d/sweep.svg" > "$d/sweep.txt"
  run "$n" "${sweep[@]}" --json > "$d/sweep.json"
  run "$n" "${search[@]}" > "$d/search.txt"
  run "$n" "${search[@]}" --json > "$d/search.json"
  # Pruned mode: the candidates are simulated in batches, each batch split among the ranks.
  run "$n" "${search[@]}" --exhaustive-limit 4 --top 2 > "$d/pruned.txt"
done
for n in 2 3; do
  for f in sweep.txt sweep.csv sweep.svg sweep.json search.txt search.json pruned.txt; do
    cmp "$dir/n1/$f" "$dir/n$n/$f" || fail "$f differs between 1 and $n ranks"
  done
done
grep -q "12 invalid" "$dir/n2/sweep.txt" || fail "the sweep does not count its 12 invalid rows"
[ "$(grep -c 'tp 16 > 8 GPUs per node' "$dir/n2/sweep.txt")" -eq 12 ] ||
  fail "not every invalid row (from every rank) is in rank 0's table"
grep -q "pruned:" "$dir/n2/pruned.txt" || fail "--exhaustive-limit 4 did not prune"

# Bad input found during the sweep (the cap below every configuration's static memory): every
# rank exits 2, rank 0 alone prints the line.
set +e
run 2 "${sweep[@]}" --mem-cap 1 > "$dir/bad.out" 2> "$dir/bad.err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--mem-cap 1 under mpirun: exit $rc, expected 2"
[ "$(grep -c '^braid: --mem-cap' "$dir/bad.err")" -eq 1 ] || fail "expected one --mem-cap line"
[ ! -s "$dir/bad.out" ] || fail "bad input wrote to stdout"

# Plain braid under a launcher would run the whole command once per rank: it refuses, exit 2,
# one line (from rank 0), nothing on stdout.
set +e
"$mpiexec" --allow-run-as-root --oversubscribe -n 2 "$braid" "${sweep[@]}" > "$dir/plain.out" \
  2> "$dir/plain.err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "plain braid under mpirun: exit $rc, expected 2"
[ "$(grep -c '^braid: started by an MPI launcher' "$dir/plain.err")" -eq 1 ] ||
  fail "expected one line naming braid-mpi from plain braid under mpirun"
[ ! -s "$dir/plain.out" ] || fail "plain braid under mpirun wrote to stdout"
echo "identical outputs for 1, 2 and 3 ranks"
