#!/usr/bin/env bash
# Builds the Debian package of netrig (cargo-deb, metadata in crates/netrig/Cargo.toml) and shows
# what is in it: the files, the control fields, and lintian's findings when lintian is installed.
# Needs cargo-deb (`cargo install --locked cargo-deb`). Honours CARGO_TARGET_DIR.
# NETRIG_DEB_BINARY=FILE packages FILE, a netrig built already, instead of building the release
# (staged in a scratch target directory, so the tree's own release build is left alone). CI
# packages the debug binary its tests built: its checks are of the package's files, its unit and
# that its binary runs, not of its speed, and an optimised build of the workspace beside the
# tests' took 5 to 11 minutes of CI's 35 on 2 cores. A release for users is built without it.
# Usage: packaging/build-deb.sh           -> prints the .deb's path last
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
out=$target/debian
if [ -n "${NETRIG_DEB_BINARY:-}" ]; then
  [ -x "$NETRIG_DEB_BINARY" ] || { echo "build-deb: NETRIG_DEB_BINARY=$NETRIG_DEB_BINARY is not an executable" >&2; exit 1; }
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/release"
  cp "$NETRIG_DEB_BINARY" "$stage/release/netrig"
  export CARGO_TARGET_DIR=$stage
  target=$stage
else
  cargo build --release --locked -p netrig
fi
gen=$target/release/packaging

# Man pages and completions from the binary just built (the assets take them from here).
rm -rf "$gen"
"$target/release/netrig" man -o "$gen/man" >/dev/null
gzip -9n "$gen"/man/*.1     # Debian policy: man pages compressed
mkdir -p "$gen/completions"
"$target/release/netrig" completions bash >"$gen/completions/netrig.bash"
"$target/release/netrig" completions zsh >"$gen/completions/_netrig"
"$target/release/netrig" completions fish >"$gen/completions/netrig.fish"

mkdir -p "$out"
deb=$(cargo deb -p netrig --no-build --locked --strip -o "$out" | tail -n 1)
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
