//! Markdown to text with `pulldown-cmark`: the rendered words, without
//! markup. Block ends (paragraphs, headings, list items, code blocks, table
//! rows) end a line; soft breaks become spaces so a paragraph wrapped in the
//! source is one line, like its HTML and PDF renderings. Raw HTML and YAML
//! front matter are dropped. The title is the first heading's text.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::Extracted;

pub(crate) fn extract(source: &str) -> Extracted {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut title: Option<String> = None;
    let mut heading: Option<String> = None;
    let mut in_metadata = false;
    let end = |line: &mut String, lines: &mut Vec<String>| {
        let t = line.trim();
        if !t.is_empty() {
            lines.push(t.to_owned());
        }
        line.clear();
    };
    for event in Parser::new_ext(source, options) {
        match event {
            Event::Start(Tag::MetadataBlock(_)) => in_metadata = true,
            Event::End(TagEnd::MetadataBlock(_)) => in_metadata = false,
            Event::Start(Tag::Heading { .. }) => {
                end(&mut line, &mut lines);
                if title.is_none() {
                    heading = Some(String::new());
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    title = Some(h);
                }
                end(&mut line, &mut lines);
            }
            Event::Text(t) | Event::Code(t) if !in_metadata => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
                // Code blocks keep their own line structure.
                let mut parts = t.split('\n');
                line.push_str(parts.next().unwrap_or(""));
                for part in parts {
                    end(&mut line, &mut lines);
                    line.push_str(part);
                }
            }
            Event::SoftBreak => line.push(' '),
            Event::HardBreak => end(&mut line, &mut lines),
            Event::Start(Tag::Item) if !line.is_empty() => line.push(' '),
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Item
                | TagEnd::CodeBlock
                | TagEnd::BlockQuote(_)
                | TagEnd::TableRow
                | TagEnd::TableHead
                | TagEnd::FootnoteDefinition,
            ) => end(&mut line, &mut lines),
            Event::End(TagEnd::TableCell) => line.push(' '),
            _ => {}
        }
    }
    end(&mut line, &mut lines);
    Extracted { text: lines.join("\n"), title }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_removed_structure_kept() {
        let md = "---\ntitle: x\n---\n# The *Title*\n\nA para\nwrapped, with `code` and [a link](http://x).\n\n- one\n- two\n\n```\nfn main() {}\nlet x;\n```\n\n<div>raw html</div>\n\n| a | b |\n|---|---|\n| 1 | 2 |\n";
        let got = extract(md);
        assert_eq!(got.title.as_deref(), Some("The Title"));
        assert_eq!(
            got.text,
            "The Title\nA para wrapped, with code and a link.\none\ntwo\nfn main() {}\nlet x;\na b\n1 2"
        );
    }
}
