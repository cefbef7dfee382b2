//! A bound on how deeply nested the markup handed to the HTML parser can
//! be. html5ever's tree builder walks its stack of open elements on many
//! start tags (a `<div>` asks whether a `<p>` is open "in button scope"),
//! so markup nested `n` deep costs `O(n²)`: 100,000 nested `<div>`s took
//! 32–47 s. No page a person reads nests hundreds of elements deep, so
//! before parsing, one linear pass over the source estimates the nesting
//! depth; a document within [`MAX_DEPTH`] is parsed as it is (every
//! ordinary page: the output is unchanged), and in one past it the tags
//! nested deeper are dropped and their text kept, so the parser's stack
//! stays within the bound and its work within `O(n · MAX_DEPTH)`.
//!
//! The pass is a tag lexer, not a parser: it knows comments, doctypes and
//! processing instructions, quoted attribute values, void and self-closed
//! elements, and the elements whose content is raw text (`<script>`,
//! `<style>`, …); it does not count the elements a later sibling closes
//! implicitly (`<p>`, `<li>`, `<td>`, …), which cannot nest in themselves.
//! Its depth is an estimate of the tree's, which is all the bound needs.

use std::borrow::Cow;

/// Elements nested deeper than this (by the lexer's count) lose their tags.
pub(crate) const MAX_DEPTH: usize = 512;

/// Elements without content: never pushed.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta", "param", "source", "track",
    "wbr", "basefont", "bgsound", "frame", "image",
];

/// Elements a later sibling (or the parent's end) closes implicitly: they
/// cannot nest in themselves, so they are not counted.
const IMPLIED: &[&str] = &[
    "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "thead", "tbody", "tfoot", "colgroup", "caption",
    "rb", "rt", "rtc", "rp",
];

/// Elements whose content is text up to their own end tag.
const RAW: &[&str] = &["script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "noscript"];

/// `source` with the tags nested deeper than [`MAX_DEPTH`] removed (an
/// element for which `breaks_line` is true leaves a line break, so its text
/// stays apart); borrowed as it is when nothing nests that deep.
pub(crate) fn cap_depth<'a>(source: &'a str, breaks_line: &dyn Fn(&str) -> bool) -> Cow<'a, str> {
    if max_depth(source) <= MAX_DEPTH {
        return Cow::Borrowed(source);
    }
    let mut out = String::with_capacity(source.len());
    let mut copied = 0;
    walk(source, |tag| {
        if tag.depth > MAX_DEPTH {
            out.push_str(&source[copied..tag.start]);
            if breaks_line(tag.name) {
                out.push('\n');
            }
            copied = tag.end;
        }
    });
    out.push_str(&source[copied..]);
    Cow::Owned(out)
}

/// The deepest nesting the lexer counts in `source`.
pub(crate) fn max_depth(source: &str) -> usize {
    let mut deepest = 0;
    walk(source, |tag| deepest = deepest.max(tag.depth));
    deepest
}

/// A start or end tag of a counted element.
struct Tag<'a> {
    /// Byte range of the whole tag, `<` to `>` included.
    start: usize,
    end: usize,
    /// Lowercase ASCII name.
    name: &'a str,
    /// Depth of the element (1: outermost counted element).
    depth: usize,
}

/// An open element: its name's hash (an estimate needs no more) and
/// whether it is inside `<svg>` or `<math>`, where `/>` closes a tag.
#[derive(Clone, Copy)]
struct Open {
    name: u64,
    foreign: bool,
}

/// Calls `f` with every start and end tag of a counted element, in order,
/// with the element's depth. Linear in `source`: an end tag is matched
/// against the [`LOOK`] innermost open elements only.
fn walk(source: &str, mut f: impl FnMut(&Tag<'_>)) {
    let b = source.as_bytes();
    let mut open: Vec<Open> = Vec::new();
    let mut name_buf = String::new();
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'<', &b[i..]) {
        let lt = i + off;
        let rest = &b[lt + 1..];
        match rest.first() {
            Some(b'!') if rest.starts_with(b"!--") => {
                i = find(b, lt + 4, b"-->").map_or(b.len(), |e| e + 3);
            }
            Some(b'!' | b'?') => i = memchr::memchr(b'>', rest).map_or(b.len(), |e| lt + 1 + e + 1),
            Some(b'/') if rest.get(1).is_some_and(u8::is_ascii_alphabetic) => {
                let (name, end) = tag_name(source, lt + 2, &mut name_buf);
                let end = tag_end(b, end);
                let key = hash(name);
                if let Some(k) = open.iter().rev().take(LOOK).position(|o| o.name == key) {
                    let depth = open.len() - k;
                    f(&Tag { start: lt, end, name, depth });
                    open.truncate(depth - 1);
                }
                i = end;
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let (name, after_name) = tag_name(source, lt + 1, &mut name_buf);
                let end = tag_end(b, after_name);
                if RAW.contains(&name) {
                    // Its content is text: skip to its end tag, not counted.
                    i = raw_end(b, end, name);
                    continue;
                }
                if name == "plaintext" {
                    return; // the rest of the document is text
                }
                // `/>` closes a tag only in foreign content; `<div/>` opens a div.
                let foreign = open.last().is_some_and(|o| o.foreign) || name == "svg" || name == "math";
                let self_closed = foreign && end >= 2 && b[end - 2] == b'/';
                if !VOID.contains(&name) && !IMPLIED.contains(&name) && !self_closed {
                    open.push(Open { name: hash(name), foreign });
                    f(&Tag { start: lt, end, name, depth: open.len() });
                }
                i = end;
            }
            _ => i = lt + 1,
        }
    }
}

/// How far down the open elements an end tag looks for its start.
const LOOK: usize = 64;

/// FNV-1a of a name.
fn hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, c| (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3))
}

/// The tag name starting at `at`, lowercased into `buf` (returned as a
/// slice of it), and the index after it.
fn tag_name<'b>(source: &str, at: usize, buf: &'b mut String) -> (&'b str, usize) {
    let b = source.as_bytes();
    let mut end = at;
    while end < b.len() && !ends_name(b[end]) {
        end += 1;
    }
    buf.clear();
    // Matched in ASCII lowercase, as the HTML tokenizer does; `end` falls
    // on an ASCII byte or the end, so the slice is whole characters.
    buf.push_str(&source[at..end]);
    buf.make_ascii_lowercase();
    (buf.as_str(), end)
}

/// The index after the `>` closing a tag whose name ended at `from`
/// (quoted attribute values may hold `>`); the end of the source if none.
fn tag_end(b: &[u8], from: usize) -> usize {
    let mut i = from;
    let mut quote = None;
    while i < b.len() {
        match (quote, b[i]) {
            (None, b'"' | b'\'') => quote = Some(b[i]),
            (Some(q), c) if c == q => quote = None,
            (None, b'>') => return i + 1,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// The index after the end tag of raw-text element `name` whose content
/// starts at `from` (the end of the source if it is never closed).
fn raw_end(b: &[u8], from: usize, name: &str) -> usize {
    let mut i = from;
    while let Some(off) = find(b, i, b"</") {
        let at = off + 2;
        let candidate = b.get(at..at + name.len());
        let after = b.get(at + name.len()).copied();
        if candidate.is_some_and(|c| c.eq_ignore_ascii_case(name.as_bytes())) && after.is_none_or(ends_name) {
            return tag_end(b, at + name.len());
        }
        i = at;
    }
    b.len()
}

/// The index of the first `needle` in `b` at or after `from`.
fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(b.get(from..)?, needle).map(|off| from + off)
}

/// Whether `c` ends a tag name (whitespace, `/` or `>`), as the HTML
/// tokenizer has it.
fn ends_name(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' | b'/' | b'>')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(name: &str) -> bool {
        name == "div"
    }

    fn nested(n: usize) -> String {
        format!("<html><body>{}deep{}</body></html>", "<div>".repeat(n), "</div>".repeat(n))
    }

    #[test]
    fn ordinary_markup_is_left_as_it_is() {
        let page = r#"<!doctype html><html><head><title>a <b> title</title><style>div > p { x: "<div>" }</style>
<script>if (a < b) { document.write("<div><div>"); }</script></head>
<body><!-- <div><div> --><ul><li>one<li>two <ul><li>three</ul></ul><p>para<p>para<br><img src="x>y">
<table><tr><td>cell<td>cell</table><DIV Class="x">upper</DIV><svg><path d="M0"/></svg></body></html>"#;
        assert!(matches!(cap_depth(page, &block), Cow::Borrowed(_)));
        // html, body, ul, ul, (li not counted): the deepest is 4.
        assert_eq!(max_depth(page), 4);
        // A thousand unclosed paragraphs and list items are not deep.
        let flat = format!("<body><ul>{}</ul>{}</body>", "<li>item ".repeat(1000), "<p>para ".repeat(1000));
        assert_eq!(max_depth(&flat), 2);
    }

    #[test]
    fn deep_markup_loses_its_deepest_tags_and_keeps_its_text() {
        let deep = nested(5_000);
        assert_eq!(max_depth(&deep), 5_002);
        let capped = cap_depth(&deep, &block);
        assert_eq!(max_depth(&capped), MAX_DEPTH);
        assert!(capped.contains("deep"));
        // Closing tags that match nothing, and raw text, stay linear and harmless.
        let odd = format!("{}<script>{}</script>{}", "</div>".repeat(100), "<div>".repeat(2000), "<span>".repeat(600));
        assert_eq!(max_depth(&odd), 600);
        assert!(cap_depth(&odd, &block).contains(&"<div>".repeat(2000)));
    }

    #[test]
    fn unterminated_constructs_end_at_the_end() {
        for s in ["<div", "<div class=\"a>", "<!-- x", "<script>x", "</", "<", "<!x", "a < b", "<é>"] {
            let _ = max_depth(s);
            let _ = cap_depth(s, &block);
        }
        assert_eq!(max_depth("<div"), 1);
    }
}
