#!/usr/bin/env python3
"""Builds the `neardup scan` benchmark corpus: COUNT mixed-format files made by
copying and perturbing the committed fixtures (tests/fixtures/docs).

Usage: make_corpus.py OUT_DIR [COUNT=300] [SEED=7]

Every file has distinct bytes (so each one is really parsed on a cold cache):
text formats (txt, md, html) get a numbered sentence and, for two thirds of
them, a few words replaced at random (seeded), giving identical, similar and
different pairs; PDFs get a trailing comment after %%EOF (same text, new
bytes); DOCX files get one extra numbered paragraph.
"""
import os
import random
import re
import sys
import zipfile

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "fixtures", "docs")
out = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 300
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 7)
os.makedirs(out, exist_ok=True)
fixtures = sorted(os.listdir(root))
WORDS = "alpha beta gamma delta shingle window harbour orchestra apiary sediment".split()


def perturb_text(text, i):
    if i % 3 == 0:
        return text + f"\n\nCopy number {i}.\n"
    words = text.split(" ")
    for _ in range(rng.randint(5, 60)):
        words[rng.randrange(len(words))] = rng.choice(WORDS)
    return " ".join(words) + f"\n\nVariant number {i}.\n"


for i in range(count):
    name = fixtures[i % len(fixtures)]
    stem, ext = os.path.splitext(name)
    dest = os.path.join(out, f"{i:04d}-{stem}{ext}")
    src = os.path.join(root, name)
    if ext in (".txt", ".md", ".html"):
        text = open(src, encoding="utf-8").read()
        if ext == ".html":
            body = re.search(r"<body[^>]*>(.*)</body>", text, re.S)
            inner = perturb_text(body.group(1), i) if body else text
            text = text[: body.start(1)] + inner + text[body.end(1):] if body else text
        else:
            text = perturb_text(text, i)
        open(dest, "w", encoding="utf-8").write(text)
    elif ext == ".pdf":
        open(dest, "wb").write(open(src, "rb").read() + f"\n%neardup-bench-{i}\n".encode())
    elif ext == ".docx":
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
            for item in zin.infolist():
                data = zin.read(item.filename)
                if item.filename == "word/document.xml":
                    para = f"<w:p><w:r><w:t>Copy number {i}.</w:t></w:r></w:p>".encode()
                    data = data.replace(b"</w:body>", para + b"</w:body>", 1) if b"<w:sectPr" not in data \
                        else data.replace(b"<w:sectPr", para + b"<w:sectPr", 1)
                zout.writestr(item, data)
print(f"wrote {count} files to {out}")
