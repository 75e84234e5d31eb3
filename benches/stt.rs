//! `cargo bench --bench stt`: the side-by-side STT benchmark of
//! `earshot bench stt` (earshot's fast path vs whisper.cpp's library
//! default greedy decoding, same model, same threads) on the speech clips
//! in tests/data/speech plus synthesised short commands. Set
//! EARSHOT_WHISPER_CLI to also time whisper.cpp's own CLI
//! (scripts/build-whisper-cli.sh). Figures: notes/stt.md.

use std::path::Path;

fn main() {
    let args = earshot::cli::bench_stt::BenchSttArgs {
        clips: Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/speech"),
        no_commands: false,
        work_dir: None,
        whisper_cli: std::env::var_os("EARSHOT_WHISPER_CLI").map(Into::into),
        runs: 3,
        json: false,
    };
    match earshot::cli::bench_stt::run(None, args) {
        Ok(true) => {}
        Ok(false) => eprintln!("stt bench: some targets missed (see the summary line)"),
        Err(e) => {
            eprintln!("stt bench: {e:#}");
            std::process::exit(2);
        }
    }
}
