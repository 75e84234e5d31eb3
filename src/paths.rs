//! Where the device keeps its files: the one small value every constructor
//! that touches disk takes beside its own config section, so no module
//! below the composition root needs the whole [`crate::config::Config`].

use std::path::{Path, PathBuf};

/// The state directory (database, vector indexes, caches) and the models
/// directory, resolved once at config load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// Database and vector indexes live here (`EARSHOT_STATE_DIR`).
    pub state_dir: PathBuf,
    /// Model files (`EARSHOT_MODELS_DIR`).
    pub models_dir: PathBuf,
    /// libonnxruntime.so (`nlu.onnxruntime_lib`, `ORT_DYLIB_PATH`); empty =
    /// look in `models_dir` and the usual places. Every ONNX user (embedder,
    /// Piper, cross-encoder) loads the one library from here.
    pub onnxruntime_lib: String,
}

impl Paths {
    pub fn new(state_dir: impl Into<PathBuf>, models_dir: impl Into<PathBuf>) -> Paths {
        Paths {
            state_dir: state_dir.into(),
            models_dir: models_dir.into(),
            onnxruntime_lib: String::new(),
        }
    }

    /// The SQLite database file.
    pub fn database_path(&self) -> PathBuf {
        self.state_dir.join("earshot.db")
    }

    /// Vector index files (derived from SQLite, rebuildable).
    pub fn index_dir(&self) -> PathBuf {
        self.state_dir.join("index")
    }

    /// A model file by name, under `models_dir`.
    pub fn model_path(&self, name: impl AsRef<Path>) -> PathBuf {
        self.models_dir.join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_sit_under_their_directories() {
        let p = Paths::new("/var/lib/earshot", "/opt/models");
        assert_eq!(
            p.database_path(),
            PathBuf::from("/var/lib/earshot/earshot.db")
        );
        assert_eq!(p.index_dir(), PathBuf::from("/var/lib/earshot/index"));
        assert_eq!(p.model_path("a.onnx"), PathBuf::from("/opt/models/a.onnx"));
    }
}
