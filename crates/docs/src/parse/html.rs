//! HTML to text with `scraper` (html5ever, the browsers' parsing algorithm,
//! so malformed markup is recovered the way a browser would).
//!
//! Boilerplate that is not the document's content is dropped: scripts,
//! styles, templates, navigation, page headers/footers outside `<article>`/
//! `<main>`, sidebars and forms. Block elements end a line; runs of
//! whitespace inside a block collapse to one space, except in `<pre>`.
//! The tree is walked iteratively, so deeply nested markup cannot overflow
//! the stack, and markup nested past [`super::html_depth::MAX_DEPTH`] loses
//! its deepest tags before parsing, so it cannot take quadratic time.

use ego_tree::iter::Edge;
use scraper::{Html, Node, Selector};

use super::Extracted;

/// Elements whose whole subtree is skipped.
const SKIP: &[&str] = &[
    "script", "style", "noscript", "template", "nav", "aside", "form", "button", "select", "svg", "iframe", "object",
    "canvas", "head",
];

/// Elements that start and end a line of output.
const BLOCK: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "blockquote",
    "pre",
    "table",
    "tr",
    "td",
    "th",
    "caption",
    "figure",
    "figcaption",
    "hr",
    "address",
    "details",
    "summary",
    "body",
    "header",
    "footer",
];

pub(crate) fn extract(source: &str) -> Extracted {
    // Nesting bounded first: the parser's work grows with depth squared.
    let doc = Html::parse_document(&super::html_depth::cap_depth(source, &is_block));
    let title = Selector::parse("title")
        .ok()
        .and_then(|sel| doc.select(&sel).next())
        .map(|t| t.text().collect::<String>())
        .or_else(|| {
            let h1 = Selector::parse("h1").ok()?;
            doc.select(&h1).next().map(|t| t.text().collect::<String>())
        });

    let mut out = Output::default();
    // Depth counters: inside a skipped subtree, inside <pre>, inside
    // <article>/<main> (where header/footer are part of the content).
    let mut skip = 0usize;
    let mut pre = 0usize;
    let mut content = 0usize;
    for edge in doc.tree.root().traverse() {
        match edge {
            Edge::Open(node) => match node.value() {
                Node::Element(el) => {
                    let name = el.name();
                    if skip > 0 || is_skipped(name, el.attr("role"), content) {
                        skip += 1;
                        continue;
                    }
                    match name {
                        "pre" => pre += 1,
                        "article" | "main" => content += 1,
                        "br" => out.newline(),
                        _ => {}
                    }
                    if is_block(name) {
                        out.newline();
                    }
                }
                Node::Text(text) if skip == 0 => out.text(text, pre > 0),
                _ => {}
            },
            Edge::Close(node) => {
                if let Node::Element(el) = node.value() {
                    if skip > 0 {
                        skip -= 1;
                        continue;
                    }
                    match el.name() {
                        "pre" => pre -= 1,
                        "article" | "main" => content -= 1,
                        _ => {}
                    }
                    if is_block(el.name()) {
                        out.newline();
                    }
                }
            }
        }
    }
    Extracted { text: out.finish(), title }
}

/// Whether element `name` starts and ends a line of output.
fn is_block(name: &str) -> bool {
    BLOCK.contains(&name)
}

fn is_skipped(name: &str, role: Option<&str>, inside_content: usize) -> bool {
    SKIP.contains(&name)
        || matches!(role, Some("navigation" | "banner" | "contentinfo" | "search"))
        || (inside_content == 0 && matches!(name, "header" | "footer"))
}

/// Accumulates lines, collapsing whitespace outside `<pre>`.
#[derive(Default)]
struct Output {
    lines: Vec<String>,
    current: String,
}

impl Output {
    fn text(&mut self, text: &str, preformatted: bool) {
        if preformatted {
            let mut parts = text.split('\n');
            if let Some(first) = parts.next() {
                self.current.push_str(first);
            }
            for part in parts {
                self.newline();
                self.current.push_str(part);
            }
            return;
        }
        if text.starts_with(char::is_whitespace) && !self.current.ends_with(' ') && !self.current.is_empty() {
            self.current.push(' ');
        }
        let mut words = text.split_whitespace().peekable();
        while let Some(word) = words.next() {
            self.current.push_str(word);
            if words.peek().is_some() {
                self.current.push(' ');
            }
        }
        if text.ends_with(char::is_whitespace) && !self.current.is_empty() && !self.current.ends_with(' ') {
            self.current.push(' ');
        }
    }

    fn newline(&mut self) {
        let line = self.current.trim();
        if !line.is_empty() {
            self.lines.push(line.to_owned());
        }
        self.current.clear();
    }

    fn finish(mut self) -> String {
        self.newline();
        self.lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boilerplate_dropped_blocks_kept() {
        let html = r#"<!doctype html><html><head><title> A  Paper </title><style>p{}</style></head>
<body><header>Site banner</header><nav><a href="/">Home</a></nav>
<article><header><h1>A Paper</h1></header><p>First <em>para</em>graph
 spans lines.</p><p>Second<br>line</p><pre>code  kept
 as is</pre></article>
<script>var x = "not text";</script><footer>© Publisher</footer></body></html>"#;
        let got = extract(html);
        assert_eq!(got.title.as_deref(), Some(" A  Paper "));
        assert_eq!(got.text, "A Paper\nFirst paragraph spans lines.\nSecond\nline\ncode  kept\nas is");
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let html = format!("{}deep{}", "<div><span>".repeat(20_000), "</span></div>".repeat(20_000));
        assert_eq!(extract(&html).text, "deep");
    }

    #[test]
    fn entities_decoded() {
        assert_eq!(extract("<p>caf&eacute; &amp; &#8220;tea&#8221;</p>").text, "café & \u{201c}tea\u{201d}");
    }
}
