//! Finding ONNX Runtime and the one process-wide ort environment.
//!
//! ort is built with `load-dynamic`: no library is linked at build time
//! (its downloader cannot reach the network here, and armv7 has no build at
//! all). The library is found at run time — `nlu.onnxruntime_lib`
//! (`ORT_DYLIB_PATH`, carried in [`Paths::onnxruntime_lib`]), then `models_dir/libonnxruntime.so*`, then next to
//! the executable and the usual system directories. ort *panics* when the
//! library is missing, so we check the file ourselves first.
//!
//! ort allows exactly one environment per process; every ONNX user (the
//! embedder, Piper TTS, a VAD) must get it from [`environment`].

use std::path::{Path, PathBuf};

use crate::paths::Paths;

/// The fix we print whenever the library cannot be found or loaded.
pub const FETCH_HINT: &str =
    "run scripts/fetch-onnxruntime.sh or set ORT_DYLIB_PATH to libonnxruntime.so";

/// Where ONNX Runtime would be loaded from, or a one-line reason it cannot
/// be (for `earshot doctor` and for every loader before touching ort).
pub fn onnxruntime_status(paths: &Paths) -> Result<PathBuf, String> {
    if !cfg!(feature = "onnx") {
        return Err(
            "this build has no ONNX Runtime support (built without the `onnx` feature, e.g. for armv7, which has no ONNX Runtime build)"
                .into(),
        );
    }
    let explicit = paths.onnxruntime_lib.trim();
    if !explicit.is_empty() {
        let path = PathBuf::from(explicit);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "ONNX Runtime library {} (nlu.onnxruntime_lib / ORT_DYLIB_PATH) does not exist; {FETCH_HINT}",
                path.display()
            ))
        };
    }
    let mut dirs = vec![paths.models_dir.clone()];
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        dirs.push(dir);
    }
    dirs.extend(
        [
            "/usr/local/lib",
            "/usr/lib",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
        ]
        .iter()
        .map(PathBuf::from),
    );
    for dir in &dirs {
        if let Some(found) = find_in(dir) {
            return Ok(found);
        }
    }
    Err(format!(
        "ONNX Runtime library (libonnxruntime.so*) not found in {}; {FETCH_HINT}",
        paths.models_dir.display()
    ))
}

/// The newest-looking `libonnxruntime.so*` in `dir` (longest versioned name
/// last in sort order), skipping `.part` leftovers of a failed fetch.
fn find_in(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libonnxruntime.so") && !n.ends_with(".part"))
                && p.is_file()
        })
        .collect();
    found.sort();
    found.pop()
}

#[cfg(feature = "onnx")]
mod env {
    use std::sync::OnceLock;

    use super::*;

    static ENV: OnceLock<Result<(ort::environment::Environment, PathBuf), String>> =
        OnceLock::new();

    /// The process-wide ort environment, loading ONNX Runtime on first use.
    /// The first caller's paths decide which library is loaded; later
    /// callers share it (ort cannot load a second one).
    pub fn environment(paths: &Paths) -> anyhow::Result<ort::environment::Environment> {
        let result = ENV.get_or_init(|| {
            let path = onnxruntime_status(paths)?;
            let builder = ort::init_from(&path).map_err(|e| {
                format!(
                    "cannot load ONNX Runtime from {}: {e}; {FETCH_HINT}",
                    path.display()
                )
            })?;
            let env = builder
                .with_name("earshot")
                .with_telemetry(false)
                .build()
                .map_err(|e| format!("cannot start ONNX Runtime from {}: {e}", path.display()))?;
            tracing::debug!(lib = %path.display(), "ONNX Runtime loaded");
            Ok((env, path))
        });
        match result {
            Ok((env, _)) => Ok(env.clone()),
            Err(e) => Err(anyhow::anyhow!("{e}")),
        }
    }
}

#[cfg(feature = "onnx")]
pub use env::environment;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_missing_library_names_the_file_and_the_fix() {
        let mut paths = Paths::new("state", "models");
        paths.onnxruntime_lib = "/nonexistent/libonnxruntime.so.9".into();
        let err = onnxruntime_status(&paths).unwrap_err();
        if cfg!(feature = "onnx") {
            assert!(err.contains("/nonexistent/libonnxruntime.so.9"), "{err}");
            assert!(err.contains("fetch-onnxruntime.sh"), "{err}");
        }
        assert!(!err.contains('\n'));
    }

    #[test]
    fn part_files_are_not_libraries() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libonnxruntime.so.1.31.1.part"), b"x").unwrap();
        assert_eq!(find_in(dir.path()), None);
        std::fs::write(dir.path().join("libonnxruntime.so.1.31.1"), b"x").unwrap();
        assert_eq!(
            find_in(dir.path()),
            Some(dir.path().join("libonnxruntime.so.1.31.1"))
        );
    }
}
