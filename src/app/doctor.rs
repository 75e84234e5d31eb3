//! The health probes behind `earshot doctor [--json]`: is this device
//! ready? Every check ends in
//! OK / WARN / FAIL with a one-line fix, and the exit code is non-zero when
//! anything FAILs, so an install script or a support chat can act on it.
//!
//! What is checked: config, microphone, speaker, each model file against
//! its pinned sha256, the ONNX Runtime library, LLM / STT / TTS reachability
//! with the configured key (`GET {base}/models`, 3 s), free disk space in
//! the state dir, the clock (time zone, NTP sync), database integrity,
//! the intent tree and the user's examples files, and the button line. The key is sent
//! but never printed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::config::{Config, Loaded};
use crate::device::button::ButtonSpec;

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it (empty when OK).
    pub fix: String,
}

impl Check {
    fn new(
        name: impl Into<String>,
        status: Status,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name: name.into(),
            status,
            detail: detail.into(),
            fix: fix.into(),
        }
    }
    fn ok(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check::new(name, Status::Ok, detail, "")
    }
}

/// Model files the project ships, with the sha256 `scripts/fetch-models.sh`
/// verifies (see models/PROVENANCE.md).
pub const PINNED_MODELS: &[(&str, &str)] = &[
    (
        "all-MiniLM-L6-v2-int8.onnx",
        "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    ),
    (
        "all-MiniLM-L6-v2-int8-nbits.onnx",
        "2766ab03e7d9c7c1d833d785fd472116c52339aa99ed0035ffc4ceb14c4fbf19",
    ),
    (
        "all-MiniLM-L6-v2-tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    (
        "en_US-joe-medium.onnx",
        "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
    ),
    (
        "en_US-joe-medium.onnx.json",
        "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33",
    ),
    (
        "en_US-joe-medium.encoder.onnx",
        "d1ec901486da7e2fc1483e1d30463e31b3cae59de834355c09a032831baa8916",
    ),
    (
        "en_US-joe-medium.decoder.onnx",
        "e61cba1dc51cb51ed075f89cfcc3207ef71cc422afb7d1d2dfb5c2b58b654a6c",
    ),
    (
        "silero_vad.onnx",
        "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f",
    ),
    (
        "ggml-tiny.en.bin",
        "30e882a5c44efac779d1c8ddfe1e78a2b83236d385c573f3f98345a778c21d97",
    ),
    (
        "libonnxruntime.so.1.31.1",
        "fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3",
    ),
];

const FETCH_MODELS: &str =
    "run scripts/fetch-models.sh (or sudo scripts/install.sh) to download and verify it";

/// Every check, in the order a reader fixes things.
pub fn checks(loaded: &Loaded) -> Vec<Check> {
    let config = &loaded.config;
    let mut out = vec![config_check(loaded), backends(config)];
    out.push(microphone(config));
    out.push(speaker(config));
    out.extend(models(config));
    #[cfg(feature = "whisper")]
    out.push(whisper_weights(config));
    out.push(onnxruntime(config));
    out.extend(reachability(config));
    out.extend(local_llm(config));
    out.push(disk(&config.state_dir));
    out.push(clock());
    out.push(database(config));
    out.push(intent_tree(config));
    out.push(button(&config.device.button));
    // Issue 17: what opens the microphone, and why.
    out.push(wake_word(loaded));
    out.push(calendar_sync(config));
    // Issue 18: mail over IMAP and apps through Composio.
    out.push(email(config));
    out.push(composio(config));
    if let Some(check) = notion_todos(config) {
        out.push(check);
    }
    out.extend(knowledge(config));
    out
}

/// With Notion configured: how its database stores "done" (status groups,
/// select options or a checkbox), read from its schema.
fn notion_todos(config: &Config) -> Option<Check> {
    const NAME: &str = "notion todos";
    if !crate::tools::notion_configured(&config.tools) {
        return None;
    }
    Some(match crate::tools::notion_todos(&config.tools).mapping() {
        Ok(map) => Check::ok(NAME, map.describe()),
        Err(e) => Check::new(
            NAME,
            Status::Fail,
            e.to_string(),
            "check NOTION_API_KEY and NOTION_DATABASE_ID, and the database's status property (tools.notion_status_property)",
        ),
    })
}

/// The calendar's sync state, read-only: last success, queued changes,
/// last error (a WARN while the last pass failed).
fn calendar_sync(config: &Config) -> Check {
    const NAME: &str = "calendar sync";
    let path = config.database_path();
    let c = &config.calendar;
    let state =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|conn| crate::calendar::sync::read_state(&conn));
    let target = if c.syncs() {
        format!("with {}", c.caldav_url.trim())
    } else {
        "off (calendar.caldav_url is empty; the calendar is local)".to_string()
    };
    let Ok(state) = state else {
        return Check::ok(NAME, format!("{target}; no calendar data yet"));
    };
    let last = |v: &Option<String>| v.clone().unwrap_or_else(|| "never".into());
    let detail = format!(
        "{target}; last success {}, {} change(s) queued{}",
        last(&state.last_success),
        state.queued,
        state
            .last_error
            .as_ref()
            .map(|e| format!(", last error: {e}"))
            .unwrap_or_default()
    );
    if c.syncs() && state.last_error.is_some() {
        Check::new(
            NAME,
            Status::Warn,
            detail,
            "check calendar.caldav_url, calendar.caldav_username and CALDAV_PASSWORD; `earshot calendar sync` retries now (nothing queued is lost)",
        )
    } else {
        Check::ok(NAME, detail)
    }
}

/// Issue 18: `[email]` — log in and open the mailbox (read-only), with the
/// fix for each failure.
fn email(config: &Config) -> Check {
    use crate::tools::email::{MailError, Mailbox};
    const NAME: &str = "email";
    let c = &config.email;
    let Some(mailbox) = Mailbox::new(c) else {
        return Check::ok(NAME, "off ([email] imap_host and username are not set)");
    };
    let place = format!(
        "{}@{}:{} {}",
        c.username.trim(),
        c.imap_host.trim(),
        c.imap_port,
        c.mailbox
    );
    if c.password.is_empty() {
        return Check::new(
            NAME,
            Status::Fail,
            format!("{place}: EMAIL_PASSWORD is not set"),
            "set EMAIL_PASSWORD in the environment file (an app password for Gmail or iCloud)",
        );
    }
    match mailbox.check() {
        Ok((messages, unread)) => Check::ok(
            NAME,
            format!("{place}: logged in, {messages} message(s), {unread} unread"),
        ),
        Err(e) => {
            let fix = match &e {
                MailError::Login => "check EMAIL_PASSWORD (an app password for Gmail or iCloud) and [email] username",
                MailError::Certificate(_) => "check that [email] imap_host is the name on the server's certificate, or set [email] ca_file to its CA",
                MailError::NoStartTls(_) => "use imap_port = 993, or allow_plaintext = true for a server on this machine",
                MailError::NoMailbox(_) => "set [email] mailbox to a folder that exists (usually INBOX)",
                MailError::Connect(..) | MailError::Timeout => "check [email] imap_host and imap_port and the network",
                _ => "try again; if it persists, check the mail server's log",
            };
            Check::new(NAME, Status::Fail, format!("{place}: {e}"), fix)
        }
    }
}

/// Issue 18: Composio — the key is there and a session can be made at the
/// configured URL (nothing stored).
fn composio(config: &Config) -> Check {
    use crate::tools::composio_api::{ComposioApi, ComposioError};
    const NAME: &str = "composio";
    let c = &config.composio;
    if !c.configured() {
        return Check::ok(NAME, "off (COMPOSIO_API_KEY is not set)");
    }
    let toolkits = c.toolkit_list();
    let toolkits = if toolkits.is_empty() {
        "Composio's default toolkits".to_string()
    } else {
        toolkits.join(", ")
    };
    match ComposioApi::probe(c, &config.user_id) {
        Ok(_) => Check::ok(
            NAME,
            format!(
                "{}: key accepted, session created ({toolkits})",
                c.base_url.trim()
            ),
        ),
        Err(e) => {
            let fix = match &e {
                ComposioError::KeyRefused => "check COMPOSIO_API_KEY (a project key from the Composio dashboard)",
                ComposioError::RateLimited(_) => "wait and run doctor again",
                ComposioError::Unreachable { .. } | ComposioError::Timeout => {
                    "check COMPOSIO_BASE_URL (default https://backend.composio.dev) and the network"
                }
                _ => "check COMPOSIO_BASE_URL and COMPOSIO_TOOLKITS (toolkit slugs such as gmail,github)",
            };
            Check::new(
                NAME,
                Status::Fail,
                format!("{}: {e}", c.base_url.trim()),
                fix,
            )
        }
    }
}

/// The intent tree and the user's examples files, checked as `earshot tree
/// check` does (nothing is embedded). Problems are a WARN, not a FAIL: the
/// device still answers (through the router graph, or from the set without
/// the broken file).
fn intent_tree(config: &Config) -> Check {
    use crate::tree::engine::{check_intents_alone, check_with, read_tree};
    use crate::tree::user_intents;
    let dir = user_intents::dir(&config.paths());
    let user = user_intents::read_dir(&dir);
    let (result, problems) = match read_tree(&config.tree.file) {
        Ok((tree, label, base)) => check_with(tree, &label, base.as_deref(), &user),
        Err(e) => (Err(e), check_intents_alone(&user)),
    };
    let errors: Vec<_> = problems
        .iter()
        .filter(|p| p.severity == crate::tree::validate::Severity::Error)
        .collect();
    let fix = "run `earshot tree check` to list every problem, one per line, and fix them";
    match (result, errors.first()) {
        (Err(e), _) => Check::new(
            "intent tree",
            Status::Warn,
            format!("{e}; every turn goes to the router graph"),
            fix,
        ),
        (Ok(_), Some(first)) => Check::new(
            "intent tree",
            Status::Warn,
            format!(
                "{} problem{} in the examples files of {} (files with errors are left out), first: {first}",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                dir.display()
            ),
            fix,
        ),
        (Ok(checked), None) => Check::ok(
            "intent tree",
            format!(
                "{} ({} nodes), {} examples file{} in {}",
                checked.label,
                checked.tree.nodes.len(),
                user.files.len(),
                if user.files.len() == 1 { "" } else { "s" },
                dir.display()
            ),
        ),
    }
}

fn config_check(loaded: &Loaded) -> Check {
    match &loaded.file {
        Some(path) => Check::ok("config", format!("{} (valid)", path.display())),
        None => Check::new(
            "config",
            Status::Warn,
            "no config file found; running on defaults",
            "copy earshot.example.toml to /etc/earshot/earshot.toml (install.sh does this) and edit it",
        ),
    }
}

/// What the config picked from each name table, and any name
/// `tools.enabled` gives that the tool table does not have.
fn backends(config: &Config) -> Check {
    let picked = super::backends::picked(config).join("; ");
    let unknown = super::backends::unknown_tools(config);
    if unknown.is_empty() {
        return Check::ok("backends", picked);
    }
    Check::new(
        "backends",
        Status::Warn,
        format!(
            "tools.enabled names unknown tool(s) {}, which are ignored; {picked}",
            unknown.join(", ")
        ),
        format!(
            "remove them from tools.enabled; the tools are {} (`earshot devices` lists every backend)",
            crate::choice::one_of(crate::tools::TOOLS)
        ),
    )
}

// ---- audio ----------------------------------------------------------------

/// ALSA's `null` device swallows audio: present on every machine, useless.
fn is_null_device(d: &crate::audio::devices::DeviceInfo) -> bool {
    d.name == "null"
        || d.description
            .to_ascii_lowercase()
            .contains("discard all samples")
}

fn audio_check(name: &str, wanted: &str, input: bool) -> Check {
    let key = if input { "audio.input" } else { "audio.output" };
    let fix_missing = if input {
        "connect the reSpeaker HAT (and install its driver), then set audio.input to a name from `earshot devices`"
    } else {
        "connect a speaker (reSpeaker jack or USB), then set audio.output to a name from `earshot devices`"
    };
    if input && crate::audio::is_file_name(wanted) {
        let path = Path::new(wanted.strip_prefix("file:").unwrap_or(wanted));
        return if path.is_file() {
            Check::ok(name, format!("{key} is the file {}", path.display()))
        } else {
            Check::new(
                name,
                Status::Fail,
                format!("{key} file {} does not exist", path.display()),
                format!("fix the path in {key} or set it to \"default\""),
            )
        };
    }
    if !input && wanted.to_ascii_lowercase().ends_with(".wav") {
        return Check::ok(name, format!("{key} writes to the file {wanted}"));
    }
    let no_card = if Path::new("/dev/snd").exists() {
        ""
    } else {
        " (no /dev/snd: the kernel sees no sound card)"
    };
    let side = if input { "capture" } else { "playback" };
    if wanted == "default" {
        return match default_device(input) {
            Ok(detail) => Check::ok(name, detail),
            Err(reason) => Check::new(
                name,
                Status::Fail,
                format!("no usable default {side} device: {reason}{no_card}"),
                fix_missing,
            ),
        };
    }
    let devices = match crate::audio::devices::list() {
        Ok(d) => d,
        Err(e) => {
            return Check::new(
                name,
                Status::Fail,
                format!("cannot list audio devices: {e}"),
                fix_missing,
            )
        }
    };
    let usable: Vec<_> = devices
        .iter()
        .filter(|d| if input { d.input } else { d.output })
        .filter(|d| !is_null_device(d))
        .collect();
    match usable.iter().find(|d| d.name == wanted) {
        Some(d) => {
            let formats = if input {
                &d.input_formats
            } else {
                &d.output_formats
            };
            Check::ok(
                name,
                format!(
                    "{} ({}; {})",
                    d.name,
                    d.description,
                    formats
                        .first()
                        .map(String::as_str)
                        .unwrap_or("formats unknown")
                ),
            )
        }
        None => Check::new(
            name,
            Status::Fail,
            format!(
                "{key} = {wanted:?} not found{no_card}; available: {}",
                if usable.is_empty() {
                    "none".to_string()
                } else {
                    usable
                        .iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
            format!("set {key} to one of the available names (`earshot devices`) or \"default\""),
        ),
    }
}

/// Open the backend's default device far enough to read its preferred
/// format — enumeration alone lists ALSA's `null` sink on a box without a
/// sound card, and misses a `default` defined only in an ALSA config.
fn default_device(input: bool) -> Result<String, String> {
    use cpal::traits::{DeviceTrait, HostTrait};
    let host = cpal::default_host();
    let device = if input {
        host.default_input_device()
    } else {
        host.default_output_device()
    }
    .ok_or_else(|| "the audio backend has no default device".to_string())?;
    let config = if input {
        device.default_input_config()
    } else {
        device.default_output_config()
    }
    .map_err(|e| e.to_string().replace('\n', " "))?;
    let id = device
        .id()
        .map(|i| i.to_string())
        .unwrap_or_else(|_| "default".into());
    Ok(format!(
        "{} ({} Hz, {} ch, {:?})",
        crate::audio::devices::config_name(&id),
        config.sample_rate(),
        config.channels(),
        config.sample_format()
    ))
}

fn microphone(config: &Config) -> Check {
    if crate::wyoming::satellite::is_no_input(&config.audio.input) {
        let n = config.wyoming.satellites.len();
        return if n > 0 {
            Check::ok(
                "microphone",
                format!("no local microphone (audio.input = \"none\"); listening through {n} Wyoming satellite(s)"),
            )
        } else {
            Check::new(
                "microphone",
                Status::Fail,
                "audio.input is \"none\" and wyoming.satellites is empty: nothing to listen to",
                "set audio.input to a name from `earshot devices`, or list satellites in wyoming.satellites",
            )
        };
    }
    audio_check("microphone", &config.audio.input, true)
}

fn speaker(config: &Config) -> Check {
    audio_check("speaker", &config.audio.output, false)
}

// ---- models ---------------------------------------------------------------

/// The model files this config uses, with what goes missing without each.
fn configured_models(config: &Config) -> Vec<(String, &'static str)> {
    vec![
        (
            config.nlu.model_file.clone(),
            "on-device routing falls back to the LLM",
        ),
        (
            config.nlu.tokenizer_file.clone(),
            "on-device routing falls back to the LLM",
        ),
        (
            config.stt.whisper_model.clone(),
            "speech-to-text needs the cloud",
        ),
        (
            format!("{}.onnx", config.tts.piper_voice),
            "speech falls back to espeak-ng",
        ),
        (
            format!("{}.onnx.json", config.tts.piper_voice),
            "speech falls back to espeak-ng",
        ),
        (
            format!("{}.encoder.onnx", config.tts.piper_voice),
            "Piper decodes whole sentences (memory grows with the answer)",
        ),
        (
            format!("{}.decoder.onnx", config.tts.piper_voice),
            "Piper decodes whole sentences (memory grows with the answer)",
        ),
    ]
    .into_iter()
    .chain(config.audio.vad.speech_check.then(|| {
        (
            "silero_vad.onnx".to_string(),
            "noise webrtc-vad lets through is transcribed (and may be answered in always mode)",
        )
    }))
    .collect()
}

fn models(config: &Config) -> Vec<Check> {
    configured_models(config)
        .into_iter()
        .map(|(file, without)| model_check(&config.models_dir, &file, without))
        .collect()
}

/// Which weights whisper runs on: the q8_0 copy (written on first load)
/// or the model file as it is.
#[cfg(feature = "whisper")]
fn whisper_weights(config: &Config) -> Check {
    let name = "whisper weights";
    let source = config.models_dir.join(&config.stt.whisper_model);
    if config.stt.whisper_weights == crate::stt::Weights::File {
        return Check::ok(
            name,
            format!(
                "{} as it is ([stt] whisper_weights = \"file\")",
                source.display()
            ),
        );
    }
    let cache = config.state_dir.join("cache");
    match crate::stt::quantize::existing_copy(&source, &cache) {
        Some(copy) => Check::ok(name, format!("q8_0 copy {}", copy.display())),
        None if crate::stt::quantize::already_quantised(&source) => {
            Check::ok(name, format!("{} (already quantised)", source.display()))
        }
        None if source.is_file() => Check::ok(
            name,
            format!(
                "q8_0, derived from {} on the first load (beside it, or in {} when that is read-only)",
                source.display(),
                cache.display()
            ),
        ),
        None => Check::ok(name, "q8_0 once the model is there"),
    }
}

fn model_check(dir: &Path, file: &str, without: &str) -> Check {
    let name = format!("model {file}");
    let path = dir.join(file);
    if !path.is_file() {
        return Check::new(
            name,
            Status::Warn,
            format!("{} is missing; {without}", path.display()),
            FETCH_MODELS,
        );
    }
    let pinned = PINNED_MODELS
        .iter()
        .find(|(n, _)| *n == file)
        .map(|(_, s)| *s);
    match (sha256_file(&path), pinned) {
        (Err(e), _) => Check::new(
            name,
            Status::Fail,
            format!("cannot read {}: {e}", path.display()),
            "check the file's permissions (the service user must read it)",
        ),
        (Ok(got), Some(want)) if got == want => {
            Check::ok(name, format!("{} (sha256 verified)", path.display()))
        }
        (Ok(got), Some(want)) => Check::new(
            name,
            Status::Fail,
            format!(
                "{} is corrupt or a different version (sha256 {}…, expected {}…)",
                path.display(),
                &got[..12],
                &want[..12]
            ),
            format!("delete it and {FETCH_MODELS}"),
        ),
        (Ok(got), None) => Check::ok(
            name,
            format!(
                "{} (not a pinned model; sha256 {}…)",
                path.display(),
                &got[..12]
            ),
        ),
    }
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

fn onnxruntime(config: &Config) -> Check {
    match crate::onnx::onnxruntime_status(&config.paths()) {
        Ok(path) => {
            let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
            let pinned = PINNED_MODELS
                .iter()
                .find(|(n, _)| *n == file)
                .map(|(_, s)| *s);
            match (pinned, sha256_file(&path)) {
                (Some(want), Ok(got)) if got != want => Check::new(
                    "onnxruntime",
                    Status::Fail,
                    format!("{} does not match its pinned sha256", path.display()),
                    format!("delete it and {}", crate::onnx::FETCH_HINT),
                ),
                _ => Check::ok("onnxruntime", path.display().to_string()),
            }
        }
        // Say what the device loses: on armv7 (no ONNX Runtime build) this
        // is the expected state, and the tree still runs its other nodes.
        Err(reason) => Check::new(
            "onnxruntime",
            Status::Warn,
            format!(
                "{reason}; without it the intent tree's classify nodes take their fallback (the router graph), routing asks the LLM, and Piper falls back to espeak-ng"
            ),
            crate::onnx::FETCH_HINT,
        ),
    }
}

// ---- network --------------------------------------------------------------

/// One cloud endpoint to probe.
struct Endpoint {
    name: &'static str,
    base_url: String,
    /// Whether the device depends on it (FAIL) or only falls back to it (WARN).
    required: bool,
    /// The key this engine sends (never printed).
    key: String,
    what_for: &'static str,
}

fn endpoints(config: &Config) -> Vec<Endpoint> {
    let mut out = vec![Endpoint {
        name: "llm",
        base_url: config.llm.base_url.clone(),
        required: true,
        key: config.llm.api_key.trim().to_string(),
        what_for: "general answers and tool calls",
    }];
    if config.stt.order != crate::stt::Order::LocalOnly {
        out.push(Endpoint {
            name: "stt (cloud)",
            base_url: config.stt.cloud_base_url.clone(),
            required: config.stt.order == crate::stt::Order::CloudOnly,
            key: if config.stt.cloud_api_key.trim().is_empty() {
                config.llm.api_key.trim().to_string()
            } else {
                config.stt.cloud_api_key.trim().to_string()
            },
            what_for: "speech-to-text fallback",
        });
    }
    if config.tts.order.contains(&crate::tts::Engine::Cloud) {
        out.push(Endpoint {
            name: "tts (cloud)",
            base_url: config.tts.cloud_base_url.clone(),
            required: false,
            key: config.llm.api_key.trim().to_string(),
            what_for: "cloud voice",
        });
    }
    out
}

fn reachability(config: &Config) -> Vec<Check> {
    let endpoints = endpoints(config);
    std::thread::scope(|scope| {
        let handles: Vec<_> = endpoints.iter().map(|e| scope.spawn(|| probe(e))).collect();
        handles
            .into_iter()
            .zip(&endpoints)
            .map(|(h, e)| {
                h.join().unwrap_or_else(|_| {
                    Check::new(
                        e.name,
                        Status::Fail,
                        "the probe crashed",
                        "run `earshot doctor -v` and report it",
                    )
                })
            })
            .collect()
    })
}

fn probe(endpoint: &Endpoint) -> Check {
    let key = endpoint.key.as_str();
    let name = endpoint.name;
    let base = endpoint.base_url.trim().trim_end_matches('/');
    let failing = if endpoint.required {
        Status::Fail
    } else {
        Status::Warn
    };
    if base.is_empty() {
        return Check::new(
            name,
            failing,
            format!(
                "no base URL configured; without it: no {}",
                endpoint.what_for
            ),
            "set the base_url for it in the config",
        );
    }
    let cloud = base.contains("api.groq.com");
    if key.is_empty() && cloud {
        return Check::new(
            name,
            Status::Warn,
            format!(
                "no API key for {base}; without it: no {} (on-device answers still work)",
                endpoint.what_for
            ),
            "set GROQ_API_KEY in /etc/earshot/earshot.env (or [llm] api_key), then restart",
        );
    }
    let agent = crate::http::HttpSettings::with_deadline(Duration::from_secs(3)).agent();
    let url = format!("{base}/models");
    let mut request = agent.get(&url);
    if !key.is_empty() {
        request = request.header("Authorization", format!("Bearer {key}"));
    }
    match request.call() {
        Ok(response) => {
            let status = response.status().as_u16();
            match status {
                200..=299 => Check::ok(name, format!("{base} answers (HTTP {status}{})", if key.is_empty() { ", no key" } else { ", key accepted" })),
                401 | 403 => Check::new(name, Status::Fail, format!("{base} refused the API key (HTTP {status})"), "check GROQ_API_KEY (a new key from console.groq.com), then restart"),
                404 | 405 if !cloud => Check::ok(name, format!("{base} answers (HTTP {status} for /models; a local server without the listing)")),
                _ => Check::new(name, failing, format!("{base} answered HTTP {status} to GET /models"), "check the base URL; the service may be down — retry later"),
            }
        }
        Err(e) => {
            let reason = match e {
                ureq::Error::Timeout(_) => "no answer within 3 s".to_string(),
                other => other.to_string().replace('\n', " "),
            };
            Check::new(
                name,
                failing,
                format!(
                    "{base} is unreachable ({reason}); without it: no {}",
                    endpoint.what_for
                ),
                "check the network (ping, DNS) and the base URL",
            )
        }
    }
}

// ---- disk and database ----------------------------------------------------

/// The nearest existing directory of `path` (the state dir may not exist yet).
fn existing_ancestor(path: &Path) -> PathBuf {
    let mut current = path.to_path_buf();
    loop {
        if current.exists() {
            return current;
        }
        match current.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => current = parent.to_path_buf(),
            _ => return PathBuf::from("."),
        }
    }
}

/// Free bytes for an unprivileged user on the file system holding `path`.
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains a NUL byte")
    })?;
    // SAFETY: `statvfs` only writes into the zeroed struct we pass and reads
    // the NUL-terminated path, which outlives the call.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stats) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // the field types differ between targets
    Ok(stats.f_bavail as u64 * stats.f_frsize as u64)
}

fn disk(state_dir: &Path) -> Check {
    let at = existing_ancestor(state_dir);
    match free_bytes(&at) {
        Ok(bytes) => {
            let mb = bytes / 1_000_000;
            let detail = format!("{} MB free at {}", mb, at.display());
            if mb < 100 {
                Check::new(
                    "disk",
                    Status::Fail,
                    detail,
                    "free space on that file system: turns cannot be saved below ~100 MB",
                )
            } else if mb < 1000 {
                Check::new(
                    "disk",
                    Status::Warn,
                    detail,
                    "free some space (old logs, apt caches: sudo apt-get clean)",
                )
            } else {
                Check::ok("disk", detail)
            }
        }
        Err(e) => Check::new(
            "disk",
            Status::Warn,
            format!("cannot measure free space at {}: {e}", at.display()),
            "check that the state dir exists and is readable",
        ),
    }
}

/// The clock timers, alarms and the prompts' "Now:" line follow: the time
/// zone (name and offset) and whether NTP has synced the kernel's clock.
/// An unsynced clock is a WARN (alarms would ring at the wrong time); a
/// status that cannot be read (a container, no `adjtimex`) says "unknown".
fn clock() -> Check {
    use crate::device::clock::{self, NtpSync};
    let now = clock::local(chrono::Utc::now());
    let offset = format!("UTC{}", clock::offset_text(*now.time.offset()));
    let zone = clock::zone_name();
    let set_zone = "set the time zone: sudo timedatectl set-timezone Europe/Berlin (your zone; `timedatectl list-timezones` lists them), or TZ=Area/City in the service's environment";
    let (zone_text, zone_problem) = match &zone {
        Some(z) if z.name.contains('/') && !zoneinfo_has(&z.name) => (
            format!(
                "{} (from {}) is not a known zone, so {offset} is used",
                z.name, z.source
            ),
            true,
        ),
        Some(z) => (
            format!("{} {} ({offset}, from {})", z.name, now.abbrev, z.source),
            false,
        ),
        None => (format!("no time zone set, {offset}"), true),
    };
    let ntp = clock::ntp_sync();
    let ntp_text = match &ntp {
        NtpSync::Synced { max_error_us } => {
            format!("NTP synced (max error {} ms)", max_error_us / 1000)
        }
        NtpSync::NotSynced => "NTP not synced".to_string(),
        NtpSync::Unknown(why) => format!("NTP sync unknown: {why}"),
    };
    let detail = format!("{zone_text}; {ntp_text}");
    match (ntp, zone_problem) {
        (NtpSync::NotSynced, _) => Check::new(
            "clock",
            Status::Warn,
            detail,
            "turn on time sync so timers and alarms ring on time: sudo timedatectl set-ntp true \
(systemd-timesyncd), and check the network reaches an NTP server",
        ),
        (_, true) => Check::new("clock", Status::Warn, detail, set_zone),
        _ => Check::ok("clock", detail),
    }
}

/// Whether the system's zone database knows a zone name.
fn zoneinfo_has(name: &str) -> bool {
    [
        "/usr/share/zoneinfo",
        "/usr/lib/zoneinfo",
        "/usr/share/lib/zoneinfo",
    ]
    .iter()
    .any(|dir| Path::new(dir).join(name).is_file())
}

fn database(config: &Config) -> Check {
    let path = config.database_path();
    if !path.exists() {
        return Check::ok(
            "database",
            format!(
                "{} not created yet (the first turn creates it)",
                path.display()
            ),
        );
    }
    let store = match crate::store::Store::open(&path) {
        Ok(s) => s,
        Err(e) => {
            return Check::new(
                "database",
                Status::Fail,
                e.to_string(),
                format!(
                    "stop earshot, move {} aside (keep it), restart to get a fresh one",
                    path.display()
                ),
            )
        }
    };
    match store.integrity_check() {
        Ok(result) if result == "ok" => {
            let version = store
                .schema_version()
                .map(|v| format!(", schema v{v}"))
                .unwrap_or_default();
            Check::ok(
                "database",
                format!("{} passes quick_check{version}", path.display()),
            )
        }
        Ok(result) => Check::new(
            "database",
            Status::Fail,
            format!(
                "{} is damaged: {}",
                path.display(),
                result.replace('\n', "; ")
            ),
            format!(
                "stop earshot and recover it: sqlite3 {} .recover > dump.sql (keep the original)",
                path.display()
            ),
        ),
        Err(e) => Check::new(
            "database",
            Status::Fail,
            e.to_string(),
            "stop earshot and check the file's permissions and disk",
        ),
    }
}

// ---- knowledge base (issue 19) ------------------------------------------

/// The knowledge base: the PDF reader, the reranker in use (model and
/// sha256, or the calibrated fusion and where its calibration came from),
/// and how many documents, chunks and text-less files it holds.
fn knowledge(config: &Config) -> Vec<Check> {
    let k = &config.knowledge;
    let pdf = match crate::knowledge::pdf::check(&k.pdf_program) {
        Ok(version) => Check::ok("PDF reader", format!("{} ({version})", k.pdf_program)),
        Err(why) => Check::new(
            "PDF reader",
            Status::Warn,
            why,
            "apt-get install poppler-utils (or scripts/knowledge-tools.sh)",
        ),
    };
    let (model, _) = crate::knowledge::rerank::cross_encoder_paths(k, &config.paths());
    let reranker = if model.is_file() {
        match sha256_file(&model) {
            Ok(sha) => Check::ok(
                "reranker",
                format!("cross-encoder {} (sha256 {sha})", model.display()),
            ),
            Err(e) => Check::new(
                "reranker",
                Status::Warn,
                format!(
                    "cannot read {}: {e}; reranking by the calibrated fusion",
                    model.display()
                ),
                "check the file's permissions",
            ),
        }
    } else {
        let paragraphs = if k.paragraph_top_k > 1 {
            format!(
                "; its first {} ordered again by their best paragraph (weight {})",
                k.paragraph_top_k,
                crate::knowledge::paragraph::WEIGHT
            )
        } else {
            String::new()
        };
        Check::ok(
            "reranker",
            format!(
                "calibrated fusion, no cross-encoder model ({} is absent): {}{paragraphs}",
                model.display(),
                crate::knowledge::rerank::FUSION_CALIBRATION
            ),
        )
    };
    let path = config.database_path();
    let contents = if !path.exists() {
        Check::ok("knowledge base", "empty (nothing ingested yet)")
    } else {
        match crate::store::Store::open(&path)
            .map_err(|e| e.to_string())
            .and_then(|s| {
                s.with_conn(crate::knowledge::store::stats)
                    .map_err(|e| e.to_string())
            }) {
            Ok(st) => {
                let detail = format!(
                    "{} documents, {} chunks; {} files yielded no text, {} others failed",
                    st.documents, st.chunks, st.no_text, st.failed
                );
                if st.no_text + st.failed > 0 {
                    Check::new(
                        "knowledge base",
                        Status::Warn,
                        detail,
                        "see which: earshot ingest FOLDER --apply (one line per file); scans need OCR first",
                    )
                } else {
                    Check::ok("knowledge base", detail)
                }
            }
            Err(e) => Check::new(
                "knowledge base",
                Status::Warn,
                e,
                "see the database check above",
            ),
        }
    };
    vec![pdf, reranker, contents]
}

// ---- button ---------------------------------------------------------------

fn button(spec: &ButtonSpec) -> Check {
    let set_none = "or set device.button = \"none\" to use the voice wake-up only";
    let device_check = |path: &Path, what: &str| -> Check {
        let shown = path.display();
        if !path.exists() {
            return Check::new("button", Status::Fail, format!("{what} {shown} does not exist"), format!("enable the device (GPIO: check /boot/firmware/config.txt; input: `ls /dev/input`) {set_none}"));
        }
        match std::fs::OpenOptions::new().read(true).open(path) {
            Ok(_) => Check::ok("button", format!("{what} {shown} is present and readable")),
            Err(e) => Check::new(
                "button",
                Status::Fail,
                format!("{what} {shown} cannot be opened: {e}"),
                "add the service user to the gpio/input group (install.sh does) and restart",
            ),
        }
    };
    match spec {
        ButtonSpec::None => Check::ok("button", "no button configured"),
        ButtonSpec::Enter => Check::ok("button", "Enter key on the terminal (for development)"),
        ButtonSpec::Gpio { chip, line } => device_check(chip, &format!("GPIO chip (line {line})")),
        ButtonSpec::Input { path, .. } => device_check(path, "input device"),
        ButtonSpec::Script(path) => {
            if path.exists() {
                Check::ok("button", format!("scripted events from {}", path.display()))
            } else {
                Check::new(
                    "button",
                    Status::Fail,
                    format!("button script {} does not exist", path.display()),
                    "fix the path in device.button",
                )
            }
        }
    }
}

// ---- the on-device language model (issue 20) --------------------------------

/// sha256 of the GGUF `scripts/fetch-llm.sh` fetches.
pub const LOCAL_GGUF_SHA256: (&str, &str) = (
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
);

/// `llm (local)`: the GGUF and llama-server are there and load (the child
/// is started, asked `/health` and stopped); `llm routes`: which model
/// answers each route now.
fn local_llm(config: &Config) -> Vec<Check> {
    use crate::llm::Source;
    let cfg = &config.llm;
    let mut out = Vec::new();
    let local_ok = if cfg.order.contains(&Source::Local) {
        let model = crate::llm::local::LocalModel::new(&cfg.local, &config.paths());
        let fix = "run scripts/fetch-models.sh (it fetches the GGUF and builds llama-server into models_dir)";
        let check = match model.check_files() {
            Err(e) => Check::new("llm (local)", Status::Warn, e.to_string(), fix),
            Ok(()) => {
                let path = config.paths().model_path(&cfg.local.model_file);
                let pinned =
                    (cfg.local.model_file == LOCAL_GGUF_SHA256.0).then_some(LOCAL_GGUF_SHA256.1);
                match (pinned, sha256_file(&path)) {
                    (Some(want), Ok(got)) if got != want => Check::new(
                        "llm (local)",
                        Status::Warn,
                        format!("{} does not match its pinned sha256", path.display()),
                        fix,
                    ),
                    _ => {
                        let started = std::time::Instant::now();
                        match model.ensure_running() {
                            Ok(_) => {
                                let rss = model.rss_kib().unwrap_or(0) / 1024;
                                model.stop();
                                Check::ok(
                                    "llm (local)",
                                    format!(
                                        "{} loads in llama-server in {} ms ({rss} MB resident)",
                                        cfg.local.model_file,
                                        started.elapsed().as_millis()
                                    ),
                                )
                            }
                            Err(e) => Check::new("llm (local)", Status::Warn, e.to_string(), fix),
                        }
                    }
                }
            }
        };
        let ok = check.status == Status::Ok;
        out.push(check);
        ok
    } else {
        false
    };
    let remote_ok = cfg.order.contains(&Source::Remote) && cfg.is_usable();
    let first = cfg.order.iter().find(|s| match s {
        Source::Remote => remote_ok,
        Source::Local => local_ok,
    });
    let order: Vec<&str> = cfg.order.iter().map(|s| s.name()).collect();
    let (status, detail) = match first {
        Some(Source::Remote) => (
            Status::Ok,
            format!(
                "simple, persona, summaries, memory: remote ({}); context with tools: remote ({}){}",
                cfg.model,
                cfg.agent_model,
                if local_ok { "; local if it fails" } else { "" }
            ),
        ),
        Some(Source::Local) => (
            Status::Ok,
            format!(
                "simple, persona, summaries, memory: local ({}); context: local without tools (device commands: \"I can't do that yet\")",
                cfg.local.model_file
            ),
        ),
        None => (
            Status::Warn,
            "none: open questions get \"I need a language model\"".to_string(),
        ),
    };
    out.push(Check::new(
        "llm routes",
        status,
        format!("order {}: {detail}", order.join(", ")),
        if first.is_none() {
            "set GROQ_API_KEY, or run scripts/fetch-models.sh for the on-device model"
        } else {
            ""
        },
    ));
    out
}

/// Issue 17: the wake mode in effect and where it was set; in `wake` mode
/// the detector is opened as `earshot run` would (a model that can't be
/// loaded is a FAIL: the device would listen to the button only).
pub fn wake_word(loaded: &Loaded) -> Check {
    let config = &loaded.config;
    let wake = &config.wake;
    let why = match loaded.sources.get("wake.mode") {
        Some(source) => format!("set by {source}"),
        None => "the default".to_string(),
    };
    let name = "wake word";
    match wake.mode {
        crate::wake::WakeMode::Always => Check::new(
            name,
            Status::Warn,
            format!("wake.mode = always ({why}): every sentence heard is a request"),
            "set [wake] mode = \"wake\" (or EARSHOT_WAKE_MODE=wake) to answer only after the wake word",
        ),
        crate::wake::WakeMode::Button => {
            if config.device.button == ButtonSpec::None {
                Check::new(
                    name,
                    Status::Fail,
                    format!("wake.mode = button ({why}) but [device] button = none: nothing can start a request"),
                    "set [device] button (e.g. gpio:/dev/gpiochip0:17) or wake.mode = \"wake\"",
                )
            } else {
                Check::ok(name, format!("wake.mode = button ({why}): a press starts a request"))
            }
        }
        crate::wake::WakeMode::Wake => {
            let gate = crate::voice_loop::wake::WakeGate::from_config(
                wake,
                &config.wyoming,
                &config.paths(),
            );
            match gate {
                Some(gate) if gate.failed().is_some() => Check::new(
                    name,
                    Status::Fail,
                    format!(
                        "wake.mode = wake ({why}), but {}; earshot run listens to the button only",
                        gate.failed().unwrap_or_default()
                    ),
                    "run scripts/fetch-models.sh, or fix wake.words (or set wake.mode = \"button\")",
                ),
                Some(gate) => Check::ok(
                    name,
                    format!(
                        "wake.mode = wake ({why}): {} on {} (threshold {}, {} trigger frame(s)); a press starts a request too",
                        wake.effective_words(&config.wyoming).join(", "),
                        gate.describe(),
                        wake.threshold,
                        wake.trigger_frames
                    ),
                ),
                None => Check::ok(name, format!("wake.mode = wake ({why})")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llm_routes_say_which_model_answers() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config {
            state_dir: dir.path().to_path_buf(),
            models_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        // No key and no GGUF: the local check says how to fetch it and no
        // route has a model.
        let checks = local_llm(&config);
        assert_eq!(checks[0].name, "llm (local)");
        assert_eq!(checks[0].status, Status::Warn);
        assert!(checks[0].fix.contains("fetch-models.sh"), "{:?}", checks[0]);
        assert_eq!(checks[1].status, Status::Warn);
        assert!(checks[1].detail.contains("none"), "{:?}", checks[1]);
        // A usable remote answers every route, with tools.
        config.llm.api_key = "gsk_test_key_value".into();
        config.llm.order = vec![crate::llm::Source::Remote];
        let checks = local_llm(&config);
        assert_eq!(checks.len(), 1);
        assert!(
            checks[0].detail.contains("context with tools: remote"),
            "{:?}",
            checks[0]
        );
    }

    #[test]
    fn intent_tree_warns_on_a_broken_examples_file_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            state_dir: dir.path().to_path_buf(),
            ..Default::default()
        };
        let c = intent_tree(&config);
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(c.detail.contains("the default tree") && c.detail.contains("0 examples files"));
        std::fs::create_dir(dir.path().join("intents")).unwrap();
        std::fs::write(dir.path().join("intents/device.txt"), "oops\n").unwrap();
        let c = intent_tree(&config);
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(c.detail.contains("device.txt:1: utterance"), "{c:?}");
        assert!(c.fix.contains("earshot tree check"));
    }

    #[cfg(feature = "whisper")]
    #[test]
    fn whisper_weights_says_which_file_whisper_runs_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config {
            state_dir: dir.path().join("state"),
            models_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        config.stt.whisper_model = "ggml-test.bin".into();
        let source = dir.path().join("ggml-test.bin");
        let c = whisper_weights(&config);
        assert!(c.detail.contains("once the model is there"), "{c:?}");
        std::fs::write(&source, crate::stt::quantize::tests::model(64, 32).0).unwrap();
        let c = whisper_weights(&config);
        assert!(
            c.detail.contains("derived from") && c.detail.contains("first load"),
            "{c:?}"
        );
        let copy = crate::stt::quantize::model_to_load(
            &source,
            crate::stt::Weights::Q8_0,
            &config.state_dir.join("cache"),
        );
        let c = whisper_weights(&config);
        assert!(c.detail.contains(&copy.display().to_string()), "{c:?}");
        config.stt.whisper_model = copy.file_name().unwrap().to_str().unwrap().into();
        let c = whisper_weights(&config);
        assert!(c.detail.contains("already quantised"), "{c:?}");
        config.stt.whisper_weights = crate::stt::Weights::File;
        let c = whisper_weights(&config);
        assert!(c.detail.contains("as it is"), "{c:?}");
        assert_eq!(c.status, Status::Ok);
    }

    #[test]
    fn backends_reads_the_name_tables_and_warns_on_an_unknown_tool() {
        let mut config = Config::default();
        let c = backends(&config);
        assert_eq!(c.status, Status::Ok);
        assert!(c.detail.contains("tts.order = piper, espeak"), "{c:?}");
        config.tools.enabled.push("telepathy".into());
        let c = backends(&config);
        assert_eq!(c.status, Status::Warn);
        assert!(c.detail.contains("telepathy"), "{c:?}");
        assert!(c.fix.contains("calculator, web_search"), "{c:?}");
    }

    #[test]
    fn button_specs() {
        let button = |spec: &str| button(&spec.parse().unwrap());
        assert_eq!(button("none").status, Status::Ok);
        assert_eq!(
            button("gpio:/nonexistent/gpiochip9:17").status,
            Status::Fail
        );
        assert!(button("gpio:/nonexistent/gpiochip9:17")
            .detail
            .contains("/nonexistent/gpiochip9"));
        assert_eq!(button("gpio:/dev/null:17").status, Status::Ok);
        // A spec that is not in the table no longer reaches doctor: the
        // config refuses it at load (device::button::tests).
        assert!("gpio:/dev/null:x".parse::<ButtonSpec>().is_err());
        assert!("bogus".parse::<ButtonSpec>().is_err());
    }

    #[test]
    fn model_hash_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ggml-tiny.en.bin"), b"not the model").unwrap();
        let c = model_check(dir.path(), "ggml-tiny.en.bin", "x");
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.fix.contains("fetch-models.sh"));
        assert_eq!(
            model_check(dir.path(), "absent.bin", "x").status,
            Status::Warn
        );
        std::fs::write(dir.path().join("mine.bin"), b"abc").unwrap();
        let c = model_check(dir.path(), "mine.bin", "x");
        assert_eq!(c.status, Status::Ok);
        assert!(c.detail.contains("ba7816bf8f01"), "{c:?}"); // sha256("abc")
    }

    #[test]
    fn free_space_is_measured() {
        assert!(free_bytes(Path::new("/")).unwrap() > 0);
        assert_eq!(
            existing_ancestor(Path::new("/nonexistent/a/b")),
            PathBuf::from("/")
        );
    }
}
