#!/usr/bin/env bash
# Writes the release's checksums and, given a key, their signature.
#
#   bash scripts/release-sign.sh [--key SSH_PRIVATE_KEY] [--binary PATH] [--allow-dirty]
#
# - release/SHA256SUMS: `sha256sum` lines (path from the repository root)
#   for every artifact release/manifest.toml lists, in path order (but
#   release/SHA256SUMS and its signature).
# - with --key: release/SHA256SUMS.sig, an SSH signature of that file
#   (`ssh-keygen -Y sign`, namespace `neardup-release`); verify with
#   `bash scripts/release-verify.sh --pubkey KEY.pub`.
# - with --binary PATH: PATH.sha256 beside the binary (its checksum, named
#   by its file name), signed as PATH.sha256.sig with --key; verify with
#   `--binary PATH`.
#
# It refuses when a listed artifact has uncommitted changes (the checksums
# must be those a clean clone has), unless --allow-dirty. Run it from a
# clean checkout of the commit being released, after
# `cargo test -p neardup --test release_docs` passes, then commit
# release/SHA256SUMS (and the signature). It does not create a tag.
set -euo pipefail

cd "$(dirname "$0")/.."
NAMESPACE=neardup-release
key=""
binary=""
allow_dirty=0
while [ $# -gt 0 ]; do
    case "$1" in
        --key) key="$2"; shift 2 ;;
        --binary) binary="$2"; shift 2 ;;
        --allow-dirty) allow_dirty=1; shift ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "release-sign: unknown argument $1" >&2; exit 2 ;;
    esac
done

# The manifest's paths, in order, but the checksum file and its signature
# (which cannot list themselves); each must exist.
mapfile -t paths < <(sed -n 's/^path = "\(.*\)"$/\1/p' release/manifest.toml | LC_ALL=C sort -u |
    grep -v -x -e 'release/SHA256SUMS' -e 'release/SHA256SUMS.sig')
if [ "${#paths[@]}" -eq 0 ]; then
    echo "release-sign: release/manifest.toml lists no artifact" >&2
    exit 1
fi
for p in "${paths[@]}"; do
    if [ ! -f "$p" ]; then
        echo "release-sign: $p is listed in release/manifest.toml but missing" >&2
        exit 1
    fi
done
# The checksums must be those of the committed files: a clean clone is
# what release-verify.sh checks.
if [ "$allow_dirty" = 0 ] && git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    dirty=$(git status --porcelain -- "${paths[@]}")
    if [ -n "$dirty" ]; then
        echo "release-sign: listed artifacts differ from the commit (commit them, or --allow-dirty):" >&2
        echo "$dirty" >&2
        exit 1
    fi
fi
sha256sum -- "${paths[@]}" > release/SHA256SUMS.tmp
mv release/SHA256SUMS.tmp release/SHA256SUMS
echo "wrote release/SHA256SUMS (${#paths[@]} artifacts)"

if [ -n "$binary" ]; then
    (cd "$(dirname "$binary")" && sha256sum -- "$(basename "$binary")") > "$binary.sha256"
    echo "wrote $binary.sha256"
fi

if [ -n "$key" ]; then
    rm -f release/SHA256SUMS.sig
    ssh-keygen -q -Y sign -f "$key" -n "$NAMESPACE" release/SHA256SUMS
    echo "wrote release/SHA256SUMS.sig"
    if [ -n "$binary" ]; then
        rm -f "$binary.sha256.sig"
        ssh-keygen -q -Y sign -f "$key" -n "$NAMESPACE" "$binary.sha256"
        echo "wrote $binary.sha256.sig"
    fi
fi
