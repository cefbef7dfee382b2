#!/usr/bin/env python3
"""Build a real-text corpus from documentation that ships with Debian.

Usage: python3 bench/corpus/real.py OUT.jsonl [--max-man N]

Sources, in this order (ids are the file paths):
  * /usr/share/common-licenses/*           licence texts (GPL, Apache, ...)
  * /usr/share/doc/*/copyright             per-package copyright files: many quote
                                            the same licences with small changes
  * /usr/share/doc/**/*.md, README*, NEWS*  project documentation (uncompressed ones)
  * /usr/share/man/man*/*.gz               English man pages, troff markup stripped
                                            (several pages exist in near-identical
                                            versions, e.g. for related commands)

The corpus is what `neardup eval` measures recall on; nothing in it is
synthetic. Files that are not valid UTF-8 are decoded as Latin-1.
"""
import gzip
import json
import os
import re
import sys

def read_text(path, raw=None):
    data = raw if raw is not None else open(path, "rb").read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")

ESCAPES = re.compile(r"\\f[BIRP]|\\f\(..|\\\(..|\\[&|^%e]|\\-")

def strip_troff(text):
    out = []
    for line in text.splitlines():
        if line.startswith(".") or line.startswith("'"):
            # Keep the words of section headings and inline macros' arguments.
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[0] in (".SH", ".SS", ".B", ".I", ".BR", ".IR", ".IP", ".TP"):
                out.append(parts[1].replace('"', ""))
            continue
        out.append(ESCAPES.sub("", line))
    return "\n".join(out)

def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_path = sys.argv[1]
    max_man = 6000
    if "--max-man" in sys.argv:
        max_man = int(sys.argv[sys.argv.index("--max-man") + 1])
    docs = []
    lic = "/usr/share/common-licenses"
    if os.path.isdir(lic):
        for name in sorted(os.listdir(lic)):
            p = os.path.join(lic, name)
            if os.path.isfile(p):
                docs.append((p, read_text(p)))
    doc_root = "/usr/share/doc"
    if os.path.isdir(doc_root):
        for pkg in sorted(os.listdir(doc_root)):
            p = os.path.join(doc_root, pkg, "copyright")
            if os.path.isfile(p):
                docs.append((p, read_text(p)))
        for root, _, files in sorted(os.walk(doc_root)):
            for f in sorted(files):
                if f.endswith(".md") or f.startswith(("README", "NEWS")) and not f.endswith(".gz"):
                    p = os.path.join(root, f)
                    if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) < 2_000_000:
                        docs.append((p, read_text(p)))
    man_root = "/usr/share/man"
    count = 0
    if os.path.isdir(man_root):
        for sec in sorted(os.listdir(man_root)):
            d = os.path.join(man_root, sec)
            if not sec.startswith("man") or not os.path.isdir(d):
                continue
            for f in sorted(os.listdir(d)):
                if count >= max_man:
                    break
                p = os.path.join(d, f)
                if not f.endswith(".gz") or os.path.islink(p):
                    continue
                try:
                    text = strip_troff(read_text(p, gzip.open(p).read()))
                except (OSError, EOFError):
                    continue
                if text.strip().startswith(".so ") or len(text) < 200:
                    continue
                docs.append((p, text))
                count += 1
    with open(out_path, "w", encoding="utf-8") as out:
        for i, (path, text) in enumerate(docs):
            out.write(json.dumps({"id": path, "text": text}, ensure_ascii=False) + "\n")
    sys.stderr.write(f"wrote {len(docs)} documents to {out_path}\n")

if __name__ == "__main__":
    main()
