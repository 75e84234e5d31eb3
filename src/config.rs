//! `earshot.toml`: every setting, where it is found, and the seed's
//! environment variables that override it.
//!
//! Lookup order for the file: `--config PATH`, `$EARSHOT_CONFIG`,
//! `./earshot.toml`, `/etc/earshot/earshot.toml`; none found means defaults.
//! Environment variables override the file (so a systemd `EnvironmentFile`
//! or a shell export wins), and `earshot config show` prints each value with
//! where it came from, secrets masked.
//!
//! Each concern owns its section type next to its code (e.g.
//! [`crate::stt::SttConfig`]); this file composes them and applies the
//! environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};

pub use crate::llm::LlmConfig;
pub use crate::nlu::RouterConfig;

/// The whole effective configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Database and vector indexes live here (`EARSHOT_STATE_DIR`).
    pub state_dir: PathBuf,
    /// Model files (`EARSHOT_MODELS_DIR`); relative paths are resolved
    /// against the current directory.
    pub models_dir: PathBuf,
    /// Everything is keyed by user; the device has one by default
    /// (`MEM0_USER_ID` / `USER_ID`).
    pub user_id: String,
    /// Default dispatch mode: `tree` (intent tree, router graph as its
    /// fallback) or `graph` (router only). Per-conversation overrides win.
    pub mode: crate::agent::Mode,
    pub llm: LlmConfig,
    pub router: RouterConfig,
    pub nlu: crate::nlu::NluConfig,
    pub tree: crate::tree::TreeConfig,
    pub tools: crate::tools::ToolsConfig,
    pub memory: crate::memory::MemoryConfig,
    pub stt: crate::stt::SttConfig,
    pub tts: crate::tts::TtsConfig,
    pub audio: crate::audio::AudioConfig,
    pub api: crate::api::ApiConfig,
    pub device: crate::device::DeviceConfig,
    pub knowledge: crate::knowledge::KnowledgeConfig,
    pub wyoming: crate::wyoming_proto::WyomingConfig,
    pub timers: crate::timers::TimersConfig,
    pub calendar: crate::calendar::CalendarConfig,
    /// Issue 17: the wake word (`[wake]`).
    pub wake: crate::wake::WakeConfig,
    /// Issue 18: private email over IMAP.
    pub email: crate::tools::email::EmailConfig,
    /// Issue 18: apps through Composio.
    pub composio: crate::tools::composio::ComposioConfig,
    /// Issue 22: the ESPHome native API.
    pub esphome: crate::esphome::EsphomeConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            state_dir: default_state_dir(),
            models_dir: PathBuf::from("models"),
            user_id: "user-1".into(),
            mode: crate::agent::Mode::Tree,
            llm: LlmConfig::default(),
            router: RouterConfig::default(),
            nlu: Default::default(),
            tree: Default::default(),
            tools: Default::default(),
            memory: Default::default(),
            stt: Default::default(),
            tts: Default::default(),
            audio: Default::default(),
            api: Default::default(),
            device: Default::default(),
            knowledge: Default::default(),
            wyoming: Default::default(),
            timers: Default::default(),
            calendar: Default::default(),
            wake: Default::default(),
            email: Default::default(),
            composio: Default::default(),
            esphome: Default::default(),
        }
    }
}

/// `$XDG_STATE_HOME/earshot`, `~/.local/state/earshot`, or `./state`.
fn default_state_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("earshot");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".local/state/earshot");
    }
    PathBuf::from("state")
}

/// The default `models` dir is relative: use it when it exists here, else
/// the repository's `models/` next to a `target/*/earshot` binary, else the
/// installed `/var/lib/earshot/models` — so `earshot` finds its models from
/// any working directory.
fn default_models_dir(relative: &Path) -> PathBuf {
    if relative.is_dir() || relative.is_absolute() {
        return relative.to_path_buf();
    }
    let beside_binary = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors()
            .skip(1)
            .take(4)
            .map(|dir| dir.join(relative))
            .find(|candidate| candidate.is_dir())
    });
    beside_binary
        .or_else(|| {
            let installed = PathBuf::from("/var/lib/earshot/models");
            installed.is_dir().then_some(installed)
        })
        .unwrap_or_else(|| relative.to_path_buf())
}

/// Where a value came from, for `earshot config show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Default,
    File(String),
    Env(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => write!(f, "default"),
            Source::File(path) => write!(f, "file {path}"),
            Source::Env(name) => write!(f, "env {name}"),
        }
    }
}

/// The effective config plus the origin of every non-default value.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub file: Option<PathBuf>,
    /// Dotted key (e.g. `llm.model`) → where it was set.
    pub sources: BTreeMap<String, Source>,
}

/// (env var, dotted key) pairs honoured on top of the file, in order; a
/// later entry for the same key wins (`USER_ID` over `MEM0_USER_ID`? No:
/// `MEM0_USER_ID` is the seed's name and comes last so it wins).
pub const ENV_OVERRIDES: &[(&str, &str)] = &[
    ("EARSHOT_STATE_DIR", "state_dir"),
    ("EARSHOT_MODELS_DIR", "models_dir"),
    ("EARSHOT_MODE", "mode"),
    ("USER_ID", "user_id"),
    ("MEM0_USER_ID", "user_id"),
    ("GROQ_API_KEY", "llm.api_key"),
    ("LLM_BASE_URL", "llm.base_url"),
    ("GROQ_LLM_MODEL", "llm.model"),
    ("GROQ_AGENT_MODEL", "llm.agent_model"),
    ("EMBEDDING_MODEL", "nlu.embedding_model"),
    ("ORT_DYLIB_PATH", "nlu.onnxruntime_lib"),
    ("TAVILY_API_KEY", "tools.tavily_api_key"),
    ("TAVILY_BASE_URL", "tools.tavily_base_url"),
    ("NOTION_API_KEY", "tools.notion_api_key"),
    ("NOTION_DATABASE_ID", "tools.notion_database_id"),
    ("NOTION_BASE_URL", "tools.notion_base_url"),
    ("MEM0_CUSTOM_INSTRUCTIONS", "memory.custom_instructions"),
    ("GROQ_STT_MODEL", "stt.cloud_model"),
    ("STT_BASE_URL", "stt.cloud_base_url"),
    ("STT_LANGUAGE", "stt.language"),
    ("STT_PROMPT", "stt.prompt"),
    ("GROQ_TTS_MODEL", "tts.cloud_model"),
    ("TTS_BASE_URL", "tts.cloud_base_url"),
    ("TTS_VOICE", "tts.cloud_voice"),
    ("EARSHOT_CALDAV_URL", "calendar.caldav_url"),
    // Issue 20: which language models answer, e.g. `remote` or `remote,local`.
    ("EARSHOT_LLM_ORDER", "llm.order"),
    // Issue 17: what opens the microphone (wake, button or always).
    ("EARSHOT_WAKE_MODE", "wake.mode"),
    // Issue 18: apps through Composio.
    ("COMPOSIO_API_KEY", "composio.api_key"),
    ("COMPOSIO_BASE_URL", "composio.base_url"),
    ("COMPOSIO_TOOLKITS", "composio.toolkits"),
];

/// Keys whose values are never printed or logged.
pub fn is_secret(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    last.contains("api_key")
        || last == "token"
        || last.ends_with("_token")
        || last.ends_with("password")
        // Issue 22: the ESPHome API's pre-shared key.
        || last == "encryption_key"
}

/// Mask a secret for display: `gsk_…abcd` style, never the whole value.
pub fn mask(value: &str) -> String {
    if value.is_empty() {
        return String::new();
    }
    let tail: String = value
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if value.chars().count() <= 8 {
        "****".into()
    } else {
        format!("****{tail}")
    }
}

/// Find the config file: explicit path, `$EARSHOT_CONFIG`, `./earshot.toml`,
/// `/etc/earshot/earshot.toml`. An explicit path that does not exist is an
/// error; the implicit ones are simply skipped.
pub fn find_file(explicit: Option<&Path>) -> Result<Option<PathBuf>> {
    if let Some(path) = explicit {
        if !path.exists() {
            return Err(anyhow!(
                "config file {} does not exist; create it (see earshot.example.toml) or drop --config",
                path.display()
            ));
        }
        return Ok(Some(path.to_path_buf()));
    }
    if let Some(path) = std::env::var_os("EARSHOT_CONFIG").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        if !path.exists() {
            return Err(anyhow!(
                "EARSHOT_CONFIG points at {}, which does not exist; fix the path or unset it",
                path.display()
            ));
        }
        return Ok(Some(path));
    }
    for candidate in ["earshot.toml", "/etc/earshot/earshot.toml"] {
        let path = PathBuf::from(candidate);
        if path.is_file() {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// Load the effective configuration from the file (if any) and the process
/// environment.
pub fn load(explicit: Option<&Path>) -> Result<Loaded> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    load_with_env(explicit, &env)
}

/// As [`load`], with the environment given (tests use this).
pub fn load_with_env(explicit: Option<&Path>, env: &BTreeMap<String, String>) -> Result<Loaded> {
    let file = find_file(explicit)?;
    let mut sources = BTreeMap::new();
    let mut table = match &file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config file {}", path.display()))?;
            let table = parse_table(&text, path)?;
            let label = path.display().to_string();
            for key in dotted_keys(&toml::Value::Table(table.clone())) {
                sources.insert(key, Source::File(label.clone()));
            }
            table
        }
        None => toml::Table::new(),
    };
    for (var, key) in ENV_OVERRIDES {
        if let Some(value) = env.get(*var).filter(|v| !v.is_empty()) {
            set_dotted(&mut table, key, toml::Value::String(value.clone()));
            sources.insert((*key).to_string(), Source::Env((*var).to_string()));
        }
    }
    let config: Config =
        serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
            // The file alone parsed, so the bad value came from the environment.
            let key = e.path().to_string();
            let message = with_key(&key, e.inner().message());
            let message = match sources.get(&key) {
                Some(Source::Env(var)) => {
                    format!("{message} (set by the environment variable {var})")
                }
                _ => message,
            };
            anyhow!("{}", one_line(&message, file.as_deref(), None))
        })?;
    config.validate()?;
    let mut config = config;
    if let Some(password) = env.get("CALDAV_PASSWORD").filter(|v| !v.is_empty()) {
        config.calendar.caldav_password = password.clone();
    }
    // Issue 18: like the CalDAV password, only from the environment.
    if let Some(password) = env.get("EMAIL_PASSWORD").filter(|v| !v.is_empty()) {
        config.email.password = password.clone();
    }
    if !sources.contains_key("models_dir") {
        config.models_dir = default_models_dir(&config.models_dir);
    }
    Ok(Loaded {
        config,
        file,
        sources,
    })
}

/// Parse the file strictly so an unknown key or a bad value names its key
/// and line.
fn parse_table(text: &str, path: &Path) -> Result<toml::Table> {
    // Deserialising into `Config` directly gives spans (line numbers) and,
    // through serde_path_to_error, the dotted key; the raw table is then
    // kept for merging with the environment.
    if let Err(e) = serde_path_to_error::deserialize::<_, Config>(toml::Deserializer::new(text)) {
        let key = e.path().to_string();
        let inner = e.inner();
        let line = inner.span().map(|span| {
            let start = span.start.min(text.len());
            let line = text[..start].lines().count().max(1);
            // A span that starts right after a newline belongs to the next line.
            if start > 0 && text.as_bytes().get(start - 1) == Some(&b'\n') {
                line + 1
            } else {
                line
            }
        });
        return Err(anyhow!(
            "{}",
            one_line(&with_key(&key, inner.message()), Some(path), line)
        ));
    }
    toml::from_str::<toml::Table>(text)
        .map_err(|e| anyhow!("{}", one_line(e.message(), Some(path), None)))
}

/// `key: message`, unless the message already starts with the key or no
/// key is known (`.` is serde_path_to_error's root).
fn with_key(key: &str, message: &str) -> String {
    if key.is_empty() || key == "." || message.contains(&format!("`{key}`")) {
        message.to_string()
    } else {
        format!("{key}: {message}")
    }
}

fn one_line(message: &str, path: Option<&Path>, line: Option<usize>) -> String {
    let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let message = message.replace("unknown field", "unknown key");
    let place = match (path, line) {
        (Some(p), Some(l)) => format!("{} line {l}: ", p.display()),
        (Some(p), None) => format!("{}: ", p.display()),
        (None, _) => String::new(),
    };
    format!("{place}{message} (see `earshot config show` for every key)")
}

fn set_dotted(table: &mut toml::Table, key: &str, value: toml::Value) {
    let mut parts = key.split('.').peekable();
    let mut current = table;
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            current.insert(part.to_string(), value);
            return;
        }
        let entry = current
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        current = match entry {
            toml::Value::Table(t) => t,
            _ => return,
        };
    }
}

/// Every leaf key of a TOML value, dotted.
pub fn dotted_keys(value: &toml::Value) -> Vec<String> {
    fn walk(prefix: &str, value: &toml::Value, out: &mut Vec<String>) {
        match value {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            _ => out.push(prefix.to_string()),
        }
    }
    let mut out = Vec::new();
    walk("", value, &mut out);
    out
}

impl Config {
    /// Checks serde cannot express; each error names the key.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=2.0).contains(&self.llm.temperature) {
            return Err(anyhow!("llm.temperature must be between 0 and 2"));
        }
        if !(0.0..=1.0).contains(&self.router.classifier_threshold) {
            return Err(anyhow!(
                "router.classifier_threshold must be between 0 and 1"
            ));
        }
        if self.user_id.trim().is_empty() {
            return Err(anyhow!("user_id must not be empty"));
        }
        self.wyoming.validate().map_err(|e| anyhow!(e))?;
        self.calendar.validate().map_err(|e| anyhow!(e))?;
        self.wake.validate().map_err(|e| anyhow!(e))?;
        self.esphome.validate().map_err(|e| anyhow!(e))?;
        Ok(())
    }

    /// The shared paths value every disk-touching constructor takes.
    pub fn paths(&self) -> crate::paths::Paths {
        crate::paths::Paths {
            state_dir: self.state_dir.clone(),
            models_dir: self.models_dir.clone(),
            onnxruntime_lib: self.nlu.onnxruntime_lib.clone(),
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
    pub fn model_path(&self, name: &str) -> PathBuf {
        self.models_dir.join(name)
    }
}

impl Loaded {
    /// `(key, display value, source)` for every setting, secrets masked.
    pub fn rows(&self) -> Vec<(String, String, Source)> {
        let value = toml::Value::try_from(&self.config)
            .unwrap_or_else(|_| toml::Value::Table(toml::Table::new()));
        let mut rows = Vec::new();
        for key in dotted_keys(&value) {
            let leaf = lookup(&value, &key);
            let mut shown = match leaf {
                Some(toml::Value::String(s)) => s.clone(),
                Some(other) => mask_nested(other).to_string(),
                None => String::new(),
            };
            if is_secret(&key) {
                shown = mask(&shown);
            }
            let source = self.sources.get(&key).cloned().unwrap_or(Source::Default);
            rows.push((key, shown, source));
        }
        rows
    }
}

/// Issue 22: secrets inside arrays of tables (`[[esphome.devices]]`
/// `encryption_key`, `password`) masked like top-level ones.
fn mask_nested(value: &toml::Value) -> toml::Value {
    match value {
        toml::Value::Array(items) => toml::Value::Array(items.iter().map(mask_nested).collect()),
        toml::Value::Table(table) => toml::Value::Table(
            table
                .iter()
                .map(|(k, v)| match v {
                    toml::Value::String(s) if is_secret(k) => {
                        (k.clone(), toml::Value::String(mask(s)))
                    }
                    other => (k.clone(), mask_nested(other)),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn lookup<'a>(value: &'a toml::Value, key: &str) -> Option<&'a toml::Value> {
    let mut current = value;
    for part in key.split('.') {
        current = current.get(part)?;
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn defaults_follow_r_model() {
        let loaded = load_with_env(Some(file("").path()), &env(&[])).unwrap();
        let c = loaded.config;
        assert_eq!(c.llm.model, "qwen/qwen3.6-27b");
        assert_eq!(c.llm.agent_model, "openai/gpt-oss-20b");
        assert_eq!(c.llm.temperature, 0.7);
        assert_eq!(c.llm.agent_temperature, 0.0);
        assert_eq!(c.llm.max_completion_tokens, 2048);
        assert_eq!(c.llm.top_p, 1.0);
        assert_eq!(c.user_id, "user-1");
        assert_eq!(c.mode, crate::agent::Mode::Tree);
    }

    #[test]
    fn env_overrides_file_and_sources_say_so() {
        let f = file("[llm]\nmodel = \"from-file\"\nagent_model = \"agent-file\"\n");
        let loaded = load_with_env(
            Some(f.path()),
            &env(&[
                ("GROQ_LLM_MODEL", "from-env"),
                ("EARSHOT_STATE_DIR", "/tmp/x"),
            ]),
        )
        .unwrap();
        assert_eq!(loaded.config.llm.model, "from-env");
        assert_eq!(loaded.config.llm.agent_model, "agent-file");
        assert_eq!(loaded.config.state_dir, PathBuf::from("/tmp/x"));
        assert_eq!(
            loaded.sources["llm.model"],
            Source::Env("GROQ_LLM_MODEL".into())
        );
        assert!(matches!(loaded.sources["llm.agent_model"], Source::File(_)));
        let rows = loaded.rows();
        let temp = rows.iter().find(|r| r.0 == "llm.temperature").unwrap();
        assert_eq!(temp.2, Source::Default);
    }

    #[test]
    fn mem0_user_id_wins_over_user_id() {
        let loaded = load_with_env(
            Some(file("").path()),
            &env(&[("USER_ID", "a"), ("MEM0_USER_ID", "b")]),
        )
        .unwrap();
        assert_eq!(loaded.config.user_id, "b");
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let f = file("user_id = \"x\"\n\n[llm]\nmodel = \"m\"\nmodle = \"typo\"\n");
        let err = load_with_env(Some(f.path()), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 5"), "{err}");
        assert!(err.contains("modle"), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn bad_value_names_line() {
        let f = file("[llm]\ntemperature = \"hot\"\n");
        let err = load_with_env(Some(f.path()), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn invalid_mode_is_rejected() {
        let f = file("mode = \"fast\"\n");
        let err = load_with_env(Some(f.path()), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("mode"), "{err}");
        assert!(
            err.contains("line 1: mode: unknown mode 'fast'; use tree or graph"),
            "{err}"
        );
    }

    #[test]
    fn a_choice_names_its_dotted_key_and_line() {
        let f = file("user_id = \"a\"\n\n[stt]\nlanguage = \"en\"\norder = \"sideways\"\n");
        let err = load_with_env(Some(f.path()), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 5: stt.order: unknown order 'sideways'; use local-first, cloud-first, local-only or cloud-only"), "{err}");
        let f = file("[tts]\norder = [\"piper\", \"nonsense\"]\n");
        let err = load_with_env(Some(f.path()), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2: tts.order[1]: unknown engine 'nonsense'; use piper, espeak, cloud or wyoming"), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn a_bad_choice_from_the_environment_names_the_variable() {
        let err = load_with_env(Some(file("").path()), &env(&[("EARSHOT_MODE", "fast")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("mode: unknown mode 'fast'; use tree or graph"),
            "{err}"
        );
        assert!(err.contains("EARSHOT_MODE"), "{err}");
    }

    #[test]
    fn secrets_are_masked() {
        let loaded = load_with_env(
            Some(file("").path()),
            &env(&[("GROQ_API_KEY", "gsk_supersecretvalue1234")]),
        )
        .unwrap();
        let rows = loaded.rows();
        let key = rows.iter().find(|r| r.0 == "llm.api_key").unwrap();
        assert_eq!(key.1, "****1234");
        assert!(!format!("{rows:?}").contains("supersecret"));
    }

    #[test]
    fn the_caldav_password_comes_only_from_the_environment() {
        let f = file("[calendar]\ncaldav_url = \"http://file/cal/\"\n");
        let loaded = load_with_env(
            Some(f.path()),
            &env(&[
                ("CALDAV_PASSWORD", "hunter2secret"),
                ("EARSHOT_CALDAV_URL", "http://env/cal/"),
            ]),
        )
        .unwrap();
        assert_eq!(loaded.config.calendar.caldav_password, "hunter2secret");
        assert_eq!(loaded.config.calendar.caldav_url, "http://env/cal/");
        assert!(!format!("{:?}", loaded.config).contains("hunter2secret"));
        assert!(!format!("{:?}", loaded.rows()).contains("hunter2secret"));
        let f = file("[calendar]\ncaldav_password = \"x\"\n");
        let err = load_with_env(Some(f.path()), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("caldav_password"), "{err}");
    }

    #[test]
    fn missing_explicit_file_is_a_clear_error() {
        let err = load_with_env(Some(Path::new("/nonexistent/e.toml")), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not exist"), "{err}");
    }
}
