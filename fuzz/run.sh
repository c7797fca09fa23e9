#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), one after another,
# with debug assertions (overflow checks) on. Needs a nightly toolchain and
# cargo-fuzz (`cargo install cargo-fuzz`).
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# A target is a one-line wrapper in fuzz/fuzz_targets/<target>.rs; its body
# and invariants are in crates/netrig-fuzz/src/<target>.rs, so a crash
# found here can be debugged, fixed and tested on stable.
#
# Each target's corpus grows in fuzz/corpus/<target> (not committed), seeded
# from fuzz/seeds/<target> (committed; regenerate with `python3 mkseeds.py`,
# and agent_session's with `NETRIG_WRITE_SEEDS=1 cargo test -p netrig-fuzz
# --test seeds`) and fuzz/regressions/<target> (committed: the minimized
# input of every crash found and fixed). libFuzzer writes only into the
# first directory, fuzz/corpus/<target>: the committed ones stay as they are.
#
# A crash leaves its input in fuzz/artifacts/<target>/; replay it with
# `cargo +nightly fuzz run -a <target> fuzz/artifacts/<target>/crash-…`,
# minimize it with `cargo +nightly fuzz tmin -a <target> <crash>`, fix the
# code, and commit the minimized input as fuzz/regressions/<target>/<name>:
# `cargo test -p netrig-fuzz` (crates/netrig-fuzz/tests/replay.rs) replays
# every seed and regression in CI, on stable. After a run,
# `NETRIG_FUZZ_CORPUS=1 cargo test -p netrig-fuzz --test replay` replays the
# grown corpus too.
#
# Logs go to fuzz/artifacts/logs/<target>.log; a summary line per target is
# printed at the end. Exits non-zero if any target failed.
set -uo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
mkdir -p artifacts/logs
cargo +nightly fuzz build -a || exit 1

failed=()
summary=()
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  seeds=()
  for d in "seeds/$t" "regressions/$t"; do
    [ -d "$d" ] && seeds+=("$d")
  done
  echo "== $t: ${secs} s"
  log="artifacts/logs/$t.log"
  if cargo +nightly fuzz run -a "$t" "corpus/$t" "${seeds[@]}" -- \
      -max_total_time="$secs" -print_final_stats=1 -max_len=65536 >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$t")
    grep -E "panicked|ERROR|SUMMARY|Test unit written" "$log" | head -5
  fi
  runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  took=$(grep -oE '^Done [0-9]+ runs in [0-9]+ second' "$log" | grep -oE '[0-9]+ second' | grep -oE '[0-9]+')
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  files=$(find "corpus/$t" -type f | wc -l)
  line="$t: $status, ${runs:-?} executions in ${took:-less than $secs} s, ${cov:-cov ?}, corpus ${files} files"
  echo "$line"
  summary+=("$line")
done

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}"
  exit 1
fi
