#!/usr/bin/env python3
"""Build the labelled document benchmark of `neardup scan` from this
machine's own files: a folder of documents and a list of labelled pairs.

Usage: python3 bench/corpus/scan_pairs.py OUT_DIR [--seed N] [--small]

Writes OUT_DIR/docs/** (the documents) and OUT_DIR/pairs.tsv (one labelled
pair a line: class, detail, path a, path b; paths relative to OUT_DIR,
the labels file's folder, as `neardup scan --labels` reads them).
Every label holds by construction:

  format     the same document in another format: a man page rendered by
             groff to text, HTML and PDF; an HTML manual page and the same
             page "saved as text" (all visible text, navigation included,
             by Python's html.parser -- not neardup's parser).
  revision   a document and an edited copy of it (detail: the edit rate,
             the share of its words changed, and the edit style). Edits are
             drawn from the text of an unrelated document: "scattered"
             replaces, deletes or inserts runs of 1-6 words all over the
             text; "block" replaces, deletes or inserts whole lines.
  sibling    two different pages or sections of one manual (detail: the
             manual): HTML manuals under /usr/share/doc, man pages of one
             suite (git, gcloud, openssl, llvm, perf, dpkg, systemd,
             pthread, Dpkg::*), each pair in one format.
  version    two versions of one licence (GPL-2/GPL-3, ...): reported, not
             a target either way.
  regenerated  one module's API reference made by two generators (libxslt's
             own HTML pages and its gtk-doc pages, from the same source
             comments, laid out differently): reported, not a target.
  unrelated  two documents from different sources.

No paraphrases: nothing on this machine holds a document rewritten by hand,
and a machine paraphrase would need a model the benchmark does not have.

Needs groff with its pdf and html devices (Debian package `groff`; without
it the man-page PDF and HTML copies are left out, and the script says so).
The same machine and seed give the same corpus; another machine's files
give another corpus, so results quote the counts they were measured on.
"""
import gzip
import html.parser
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

# One reader of this machine's files for both corpus builders.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real import read_text  # noqa: E402

SEED = 17
HTML_MANUALS = {
    # name: (folder, pages wanted)
    "nodejs-api": ("/usr/share/doc/nodejs/api", 14),
    "valgrind": ("/usr/share/doc/valgrind/html", 14),
    "libxslt": ("/usr/share/doc/libxslt1-dev/html", 12),
    "libxslt-api": ("/usr/share/doc/libxslt1-dev/html/html", 12),
    "libxslt-gtkdoc": ("/usr/share/doc/libxslt1-dev/gtk-doc/html/libxslt", 12),
    "libffi": ("/usr/share/doc/libffi8/html", 14),
    "exslt": ("/usr/share/doc/libxslt1-dev/html/EXSLT", 8),
}
MAN_SUITES = {
    # name: (section folder, file-name pattern, pages wanted)
    "git": ("man1", r"^git-[a-z-]+\.1\.gz$", 12),
    "gcloud": ("man1", r"^gcloud_[a-z0-9_-]+\.1\.gz$", 12),
    "openssl": ("man1", r"^openssl-[a-z0-9]+\.1ssl\.gz$", 10),
    "llvm": ("man1", r"^llvm-[a-z-]+(-\d+)?\.1\.gz$", 10),
    "perf": ("man1", r"^perf-[a-z-]+\.1\.gz$", 10),
    "dpkg": ("man1", r"^dpkg-[a-z-]+\.1\.gz$", 10),
    "systemd": ("man1", r"^systemd-[a-z-]+\.1\.gz$", 8),
    "pthread": ("man3", r"^pthread_[a-z_]+\.3\.gz$", 10),
    "dpkg-perl": ("man3", r"^Dpkg::[A-Za-z:]+\.3perl\.gz$", 10),
}
# Manuals of one project: never paired as unrelated.
PROJECT = {"libxslt-api": "libxslt", "libxslt-gtkdoc": "libxslt", "exslt": "libxslt", "dpkg-perl": "dpkg"}
MIN_WORDS, MAX_WORDS = 150, 12000
RATES = [0.01, 0.02, 0.05, 0.10, 0.20, 0.40]


class SavedAsText(html.parser.HTMLParser):
    """What a browser's "save as text" keeps: every visible text, the
    navigation, headers and footers included; scripts and styles dropped."""

    SKIP = {"script", "style", "head"}
    BLOCK = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "pre", "section", "table",
             "dt", "dd", "blockquote", "hr", "title"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self.skip, self.pre = [], 0, 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip += 1
        elif tag in self.BLOCK:
            self.out.append("\n")
        if tag == "pre":
            self.pre += 1

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skip:
            self.skip -= 1
        elif tag in self.BLOCK:
            self.out.append("\n")
        if tag == "pre" and self.pre:
            self.pre -= 1

    def handle_data(self, data):
        if not self.skip:
            self.out.append(data if self.pre else re.sub(r"\s+", " ", data))


def saved_as_text(raw):
    p = SavedAsText()
    p.feed(raw)
    p.close()
    lines = [line.strip() for line in "".join(p.out).split("\n")]
    return "\n".join(line for line in lines if line) + "\n"


def words(text):
    return len(text.split())


def groff(source, device):
    args = ["groff", "-t", "-man", "-T" + device] + (["-P-cbou"] if device == "utf8" else [])
    # groff's html device writes its images (grohtml-*.png) into the
    # current folder: run it in a scratch one.
    with tempfile.TemporaryDirectory() as scratch:
        try:
            r = subprocess.run(args, input=source, capture_output=True, timeout=60, cwd=scratch)
        except (OSError, subprocess.TimeoutExpired):
            return None
    return r.stdout if r.returncode == 0 and r.stdout else None


def man_source(path):
    try:
        src = gzip.open(path).read()
    except (OSError, EOFError):
        return None
    if src.lstrip().startswith(b".so "):
        return None  # a link to another page: the same document under another name
    return src


class Corpus:
    def __init__(self, out, rng):
        self.out, self.rng = out, rng
        self.docs = os.path.join(out, "docs")
        self.pairs = []
        self.texts = {}  # relative path -> plain text (for edits and donors)
        self.source = {}  # relative path -> source group (unrelated pairs avoid one group)

    def write(self, rel, data, text, group):
        path = os.path.join(self.docs, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
        self.texts[rel] = text
        self.source[rel] = PROJECT.get(group, group)
        return rel

    def pair(self, cls, detail, a, b):
        self.pairs.append((cls, detail, a, b))


def add_html_manuals(c, small):
    sibling_sets = {}
    for name, (folder, want) in HTML_MANUALS.items():
        if not os.path.isdir(folder):
            continue
        pages = []
        for f in sorted(os.listdir(folder)):
            p = os.path.join(folder, f)
            if f.endswith(".html") and os.path.isfile(p) and not os.path.islink(p):
                raw = read_text(p)
                text = saved_as_text(raw)
                if MIN_WORDS <= words(text) <= MAX_WORDS:
                    pages.append((f, raw, text))
        if len(pages) < 3:
            continue
        pages = c.rng.sample(pages, min(len(pages), want // 2 if small else want))
        rels = []
        for i, (f, raw, text) in enumerate(sorted(pages)):
            rel = c.write(f"html/{name}/{f}", raw, text, name)
            rels.append(rel)
            if i % 2 == 0:  # every other page is also saved as text
                copy = c.write(f"html/{name}/{f[:-5]}.saved.txt", text, text, name)
                c.pair("format", "html/saved-text", rel, copy)
        sibling_sets[name] = rels
    return sibling_sets


def add_man_pages(c, small):
    sibling_sets = {}
    have_pdf = groff(b".TH X 1\n.SH NAME\nx\n", "pdf") is not None
    have_html = groff(b".TH X 1\n.SH NAME\nx\n", "html") is not None
    if not (have_pdf and have_html):
        sys.stderr.write("groff has no pdf/html device (install the groff package): man-page PDF/HTML copies left out\n")
    for name, (section, pattern, want) in MAN_SUITES.items():
        folder = os.path.join("/usr/share/man", section)
        if not os.path.isdir(folder):
            continue
        names = sorted(f for f in os.listdir(folder) if re.match(pattern, f))
        c.rng.shuffle(names)
        pages = []
        for f in names:
            if len(pages) >= (want // 2 if small else want):
                break
            src = man_source(os.path.join(folder, f))
            text = groff(src, "utf8") if src else None
            if text is None:
                continue
            text = read_text(None, text)
            if not MIN_WORDS <= words(text) <= MAX_WORDS:
                continue
            if any(text == t for _, _, t in pages):
                continue
            pages.append((f, src, text))
        if len(pages) < 3:
            continue
        rels = []
        for i, (f, src, text) in enumerate(sorted(pages)):
            stem = re.sub(r"\.gz$", "", f).replace(":", "_")
            rel = c.write(f"man/{name}/{stem}.txt", text, text, name)
            rels.append(rel)
            # Every page in text; two of three also as HTML and PDF.
            if i % 3 == 2:
                continue
            copies = [rel]
            for device, ext in (("html", "html"), ("pdf", "pdf")):
                if (device == "pdf" and not have_pdf) or (device == "html" and not have_html):
                    continue
                data = groff(src, device)
                if data:
                    copies.append(c.write(f"man/{name}/{stem}.{ext}", data, text, name))
            for a in range(len(copies)):
                for b in range(a + 1, len(copies)):
                    fa, fb = (os.path.splitext(p)[1][1:] for p in (copies[a], copies[b]))
                    c.pair("format", f"man/{fa}-{fb}", copies[a], copies[b])
        sibling_sets[name] = rels
    return sibling_sets


def add_regenerated(c):
    """libxslt's API reference as its own HTML and as gtk-doc, page by page."""
    own, gtk = HTML_MANUALS["libxslt-api"][0], HTML_MANUALS["libxslt-gtkdoc"][0]
    if not (os.path.isdir(own) and os.path.isdir(gtk)):
        return
    for f in sorted(os.listdir(own)):
        if not (f.startswith("libxslt-") and f.endswith(".html") and os.path.isfile(os.path.join(gtk, f))):
            continue
        rels = []
        for name, folder in (("libxslt-api", own), ("libxslt-gtkdoc", gtk)):
            rel = f"html/{name}/{f}"
            if rel not in c.texts:
                raw = read_text(os.path.join(folder, f))
                c.write(rel, raw, saved_as_text(raw), name)
            rels.append(rel)
        c.pair("regenerated", "libxslt api/gtk-doc", rels[0], rels[1])


def add_licences(c):
    folder = "/usr/share/common-licenses"
    rels = {}
    if not os.path.isdir(folder):
        return rels
    for f in sorted(os.listdir(folder)):
        p = os.path.join(folder, f)
        if os.path.isfile(p) and not os.path.islink(p):
            text = read_text(p)
            rels[f] = c.write(f"licences/{f}.txt", text, text, "licence")
    for a, b in [("GPL-2", "GPL-3"), ("LGPL-2", "LGPL-2.1"), ("LGPL-2.1", "LGPL-3"), ("GFDL-1.2", "GFDL-1.3"),
                 ("MPL-1.1", "MPL-2.0"), ("GPL-1", "GPL-2")]:
        if a in rels and b in rels:
            c.pair("version", "licence", rels[a], rels[b])
    return rels


def edit(text, rate, style, donor, rng):
    """`text` with about `rate` of its words changed, new words from `donor`."""
    donor_words = donor.split() or ["edit"]
    donor_lines = [line for line in donor.split("\n") if line.strip()] or ["edit"]
    lines = text.split("\n")
    total = words(text)
    budget = max(1, round(rate * total))
    changed = 0
    while changed < budget:
        if style == "block":
            i = rng.randrange(len(lines))
            op = rng.choice(("replace", "delete", "insert"))
            n = words(lines[i])
            if op == "delete" or op == "replace":
                if n == 0 or n > budget - changed + 8:
                    continue  # keep near the budget: skip lines far longer than what is left
                new = rng.choice(donor_lines) if op == "replace" else None
                lines[i:i + 1] = [new] if new is not None else []
                changed += max(n, words(new) if new else 0)
            else:
                new = rng.choice(donor_lines)
                lines.insert(i, new)
                changed += words(new)
            if not lines:
                lines = [rng.choice(donor_lines)]
        else:
            i = rng.randrange(len(lines))
            ws = lines[i].split()
            span = min(6, 1 + int(rng.expovariate(0.5)))
            op = rng.choice(("replace", "delete", "insert"))
            if not ws and op != "insert":
                continue
            j = rng.randrange(len(ws) + 1 if op == "insert" else len(ws))
            new = [rng.choice(donor_words) for _ in range(span)]
            if op == "replace":
                ws[j:j + span] = new
            elif op == "delete":
                span = len(ws[j:j + span])
                del ws[j:j + span]
            else:
                ws[j:j] = new
            lines[i] = " ".join(ws)
            changed += span
    return "\n".join(lines)


def add_revisions(c, bases):
    donors = list(c.texts)
    for k, rel in enumerate(bases):
        text = c.texts[rel]
        style = "scattered" if k % 2 == 0 else "block"
        for rate in RATES:
            donor_rel = c.rng.choice([d for d in donors if c.source[d] != c.source[rel]])
            revised = edit(text, rate, style, c.texts[donor_rel], c.rng)
            stem = os.path.splitext(rel)[0].replace("/", "_")
            out = c.write(f"revisions/{stem}.rev{int(rate * 100):02d}.txt", revised, revised, c.source[rel])
            c.pair("revision", f"{rate:.2f} {style}", rel, out)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else SEED
    small = "--small" in sys.argv
    rng = random.Random(seed)
    if os.path.isdir(os.path.join(out, "docs")):
        shutil.rmtree(os.path.join(out, "docs"))
    c = Corpus(out, rng)
    siblings = add_html_manuals(c, small)
    siblings.update(add_man_pages(c, small))
    licences = add_licences(c)
    add_regenerated(c)

    # Sibling pairs: up to 16 per manual (all pairs of a small one), each
    # pair in one format (the originals: HTML pages, man pages as text).
    for name, rels in sorted(siblings.items()):
        all_pairs = [(a, b) for i, a in enumerate(rels) for b in rels[i + 1:]]
        for a, b in rng.sample(all_pairs, min(len(all_pairs), 8 if small else 16)):
            c.pair("sibling", name, a, b)

    # Revisions of licences, man pages and HTML pages (as their text).
    bases = [licences[n] for n in ("GPL-3", "Apache-2.0", "MPL-2.0", "Artistic", "GFDL-1.3") if n in licences]
    for name, rels in sorted(siblings.items()):
        bases.extend(rng.sample(rels, min(len(rels), 1 if small else 2)))
    add_revisions(c, bases)

    # Unrelated pairs: documents of different sources, originals only.
    originals = [r for r in c.texts if not r.startswith("revisions/") and not r.endswith(".saved.txt")
                 and not r.endswith((".pdf", ".html")) or r.startswith("html/") and r.endswith(".html")]
    seen = set()
    want = 100 if small else 240
    while len(seen) < want:
        a, b = sorted(rng.sample(originals, 2))
        if c.source[a] != c.source[b] and (a, b) not in seen:
            seen.add((a, b))
            c.pair("unrelated", f"{c.source[a]}/{c.source[b]}", a, b)

    with open(os.path.join(out, "pairs.tsv"), "w", encoding="utf-8") as f:
        f.write("# class\tdetail\ta\tb  (paths relative to this file's folder; built by bench/corpus/scan_pairs.py)\n")
        for cls, detail, a, b in c.pairs:
            f.write(f"{cls}\t{detail}\tdocs/{a}\tdocs/{b}\n")
    counts = {}
    for cls, *_ in c.pairs:
        counts[cls] = counts.get(cls, 0) + 1
    sys.stderr.write(f"wrote {len(c.texts)} documents and {len(c.pairs)} pairs {counts} to {out}\n")


if __name__ == "__main__":
    main()
