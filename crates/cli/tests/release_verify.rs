//! `scripts/release-verify.sh` and `scripts/release-sign.sh` (issue 49,
//! item 6), the contracts that need no build: on a copy of the release's
//! artifacts, signed here, the checksum, signature and binary contracts
//! pass, and one changed byte makes them fail and name the file. The full
//! verification builds a release binary and is run by hand
//! (`bash scripts/release-verify.sh`), not in CI.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{read, root};

/// The artifacts `release/manifest.toml` lists.
fn manifest_paths() -> Vec<String> {
    read("release/manifest.toml")
        .lines()
        .filter_map(|l| l.strip_prefix("path = \"")?.strip_suffix('"').map(str::to_string))
        .collect()
}

/// A copy of the scripts and every listed artifact, in the repository's layout.
fn release_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = manifest_paths();
    paths.extend(["scripts/release-verify.sh", "scripts/release-sign.sh"].map(String::from));
    for p in paths {
        let from = root().join(&p);
        if !from.is_file() {
            continue; // release_docs reports missing artifacts
        }
        let to = dir.path().join(&p);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap();
    }
    dir
}

fn bash(dir: &Path, script: &str, args: &[&str]) -> Output {
    Command::new("bash").arg(dir.join(script)).args(args).current_dir(dir).output().expect("run bash")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn flip_byte(path: &Path) {
    let mut b = std::fs::read(path).unwrap();
    let at = b.len() / 2;
    b[at] ^= 0x01;
    std::fs::write(path, b).unwrap();
}

#[test]
fn a_changed_byte_of_a_listed_artifact_fails_the_checksums_and_names_it() {
    let dir = release_copy();
    let signed = bash(dir.path(), "scripts/release-sign.sh", &[]);
    assert!(signed.status.success(), "{}", text(&signed));
    let ok = bash(dir.path(), "scripts/release-verify.sh", &["--only", "checksums"]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(text(&ok).contains("PASS checksums"), "{}", text(&ok));

    let victim = "release/migrations.md";
    flip_byte(&dir.path().join(victim));
    let bad = bash(dir.path(), "scripts/release-verify.sh", &["--only", "checksums"]);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    let out = text(&bad);
    assert!(out.contains("FAIL checksums") && out.contains(&format!("{victim} (sha256 differs)")), "{out}");

    // An artifact listed in the manifest but left out of the checksums.
    std::fs::remove_file(dir.path().join(victim)).unwrap();
    let gone = text(&bash(dir.path(), "scripts/release-verify.sh", &["--only", "checksums"]));
    assert!(gone.contains(&format!("{victim} (missing)")), "{gone}");
}

#[test]
fn signatures_and_the_shipped_binary_are_checked_when_given() {
    let dir = release_copy();
    let key = dir.path().join("release-key");
    let made =
        Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-C", "release", "-f"]).arg(&key).output();
    if !made.is_ok_and(|o| o.status.success()) {
        eprintln!("ssh-keygen is not available: signature checks not exercised");
        return;
    }
    let binary: PathBuf = dir.path().join("dist/neardup");
    std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
    std::fs::write(&binary, b"\x7fELF not really a binary, but bytes to check").unwrap();
    let (key_s, bin_s) = (key.to_str().unwrap(), binary.to_str().unwrap());
    let signed = bash(dir.path(), "scripts/release-sign.sh", &["--key", key_s, "--binary", bin_s]);
    assert!(signed.status.success(), "{}", text(&signed));
    let pubkey = format!("{key_s}.pub");
    let args = ["--only", "checksums,signature,binary", "--pubkey", &pubkey, "--binary", bin_s];
    let ok = bash(dir.path(), "scripts/release-verify.sh", &args);
    let out = text(&ok);
    assert!(ok.status.success(), "{out}");
    for c in ["PASS checksums", "PASS signature", "PASS binary"] {
        assert!(out.contains(c), "{c}: {out}");
    }

    // One byte of the binary.
    flip_byte(&binary);
    let bad = bash(dir.path(), "scripts/release-verify.sh", &args);
    let out = text(&bad);
    assert_eq!(bad.status.code(), Some(1), "{out}");
    assert!(out.contains("FAIL binary") && out.contains(&format!("{bin_s} does not match")), "{out}");

    // One byte of the signed checksums: the signature no longer verifies.
    let sums = dir.path().join("release/SHA256SUMS");
    let mut b = std::fs::read(&sums).unwrap();
    b.push(b'\n');
    std::fs::write(&sums, b).unwrap();
    let out = text(&bash(dir.path(), "scripts/release-verify.sh", &["--only", "signature", "--pubkey", &pubkey]));
    assert!(out.contains("FAIL signature") && out.contains("release/SHA256SUMS.sig"), "{out}");
}
