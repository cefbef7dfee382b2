#!/usr/bin/env python3
"""Build a real-text corpus from documentation that ships with Debian.

Usage: python3 bench/corpus/real.py OUT.jsonl [--max-man N] [--dense | --translated]

Sources, in this order (ids are the file paths):
  * /usr/share/common-licenses/*           licence texts (GPL, Apache, ...)
  * /usr/share/doc/*/copyright             per-package copyright files: many quote
                                            the same licences with small changes
  * /usr/share/doc/**/*.md, README*, NEWS*  project documentation (uncompressed ones)
  * /usr/share/man/man*/*.gz               English man pages, troff markup stripped
                                            (several pages exist in near-identical
                                            versions, e.g. for related commands)

With --dense (the templated corpus of bench/results/accuracy.md, ~35,000
documents): every man page in every language (no --max-man cap), the HTML
pages under /usr/share/doc, and a spread sample of up to --max-api (20,000)
pages of generated API documentation (rustdoc HTML of the Rust standard
library shipped with the toolchain: thousands of near-identical intrinsic
and trait-impl pages), HTML reduced to its text.

With --translated: only the man pages translated into other languages
(/usr/share/man/LANG/man*/: German, French, Spanish, Polish, Russian, ...,
~1,000 pages here) — text in other scripts and with accents, for measuring
the normalizer on more than English.

The corpus is what `neardup eval` measures recall on; nothing in it is
synthetic. Files that are not valid UTF-8 are decoded as Latin-1.
"""
import glob
import gzip
import html.parser
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

class _Text(html.parser.HTMLParser):
    SKIP = {"script", "style"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self.skip = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip += 1
        elif tag in ("p", "div", "br", "li", "h1", "h2", "h3", "h4", "tr", "pre", "section"):
            self.out.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skip:
            self.skip -= 1

    def handle_data(self, data):
        if not self.skip:
            self.out.append(data)


def html_text(raw):
    p = _Text()
    p.feed(raw)
    p.close()
    return re.sub(r"[ \t]+", " ", "".join(p.out)).strip()


def api_pages(limit):
    """A spread sample of rustdoc pages from the first toolchain that has them."""
    roots = sorted(glob.glob(os.path.expanduser("~/.rustup/toolchains/*/share/doc/rust/html")))
    roots += sorted(glob.glob("/usr/share/doc/rust*/html"))
    for root in roots:
        pages = []
        for crate in ("std", "core", "alloc"):
            for dirpath, _, files in os.walk(os.path.join(root, crate)):
                pages.extend(os.path.join(dirpath, f) for f in files if f.endswith(".html"))
        if not pages:
            continue
        pages.sort()
        step = max(1, len(pages) // limit)
        return pages[::step][:limit]
    return []


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_path = sys.argv[1]
    dense = "--dense" in sys.argv
    translated = "--translated" in sys.argv
    if dense and translated:
        sys.exit("--dense and --translated are two different corpora: give one")
    max_man = 10**9 if dense or translated else 6000
    if "--max-man" in sys.argv:
        max_man = int(sys.argv[sys.argv.index("--max-man") + 1])
    max_api = 20000
    if "--max-api" in sys.argv:
        max_api = int(sys.argv[sys.argv.index("--max-api") + 1])
    docs = []
    lic = "/usr/share/common-licenses"
    if os.path.isdir(lic) and not translated:
        for name in sorted(os.listdir(lic)):
            p = os.path.join(lic, name)
            if os.path.isfile(p):
                docs.append((p, read_text(p)))
    doc_root = "/usr/share/doc"
    if os.path.isdir(doc_root) and not translated:
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
    if dense and os.path.isdir(doc_root):
        for root, _, files in sorted(os.walk(doc_root)):
            for f in sorted(files):
                p = os.path.join(root, f)
                if f.endswith(".html") and os.path.isfile(p) and not os.path.islink(p):
                    text = html_text(read_text(p))
                    if len(text) >= 200:
                        docs.append((p, text))
    man_root = "/usr/share/man"
    count = 0
    if os.path.isdir(man_root):
        sections = []
        for sec in sorted(os.listdir(man_root)):
            d = os.path.join(man_root, sec)
            if sec.startswith("man") and os.path.isdir(d):
                if not translated:
                    sections.append(d)
            elif (dense or translated) and os.path.isdir(d):  # a language: DIR/manN/
                sections.extend(sorted(glob.glob(os.path.join(d, "man*"))))
        for d in sections:
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
    if dense:
        for p in api_pages(max_api):
            text = html_text(read_text(p))
            if len(text) >= 200:
                docs.append((p, text))
    seen = set()
    with open(out_path, "w", encoding="utf-8") as out:
        for i, (path, text) in enumerate(docs):
            if path in seen:  # an HTML README reached by two of the walks above
                continue
            seen.add(path)
            out.write(json.dumps({"id": path, "text": text}, ensure_ascii=False) + "\n")
    sys.stderr.write(f"wrote {len(docs)} documents to {out_path}\n")

if __name__ == "__main__":
    main()
