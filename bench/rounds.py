"""What the connection-rate scripts' reports share (tcp-crr-vs-peers.sh, tcp-cc-vs-netperf.sh),
imported by their Python with `sys.path.insert(0, "bench")` (lib.sh runs them from the
repository root)."""
import os
from statistics import median


def per_tx(out, step, rates, secs):
    """CPU per transaction measured the same way for every tool, µs, one figure a round: the
    whole machine's busy ticks from /proc/stat around each run (both ends are on this host;
    OUT/STEP.ROUND.cpu, lib.sh's cpu_ticks before and after), over the transactions the run
    made (the tool's rate x the test's length), the client's command alone in the window. Each
    tool's own service demand is measured its own way (netperf -c -C from its own CPU
    sampling): this is a check of it."""
    hz = os.sysconf("SC_CLK_TCK")
    def ticks(r):
        b0, b1 = map(float, open(f"{out}/{step}.{r}.cpu").read().split())
        return (b1 - b0) / hz
    return [ticks(r) / (rate * float(secs)) * 1e6 for r, rate in enumerate(rates, 1)]


def paired(a, b, lower=False):
    """The median of each round's a/b, which a slow round or a drift over the rounds sways less
    than the ratio of medians, with how many rounds a led (was lower, for a cost)."""
    r = [x / y for x, y in zip(a, b) if y]
    led = sum((x < 1) if lower else (x > 1) for x in r)
    return f"{median(r):.3f} ({'lower' if lower else 'ahead'} in {led} of {len(r)})"
