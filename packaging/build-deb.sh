#!/usr/bin/env bash
# Builds the Debian package of netrig (cargo-deb, metadata in crates/netrig/Cargo.toml) and shows
# what is in it: the files, the control fields, and lintian's findings when lintian is installed.
# Needs cargo-deb (`cargo install --locked cargo-deb`). Honours CARGO_TARGET_DIR.
# Usage: packaging/build-deb.sh           -> prints the .deb's path last
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
gen=$target/release/packaging

cargo build --release --locked -p netrig
# Man pages and completions from the binary just built (the assets take them from here).
rm -rf "$gen"
"$target/release/netrig" man -o "$gen/man" >/dev/null
gzip -9n "$gen"/man/*.1     # Debian policy: man pages compressed
mkdir -p "$gen/completions"
"$target/release/netrig" completions bash >"$gen/completions/netrig.bash"
"$target/release/netrig" completions zsh >"$gen/completions/_netrig"
"$target/release/netrig" completions fish >"$gen/completions/netrig.fish"

deb=$(cargo deb -p netrig --no-build --locked --strip | tail -n 1)
echo "== dpkg-deb -I $deb"
dpkg-deb -I "$deb"
echo "== dpkg-deb -c $deb"
dpkg-deb -c "$deb"
if command -v lintian >/dev/null; then
  echo "== lintian"
  # Exits non-zero on errors only; warnings are shown.
  lintian --info --suppress-tags-from-file packaging/lintian-suppress "$deb"
fi
echo "$deb"
