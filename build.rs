//! Embeds the version, git hash and enabled features (`earshot --version`).

use std::process::Command;

/// The commit from `.git` files directly, for when `git` is missing or
/// busy (another process committing holds its locks).
fn hash_from_files() -> Option<String> {
    let head = std::fs::read_to_string(".git/HEAD").ok()?;
    let head = head.trim();
    let full = match head.strip_prefix("ref: ") {
        None => head.to_string(),
        Some(name) => match std::fs::read_to_string(format!(".git/{name}")) {
            Ok(hash) => hash.trim().to_string(),
            Err(_) => std::fs::read_to_string(".git/packed-refs")
                .ok()?
                .lines()
                .find(|l| l.ends_with(&format!(" {name}")))?
                .split(' ')
                .next()?
                .to_string(),
        },
    };
    (full.len() >= 12 && full.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| full[..12].to_string())
}

fn main() {
    let hash = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(hash_from_files)
        .unwrap_or_else(|| "unknown".into());
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    println!(
        "cargo:rustc-env=EARSHOT_GIT_HASH={hash}{}",
        if dirty { "-dirty" } else { "" }
    );
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| {
            k.strip_prefix("CARGO_FEATURE_")
                .map(|f| f.to_lowercase().replace('_', "-"))
        })
        // `default` is a set of features, not one.
        .filter(|f| f != "default")
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(",")
    };
    println!("cargo:rustc-env=EARSHOT_FEATURES={features}");
    println!(
        "cargo:rustc-env=EARSHOT_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    println!("cargo:rerun-if-changed=.git/index");
    println!("cargo:rerun-if-changed=build.rs");
    esphome_messages();
}

/// Issue 22: the ESPHome native API's message types, generated from the
/// descriptor `scripts/esphome-proto.py` extracted from aioesphomeapi
/// (no protoc needed). A broken descriptor fails the build with its reason.
fn esphome_messages() {
    use prost::Message;
    let path = "src/esphome/messages/api.fds.bin";
    println!("cargo:rerun-if-changed={path}");
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let fds = prost_types::FileDescriptorSet::decode(bytes.as_slice())
        .unwrap_or_else(|e| panic!("decoding {path}: {e}"));
    prost_build::Config::new()
        .default_package_filename("esphome_api")
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("generating the ESPHome messages from {path}: {e}"));
}
