#!/usr/bin/env bash
# Makes a sweep report, a comparison report and a two-flow time-series
# report on loopback, and a screenshot of each in headless Chromium, so a
# person can look at the pictures (not a test).
#
#   bench/report-screenshots.sh [OUT_DIR=/tmp/netrig-reports]
#
# Needs: Debian's chromium (apt-get install chromium), a release build (built here).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/netrig-reports}
mkdir -p "$OUT"
cargo build --release -q
N=target/release/netrig
$N tcp-stream -l 1 -m 1K,8K,64K --iterations 3 --html "$OUT/sweep.html" > /dev/null
$N tcp-stream -l 5 -i 0.25 -P 2 --html "$OUT/two-flows.html" > /dev/null
cat > "$OUT/compare.toml" <<'PLAN'
name = "compare"
[[test]]
kind = "tcp-rr"
args = ["-l", "1", "--nodelay"]
sweep = { "--burst" = "1,8" }
[iterations]
max = 3
min = 3
[[arm]]
name = "1-flow"
[[arm]]
name = "4-flows"
args = ["-P", "4"]
PLAN
$N run "$OUT/compare.toml" --html "$OUT/compare.html" > /dev/null
for page in sweep two-flows compare; do
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d)" --window-size=1200,3000 \
    --screenshot="$OUT/$page.png" "file://$OUT/$page.html" 2>/dev/null
  echo "$OUT/$page.html  $OUT/$page.png"
done
