//! `neardup gen`: a labelled synthetic corpus with controlled mutations.
//!
//! Base documents are paragraphs of pseudo-words drawn from a Zipf
//! distribution over a generated vocabulary (Latin, Cyrillic, Greek and CJK
//! scripts). Each base gets variants, each made by one mutation. The truth
//! file gives every variant's base, mutation and exact Jaccard to its base
//! under the default pipeline (word 5-grams, unicode normalizer), so recall
//! can be read by cohort. Everything is determined by --seed.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use neardup_core::SplitMix64;
use neardup_core::{Config, Fingerprinter};

/// Generate a corpus (`{"id","text"}` JSONL) and its truth (`{"id","base","mutation","jaccard"}`).
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Corpus output path.
    #[arg(long)]
    out: String,
    /// Truth output path.
    #[arg(long)]
    truth: String,
    /// Number of base documents.
    #[arg(long, default_value_t = 1000)]
    bases: usize,
    /// Variants per base.
    #[arg(long, default_value_t = 3)]
    variants: usize,
    /// Approximate words per base document.
    #[arg(long, default_value_t = 400)]
    words: usize,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

struct Rng(SplitMix64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        ((self.0.next() >> 11) as f64 / (1u64 << 53) as f64 * n as f64) as usize % n.max(1)
    }
    fn unit(&mut self) -> f64 {
        (self.0.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const SCRIPTS: [&[&str]; 4] = [
    &["ka", "lo", "mi", "ren", "to", "sa", "vel", "dor", "an", "is", "qu", "pe", "tra", "ne", "shi", "bo", "gar", "el"],
    &["ка", "ло", "ми", "рен", "то", "са", "вел", "дор", "ан", "ис", "пе", "тра", "не"],
    &["κα", "λο", "μι", "ρεν", "το", "σα", "βελ", "δορ", "αν", "ισ", "πε", "τρα"],
    &["日", "本", "語", "文", "書", "電", "車", "学", "生", "話", "時", "間"],
];

fn vocabulary(rng: &mut Rng, script: &[&str], size: usize) -> Vec<String> {
    let mut v: Vec<String> = Vec::with_capacity(size);
    let mut seen = std::collections::HashSet::new();
    while v.len() < size {
        let syl = 1 + rng.below(3);
        let w: String = (0..syl).map(|_| script[rng.below(script.len())]).collect();
        if seen.insert(w.clone()) {
            v.push(w);
        }
    }
    v
}

fn zipf_word<'a>(rng: &mut Rng, vocab: &'a [String]) -> &'a str {
    // Inverse-CDF approximation of Zipf(s≈1): index = n^u - 1.
    let n = vocab.len() as f64;
    let i = (n.powf(rng.unit()) - 1.0) as usize;
    &vocab[i.min(vocab.len() - 1)]
}

fn paragraphs(rng: &mut Rng, vocab: &[String], words: usize) -> Vec<String> {
    let mut paras = Vec::new();
    let mut left = words;
    while left > 0 {
        let len = (40 + rng.below(80)).min(left);
        let mut p = String::new();
        for i in 0..len {
            if i > 0 {
                p.push(' ');
            }
            p.push_str(zipf_word(rng, vocab));
            if rng.below(12) == 0 {
                p.push('.');
            }
        }
        paras.push(p);
        left -= len;
    }
    paras
}

const MUTATIONS: [&str; 9] = [
    "substitute",
    "insert",
    "delete",
    "reorder",
    "boilerplate",
    "ocr_noise",
    "token_padding",
    "template",
    "light_edit",
];

fn mutate(rng: &mut Rng, kind: &str, paras: &[String], vocab: &[String], boiler: &(String, String)) -> String {
    let words =
        |p: &[String]| p.iter().map(|x| x.split(' ').map(str::to_owned).collect::<Vec<_>>()).collect::<Vec<_>>();
    let join = |ps: Vec<Vec<String>>| ps.into_iter().map(|w| w.join(" ")).collect::<Vec<_>>().join("\n\n");
    let rate = 0.01 + 0.1 * rng.unit();
    match kind {
        "substitute" | "light_edit" => {
            let rate = if kind == "light_edit" { rate / 5.0 } else { rate };
            let ps = words(paras)
                .into_iter()
                .map(|p| {
                    p.into_iter()
                        .map(|w| if rng.unit() < rate { zipf_word(rng, vocab).to_owned() } else { w })
                        .collect()
                })
                .collect();
            join(ps)
        }
        "insert" => {
            let ps = words(paras)
                .into_iter()
                .map(|p| {
                    let mut out = Vec::new();
                    for w in p {
                        out.push(w);
                        if rng.unit() < rate {
                            out.push(zipf_word(rng, vocab).to_owned());
                        }
                    }
                    out
                })
                .collect();
            join(ps)
        }
        "delete" => {
            let ps = words(paras).into_iter().map(|p| p.into_iter().filter(|_| rng.unit() >= rate).collect()).collect();
            join(ps)
        }
        "reorder" => {
            let mut ps = paras.to_vec();
            for i in (1..ps.len()).rev() {
                let j = rng.below(i + 1);
                ps.swap(i, j);
            }
            ps.join("\n\n")
        }
        "boilerplate" => format!("{}\n\n{}\n\n{}", boiler.0, paras.join("\n\n"), boiler.1),
        "ocr_noise" => {
            let text = paras.join("\n\n");
            let mut out = String::with_capacity(text.len());
            for c in text.chars() {
                if rng.unit() < rate / 4.0 {
                    match c {
                        'l' => out.push('1'),
                        'o' => out.push('0'),
                        'm' => out.push_str("rn"),
                        ' ' => {}
                        c => {
                            out.push(c);
                            out.push(' ');
                        }
                    }
                } else {
                    out.push(c);
                }
            }
            out
        }
        "token_padding" => {
            // Adversarial padding: a block of one repeated token plus random filler.
            let pad = zipf_word(rng, vocab).to_owned();
            let n = paras.iter().map(|p| p.split(' ').count()).sum::<usize>() / 5;
            let filler: Vec<String> =
                (0..n).map(|i| if i % 2 == 0 { pad.clone() } else { zipf_word(rng, vocab).to_owned() }).collect();
            format!("{}\n\n{}", paras.join("\n\n"), filler.join(" "))
        }
        _ => {
            // Templated page: a fixed frame around a short distinct fill-in.
            let fill: Vec<&str> = (0..30).map(|_| zipf_word(rng, vocab)).collect();
            format!("{}\n\nITEM: {}\n\n{}", boiler.0, fill.join(" "), boiler.1)
        }
    }
}

pub fn run(a: GenArgs) -> anyhow::Result<ExitCode> {
    let mut rng = Rng(SplitMix64::new(a.seed));
    let vocabs: Vec<Vec<String>> =
        SCRIPTS.iter().map(|s| vocabulary(&mut rng, s, 3000.min(s.len().pow(3) / 2))).collect();
    let boiler = {
        let v = &vocabs[0];
        let mut r = Rng(SplitMix64::new(a.seed ^ 0xb01e));
        (paragraphs(&mut r, v, 60).join(" "), paragraphs(&mut r, v, 40).join(" "))
    };
    let mut fpr = Fingerprinter::new(Config::default().resolve()?)?;
    let mut corpus = BufWriter::new(File::create(&a.out).with_context(|| format!("cannot create {}", a.out))?);
    let mut truth = BufWriter::new(File::create(&a.truth).with_context(|| format!("cannot create {}", a.truth))?);
    for b in 0..a.bases {
        // Mostly Latin-script text, with a share of other scripts.
        let script = match rng.below(10) {
            0 => 1,
            1 => 2,
            2 => 3,
            _ => 0,
        };
        let vocab = &vocabs[script];
        let len = a.words / 2 + rng.below(a.words);
        let paras = paragraphs(&mut rng, vocab, len);
        let base_text = paras.join("\n\n");
        let base_id = format!("b{b}");
        let base_fp = fpr.fingerprint(&base_text);
        serde_json::to_writer(&mut corpus, &serde_json::json!({"id": base_id, "text": base_text}))?;
        corpus.write_all(b"\n")?;
        for v in 0..a.variants {
            let kind = MUTATIONS[rng.below(MUTATIONS.len())];
            let text = mutate(&mut rng, kind, &paras, vocab, &boiler);
            let id = format!("b{b}v{v}");
            let j = neardup_core::jaccard(&base_fp.features, &fpr.fingerprint(&text).features);
            serde_json::to_writer(&mut corpus, &serde_json::json!({"id": id, "text": text}))?;
            corpus.write_all(b"\n")?;
            serde_json::to_writer(
                &mut truth,
                &serde_json::json!({"id": id, "base": base_id, "mutation": kind, "jaccard": j}),
            )?;
            truth.write_all(b"\n")?;
        }
    }
    corpus.flush()?;
    truth.flush()?;
    eprintln!("wrote {} documents to {} and truth to {}", a.bases * (1 + a.variants), a.out, a.truth);
    Ok(ExitCode::SUCCESS)
}
