#!/usr/bin/env bash
# Builds the Debian package and checks it as far as a machine without a running systemd can:
#   - the files operators expect are in it (binary, man pages, completions, docs, the unit);
#   - it has no maintainer scripts (installing starts and enables nothing);
#   - lintian finds no error (warnings are shown; packaging/lintian-suppress lists the accepted ones);
#   - the unit's sandboxing keeps systemd's exposure score low (systemd-analyze security), and the
#     unit as installed verifies (systemd-analyze verify, against the package unpacked in a root);
#   - the packaged binary runs: `netrig serve` starts, a client runs a test against it.
# Needs cargo-deb, dpkg-deb, lintian and systemd-analyze (.ci/run installs them). Honours
# CARGO_TARGET_DIR. Exits non-zero on the first failed check, naming it.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "check-deb: FAILED: $*" >&2; exit 1; }

deb=$(packaging/build-deb.sh | tail -n 1)
[ -f "$deb" ] || fail "no package built"
echo "== checking $deb"

contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/netrig ./usr/share/man/man1/netrig.1.gz ./usr/share/man/man1/netrig-serve.1.gz \
    ./usr/share/bash-completion/completions/netrig ./usr/share/zsh/vendor-completions/_netrig \
    ./usr/share/fish/vendor_completions.d/netrig.fish ./usr/share/doc/netrig/copyright \
    ./usr/lib/systemd/system/netrig.service; do
  grep -q " $f\$" <<<"$contents" || fail "$f is not in the package"
done
echo "files: ok"

ctrl=$(dpkg-deb --ctrl-tarfile "$deb" | tar -t | sed 's|^\./||' | grep -v '^$' | sort | tr '\n' ' ')
for f in preinst postinst prerm postrm config triggers; do
  [[ " $ctrl" != *" $f "* ]] || fail "the package has a $f script ($ctrl)"
done
echo "no maintainer scripts: ok (installing enables and starts nothing)"
[ -n "$(dpkg-deb -f "$deb" Depends)" ] || fail "no Depends field (shlibdeps did not run)"

lintian --suppress-tags-from-file packaging/lintian-suppress "$deb" >/tmp/check-deb-lintian.txt 2>&1 || true
if grep -q '^E:' /tmp/check-deb-lintian.txt; then
  cat /tmp/check-deb-lintian.txt
  fail "lintian found errors"
fi
echo "lintian: no errors ($(grep -c '^W:' /tmp/check-deb-lintian.txt || true) warnings)"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$deb" "$root"
unit=$root/usr/lib/systemd/system/netrig.service
# 1.6 when written; "OK" in systemd's own words is below 5. Fail well before that.
systemd-analyze security --offline=true --threshold=25 "$unit" | tail -n 1
score=$(systemd-analyze security --offline=true "$unit" 2>/dev/null | grep -oE 'exposure level for [^:]+: [0-9.]+' | grep -oE '[0-9.]+$')
awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }' || fail "the unit's exposure score is $score, over 2.5"
# The unit as packaged, its ExecStart pointed at the unpacked binary (verify checks that it is
# executable); --man=no: the man page is in the package, not installed on this machine.
mkdir -p "$root/check"
sed "s|^ExecStart=/usr/bin/netrig|ExecStart=$root/usr/bin/netrig|" "$unit" >"$root/check/netrig.service"
verify=$(systemd-analyze verify --man=no "$root/check/netrig.service" 2>&1 || true)
[ -z "$verify" ] || fail "systemd-analyze verify: $verify"
echo "unit: exposure $score, verifies"

bin=$root/usr/bin/netrig
port=$(( 20000 + RANDOM % 20000 ))
"$bin" serve -q -p "$port" --bind 127.0.0.1 &
agent=$!
trap 'kill $agent 2>/dev/null; rm -rf "$root"' EXIT
for _ in $(seq 50); do "$bin" tcp-rr -H 127.0.0.1 -p "$port" -l 0.2 >/dev/null 2>&1 && break; sleep 0.1; done
"$bin" tcp-stream -H 127.0.0.1 -p "$port" -l 0.5 --json | grep -q '"bytes"' || fail "the packaged binary did not run a test"
echo "packaged binary: serves and runs a test"
echo "check-deb: ok"
