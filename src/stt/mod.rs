//! Speech to text: local whisper.cpp first, Groq's Whisper as fallback.
//!
//! Every backend implements [`Transcriber`]; [`Stt`] holds them in the
//! configured order (`local-first`, `cloud-first`, `local-only`,
//! `cloud-only`) and tries the next one when a backend fails. Built once at
//! start (the whisper model stays loaded across turns), shared by the
//! voice loop and `earshot transcribe`.
//!
//! ```no_run
//! let loaded = earshot::config::load(None)?;
//! let stt = earshot::app::stt(&loaded.config)?;
//! stt.warm_up_in_background();
//! let audio = vec![0.0f32; 16_000];
//! let t = stt.transcribe(&audio)?;
//! println!("{} ({} via {}, {} ms)", t.display_text(), t.engine, t.path, t.timings.stt_ms);
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod gaps;
pub mod groq;
#[cfg(feature = "whisper")]
pub mod quantize;
#[cfg(feature = "whisper")]
pub mod restart;
pub mod text;
#[cfg(feature = "whisper")]
pub mod whisper;
pub mod wyoming;

use crate::cancel::CancelToken;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// `[stt]` (Debug is hand-written: it never prints the key)
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SttConfig {
    /// local-first | cloud-first | local-only | cloud-only
    pub order: Order,
    /// ggml model file under `models_dir`.
    pub whisper_model: String,
    /// `q8_0` (default): load an 8-bit copy of the weights, derived once
    /// beside the model (34 MB less memory, ~15 % faster passes on
    /// tiny.en); `file`: the model file as it is (stt/quantize.rs).
    pub whisper_weights: Weights,
    /// `STT_LANGUAGE`
    pub language: String,
    /// `STT_PROMPT`: initial prompt (names, jargon).
    pub prompt: String,
    /// 0 = the cores available.
    pub threads: usize,
    /// 1 = greedy; more = beam search.
    pub beam_size: usize,
    /// Flash attention in whisper.cpp (its own default; whisper-rs turns
    /// it off unless asked).
    pub flash_attn: bool,
    /// A clean whisper.cpp state for every pass (built in the background
    /// between turns) instead of one reused state: whisper.cpp 1.8.3 lets
    /// leftovers of an earlier pass change the words (see whisper.rs).
    pub fresh_state: bool,
    /// `STT_BASE_URL`
    pub cloud_base_url: String,
    /// `GROQ_STT_MODEL`
    pub cloud_model: String,
    /// Key for the cloud STT; empty = `llm.api_key` (`GROQ_API_KEY`).
    pub cloud_api_key: String,
    /// Whole-request limit for the cloud call.
    pub cloud_timeout_secs: u64,
    /// Less voiced audio than this (webrtc-vad, 30 ms frames) is
    /// "(no speech)" without running a model — whisper invents text for
    /// silence and noise.
    pub min_voiced_ms: u32,
    /// `[stt.fast]`: the short-utterance fast path (issue 9).
    pub fast: FastConfig,
}

impl Default for SttConfig {
    fn default() -> Self {
        Self {
            order: Order::LocalFirst,
            whisper_model: "ggml-tiny.en.bin".into(),
            whisper_weights: Weights::default(),
            language: "en".into(),
            prompt: String::new(),
            threads: 0,
            // Beam 5: greedy mishears one shared clip ("old-sposed"); see notes/stt.md.
            beam_size: 5,
            flash_attn: true,
            fresh_state: true,
            cloud_base_url: "https://api.groq.com/openai/v1".into(),
            cloud_model: "whisper-large-v3".into(),
            cloud_api_key: String::new(),
            cloud_timeout_secs: 20,
            min_voiced_ms: 120,
            fast: FastConfig::default(),
        }
    }
}

impl std::fmt::Debug for SttConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Exhaustive, so a new field has to be placed here (secret or not).
        let Self {
            order,
            whisper_model,
            whisper_weights,
            language,
            prompt,
            threads,
            beam_size,
            flash_attn,
            fresh_state,
            cloud_base_url,
            cloud_model,
            cloud_api_key: _,
            cloud_timeout_secs,
            min_voiced_ms,
            fast,
        } = self;
        f.debug_struct("SttConfig")
            .field("order", order)
            .field("whisper_model", whisper_model)
            .field("whisper_weights", whisper_weights)
            .field("language", language)
            .field("prompt", prompt)
            .field("threads", threads)
            .field("beam_size", beam_size)
            .field("flash_attn", flash_attn)
            .field("fresh_state", fresh_state)
            .field("cloud_base_url", cloud_base_url)
            .field("cloud_model", cloud_model)
            .field("cloud_api_key", &"***")
            .field("cloud_timeout_secs", cloud_timeout_secs)
            .field("min_voiced_ms", min_voiced_ms)
            .field("fast", fast)
            .finish()
    }
}

/// `[stt] whisper_weights`: what whisper.cpp loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Weights {
    /// 8-bit blocks (ggml q8_0) derived from the model file.
    #[default]
    #[serde(rename = "q8_0")]
    Q8_0,
    /// The model file as it is.
    File,
}

/// `[stt.fast]`: whisper pads every input to 30 s; for a 3 s command the
/// encoder does 10× the work needed. The fast path shrinks the encoder's
/// context (`audio_ctx`) to the utterance plus a margin and bounds the
/// decoder; when the result looks wrong it reruns with the full context.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FastConfig {
    pub enabled: bool,
    /// Utterances longer than this go straight to the full path.
    pub max_audio_ms: u32,
    /// Context added after the audio (ms); too little and the decoder
    /// loses the last word or loops.
    pub margin_ms: u32,
    /// Smallest context used (in encoder frames of 20 ms).
    pub min_audio_ctx: u32,
    /// Decoder budget: tokens per second of audio…
    pub tokens_per_sec: f32,
    /// …plus this many.
    pub token_slack: u32,
    /// Wall-time cap of the fast pass; hitting it falls back.
    pub max_wall_ms: u32,
    /// Fast pass average token log-probability below this falls back.
    pub min_avg_logprob: f32,
    /// A word n-gram repeated this many times in a row falls back.
    pub max_repeats: u32,
    /// Wall-time cap of the full pass (never hang on pathological input).
    pub full_max_wall_ms: u32,
    /// Let the fast pass emit timestamp tokens. Off by default: measured
    /// here, with timestamps the fast pass dropped a first word and, with
    /// lead silence, misheard short commands; without them (and with the
    /// loop trim) it neither loops nor drops words on the benchmark clips.
    pub timestamps: bool,
    /// Silence prepended to the audio on the fast pass (ms): on a shrunken
    /// context whisper often drops a word that starts at the first frame.
    pub lead_ms: u32,
    /// A rejected fast pass is retried with this many times its context
    /// before the full 30 s context is tried (≤ 1 = straight to full).
    pub wide_scale: f32,
    /// The wider pass is accepted down to this average log-probability
    /// (whisper's own `logprob_thold`); below it, or on a loop or a hit
    /// cap, the full context runs.
    pub wide_min_avg_logprob: f32,
    /// End a pass as soon as the decoder starts the utterance over (the
    /// repeat loop of a shrunken context) instead of at the token budget
    /// (`stt::restart`): the repeat was trimmed anyway, its tokens only
    /// cost time.
    pub stop_restart: bool,
    /// The fast pass on audio up to this long (ms) decodes greedily,
    /// whatever `[stt] beam_size` says; longer audio, the wider retry and
    /// the full pass keep the beams (0 = always the beams; but see
    /// `greedy_try_max_ms`). Measured
    /// (`earshot bench stt`, BENCHMARKS.md): the same words on every
    /// command clip in about half the time (~120 ms instead of ~250 ms on
    /// a short command, the bulk of a command's latency), while on a
    /// 3 s sentence of the test set the beams heard a word greedy missed.
    pub greedy_max_ms: u32,
    /// The fast pass on audio longer than `greedy_max_ms` and up to this
    /// long (ms) is first decoded greedily too, and kept only when whisper
    /// is sure of it (average token log-probability at least
    /// `greedy_min_avg_logprob`); otherwise the same pass runs again with
    /// the beams. A sentence of 2.5–4 s (a long command, a question) is
    /// what the look at a pause transcribes while the listener waits, and
    /// the beams took ~2.3× greedy's time on it (300 vs 128 ms median, 20
    /// Piper sentences, the same words); on harder audio (espeak-ng, and a
    /// LibriVox clip whose greedy pass averaged −0.29 and misheard
    /// "ill-disposed") the greedy passes the beams corrected were the
    /// unsure ones (notes/latency.md, stop 48). 0 = no such trial.
    pub greedy_try_max_ms: u32,
    /// The average token log-probability a greedy trial pass
    /// (`greedy_try_max_ms`) needs to be kept.
    pub greedy_min_avg_logprob: f32,
    /// Check that no words after a pause inside the utterance were lost
    /// (`stt::gaps`): when the audio holds a pause of 150 ms or more
    /// between words, the speech after the last one is also transcribed
    /// alone (one short extra pass), and a reading that lacks those words
    /// is redone with its pauses shortened, or has them added. Measured:
    /// tiny.en's fast pass read "Why do we have <pause> leap years?" as
    /// "Why do we have?" with any pause of 150 ms or more.
    pub gap_check: bool,
}

impl Default for FastConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_audio_ms: 20_000,
            margin_ms: 1_000,
            min_audio_ctx: 100,
            tokens_per_sec: 6.0,
            token_slack: 12,
            max_wall_ms: 3_000,
            // Measured with timestamps: right fast passes -0.08…-0.16, the
            // misheard "old-sposed" -0.46…-0.59 (notes/stt.md).
            min_avg_logprob: -0.45,
            max_repeats: 3,
            full_max_wall_ms: 60_000,
            // Measured (notes/stt.md): without timestamp tokens and with
            // 300 ms of lead silence every benchmark clip is right on the
            // fast pass; with timestamps 0870 lost its first word.
            timestamps: false,
            lead_ms: 300,
            wide_scale: 2.0,
            wide_min_avg_logprob: -1.0,
            stop_restart: true,
            greedy_max_ms: 2_500,
            greedy_try_max_ms: 6_000,
            greedy_min_avg_logprob: -0.25,
            gap_check: true,
        }
    }
}

crate::choice! {
    /// Fallback order of the engines (`stt.order`).
    pub enum Order("order") {
        LocalFirst = "local-first" | "": "whisper on the device; the cloud when it fails",
        CloudFirst = "cloud-first": "the cloud (GROQ_API_KEY); whisper on the device when it fails",
        LocalOnly = "local-only": "whisper on the device only; nothing leaves it",
        CloudOnly = "cloud-only": "the cloud only (no whisper model is loaded)",
    }
}

/// The STT engines this build has, as `earshot devices` and `doctor` list
/// them (the order above picks among the first two; `wyoming` goes in
/// front when `wyoming.stt_uri` is set). Each [`Transcriber::name`] is one
/// of these names.
pub const ENGINES: &[crate::choice::Entry] = &[
    crate::choice::Entry {
        name: "whisper",
        aliases: &["local"],
        form: "whisper",
        summary: "whisper.cpp on the device (stt.whisper_model)",
    },
    crate::choice::Entry {
        name: "groq",
        aliases: &["cloud"],
        form: "groq",
        summary: "Groq's Whisper API (GROQ_API_KEY, stt.cloud_base_url)",
    },
    crate::choice::Entry {
        name: "wyoming",
        aliases: &[],
        form: "wyoming",
        summary: "a Wyoming ASR service in front of the others (wyoming.stt_uri)",
    },
];

impl Order {
    fn wants_local(self) -> bool {
        !matches!(self, Order::CloudOnly)
    }

    fn wants_cloud(self) -> bool {
        !matches!(self, Order::LocalOnly)
    }
}

/// Why a transcription failed. Callers branch on it: the loop speaks
/// [`SttError::user_sentence`] and keeps listening.
#[derive(Debug, thiserror::Error)]
pub enum SttError {
    #[error("whisper model {path} not found; run scripts/fetch-whisper.sh or set stt.whisper_model / EARSHOT_MODELS_DIR")]
    ModelMissing { path: String },
    #[error("whisper model {path} could not be loaded ({reason}); re-download it with scripts/fetch-whisper.sh")]
    ModelCorrupt { path: String, reason: String },
    #[error("local transcription failed: {0}")]
    Local(String),
    #[error("cloud STT at {url} answered HTTP {status}: {message}")]
    CloudHttp {
        url: String,
        status: u16,
        message: String,
    },
    #[error("cloud STT at {url} unreachable: {reason}")]
    CloudTransport { url: String, reason: String },
    #[error("cloud STT returned an unreadable answer: {0}")]
    CloudBadBody(String),
    #[error("cloud STT needs an API key: set GROQ_API_KEY (or stt.cloud_api_key), or use stt.order = \"local-only\"")]
    NoApiKey,
    #[error("{0}")]
    Config(String),
    #[error("no speech-to-text engine is available: {0}")]
    NoEngine(String),
    /// A Wyoming ASR service (`wyoming.stt_uri`) failed; the next engine answers.
    #[error("Wyoming STT service at {uri}: {reason}")]
    Service { uri: String, reason: String },
    /// The caller cancelled the transcription (it no longer wants the
    /// words: speech went on after the pause a look was made at).
    #[error("transcription cancelled")]
    Cancelled,
    /// Every engine in the order failed; each reason, in order.
    #[error("speech-to-text failed: {}", .0.join("; then "))]
    AllFailed(Vec<String>),
}

impl SttError {
    /// A sentence short enough to speak on the device.
    pub fn user_sentence(&self) -> &'static str {
        match self {
            SttError::ModelMissing { .. } | SttError::ModelCorrupt { .. } => {
                "My speech model is missing, so I can't understand you right now."
            }
            SttError::CloudHttp { status: 401, .. } | SttError::NoApiKey => {
                "The speech service rejected my key."
            }
            SttError::CloudHttp { .. }
            | SttError::CloudTransport { .. }
            | SttError::CloudBadBody(_) => "The speech service isn't answering.",
            _ => "Sorry, I couldn't make out what you said.",
        }
    }
}

/// Where the time went, for the loop's stage log and `--json`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SttTimings {
    /// Inference only (model loaded): everything `transcribe` did.
    pub stt_ms: u64,
    /// Length of the audio.
    pub audio_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast_ms: Option<u64>,
    /// The wider-context retry after a rejected fast pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wide_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_ms: Option<u64>,
    /// The check for words lost after a pause (`stt::gaps`), when it read
    /// the words after one: the tail's own pass, and the reading again
    /// when they were lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_ms: Option<u64>,
}

/// A transcription with how it was made.
#[derive(Debug, Clone, Serialize)]
pub struct Transcript {
    /// The words; empty when `no_speech`.
    pub text: String,
    pub no_speech: bool,
    /// `whisper`, `groq`, or `gate` (no model run: no speech found).
    pub engine: String,
    /// `fast`, `full`, `fast+full` (fell back), `cloud`, `skipped`.
    pub path: String,
    /// Why this path ran (and why a fallback happened).
    pub reason: String,
    pub timings: SttTimings,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audio_ctx: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg_logprob: Option<f32>,
    /// Log-probability of the least likely text token, and that token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_logprob: Option<f32>,
    /// (`weakest_token` on the wire: the name is kept for `--json`; the
    /// field is a word, not a secret.)
    #[serde(rename = "weakest_token", skip_serializing_if = "Option::is_none")]
    pub weakest_word: Option<String>,
    /// Engines that failed before this one, with one-line reasons.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<String>,
}

impl Transcript {
    /// The text, or `(no speech)`.
    pub fn display_text(&self) -> &str {
        if self.no_speech {
            "(no speech)"
        } else {
            &self.text
        }
    }

    /// An empty transcript made by `engine` (also the base other engines
    /// fill in, e.g. the Wyoming client).
    pub(crate) fn no_speech(engine: &str, path: &str, reason: String, audio_ms: u64) -> Transcript {
        Transcript {
            text: String::new(),
            no_speech: true,
            engine: engine.into(),
            path: path.into(),
            reason,
            timings: SttTimings {
                audio_ms,
                ..Default::default()
            },
            audio_ctx: None,
            avg_logprob: None,
            min_logprob: None,
            weakest_word: None,
            fallbacks: Vec::new(),
        }
    }
}

/// A speech-to-text backend. Audio is 16 kHz mono `f32`.
pub trait Transcriber: Send + Sync {
    /// `whisper`, `groq`.
    fn name(&self) -> &'static str;
    /// Transcribe one utterance.
    fn transcribe(&self, audio: &[f32]) -> Result<Transcript, SttError>;
    /// Like [`transcribe`], telling `draft` a first reading of the words
    /// when one is known well before the final transcript: whisper's
    /// greedy trial that it found unsure, before the beams decode the same
    /// audio again. A caller may begin work on the draft that the final
    /// words then confirm or replace, or return `true` to take the draft
    /// as the transcript (it agrees with what the caller heard another
    /// way). Once `cancel` fires the words are no longer wanted: an
    /// engine may stop early with [`SttError::Cancelled`]. Default: no
    /// draft, and the whole transcription.
    ///
    /// [`transcribe`]: Transcriber::transcribe
    fn transcribe_drafting(
        &self,
        audio: &[f32],
        draft: &mut dyn FnMut(&str) -> bool,
        cancel: &CancelToken,
    ) -> Result<Transcript, SttError> {
        let _ = (draft, cancel);
        self.transcribe(audio)
    }
    /// Transcribe a word or two as fast as possible (the stop word during
    /// playback): one bounded pass, no fallback. Default: [`transcribe`].
    ///
    /// [`transcribe`]: Transcriber::transcribe
    fn transcribe_word(&self, audio: &[f32]) -> Result<Transcript, SttError> {
        self.transcribe(audio)
    }
    /// Make the first real call as fast as the rest (load pages, build
    /// graphs). Default: nothing to do.
    fn warm_up(&self) -> Result<(), SttError> {
        Ok(())
    }
}

/// The configured engines in fallback order.
#[derive(Clone)]
pub struct Stt {
    engines: Vec<Arc<dyn Transcriber>>,
    /// Engines that could not be built (logged; reported with failures).
    unavailable: Vec<String>,
    min_voiced_ms: u32,
}

impl Stt {
    /// Build from `[stt]` (and `[wyoming]` for an ASR service in front):
    /// the local model is loaded now (once). A local model that fails to
    /// load is an error unless the order allows the cloud and a key is
    /// present — then it is logged and the cloud is used. `llm_api_key` is
    /// the cloud key when `stt.cloud_api_key` is empty (Groq serves both).
    pub fn from_config(
        cfg: &SttConfig,
        paths: &crate::paths::Paths,
        llm_api_key: &str,
        wyoming_cfg: &crate::wyoming_proto::WyomingConfig,
    ) -> Result<Stt, SttError> {
        let order = cfg.order;
        let mut local: Option<Arc<dyn Transcriber>> = None;
        let mut cloud: Option<Arc<dyn Transcriber>> = None;
        let mut unavailable = Vec::new();
        if order.wants_local() {
            match build_local(cfg, paths) {
                Ok(t) => local = Some(t),
                Err(e) => {
                    tracing::warn!(error = %e, "local STT unavailable");
                    unavailable.push(format!("whisper: {e}"));
                }
            }
        }
        if order.wants_cloud() {
            let key = if cfg.cloud_api_key.is_empty() {
                llm_api_key.to_string()
            } else {
                cfg.cloud_api_key.clone()
            };
            match groq::GroqStt::new(cfg, &key) {
                Ok(t) => cloud = Some(Arc::new(t)),
                Err(e) => unavailable.push(format!("groq: {e}")),
            }
        }
        let engines: Vec<Arc<dyn Transcriber>> = match order {
            Order::LocalFirst | Order::LocalOnly => local.into_iter().chain(cloud).collect(),
            Order::CloudFirst | Order::CloudOnly => cloud.into_iter().chain(local).collect(),
        };
        let engines = wyoming::in_front(wyoming_cfg, &cfg.language, engines)?;
        if engines.is_empty() {
            return Err(SttError::NoEngine(unavailable.join("; ")));
        }
        Ok(Stt {
            engines,
            unavailable,
            min_voiced_ms: cfg.min_voiced_ms,
        })
    }

    /// Engines given directly (tests, benches).
    pub fn with_engines(engines: Vec<Arc<dyn Transcriber>>, min_voiced_ms: u32) -> Stt {
        Stt {
            engines,
            unavailable: Vec::new(),
            min_voiced_ms,
        }
    }

    /// Names of the engines in order.
    pub fn engine_names(&self) -> Vec<&'static str> {
        self.engines.iter().map(|e| e.name()).collect()
    }

    /// Warm every engine up on a background thread (start-up, off the
    /// voice loop). A transcription arriving meanwhile simply waits for
    /// the model lock.
    pub fn warm_up_in_background(&self) -> std::thread::JoinHandle<()> {
        let engines = self.engines.clone();
        std::thread::spawn(move || {
            for e in engines {
                let t = Instant::now();
                match e.warm_up() {
                    Ok(()) => tracing::debug!(
                        engine = e.name(),
                        ms = t.elapsed().as_millis() as u64,
                        "STT warmed up"
                    ),
                    Err(err) => {
                        tracing::warn!(engine = e.name(), error = %err, "STT warm-up failed")
                    }
                }
            }
        })
    }

    /// A word or two (the stop word heard during playback), by the first
    /// engine that works, each on its shortest path.
    pub fn transcribe_word(&self, audio: &[f32]) -> Result<Transcript, SttError> {
        let started = Instant::now();
        let mut failures: Vec<String> = self.unavailable.clone();
        for engine in &self.engines {
            match engine.transcribe_word(audio) {
                Ok(mut t) => {
                    t.fallbacks = failures;
                    t.timings.stt_ms = started.elapsed().as_millis() as u64;
                    return Ok(t);
                }
                Err(e) => failures.push(format!("{}: {e}", engine.name())),
            }
        }
        Err(SttError::AllFailed(failures))
    }

    /// Transcribe 16 kHz mono audio with the first engine that works.
    /// Audio without speech comes back as `no_speech` without a model run.
    pub fn transcribe(&self, audio: &[f32]) -> Result<Transcript, SttError> {
        self.transcribe_drafting(audio, &mut |_| false, &CancelToken::new())
    }

    /// [`Stt::transcribe`], with a first reading of the words given to
    /// `draft` when an engine has one before its final transcript
    /// ([`Transcriber::transcribe_drafting`]), and stopped with
    /// [`SttError::Cancelled`] soon after `cancel` fires (no other engine
    /// is tried then).
    pub fn transcribe_drafting(
        &self,
        audio: &[f32],
        draft: &mut dyn FnMut(&str) -> bool,
        cancel: &CancelToken,
    ) -> Result<Transcript, SttError> {
        let started = Instant::now();
        let audio_ms = audio.len() as u64 * 1000 / u64::from(crate::audio::SAMPLE_RATE);
        let pcm = crate::audio::to_i16(audio);
        let voiced = crate::audio::vad::voiced_ms(&pcm, 2);
        if voiced < u64::from(self.min_voiced_ms) {
            let mut t = Transcript::no_speech(
                "gate",
                "skipped",
                format!(
                    "{voiced} ms voiced < stt.min_voiced_ms = {}",
                    self.min_voiced_ms
                ),
                audio_ms,
            );
            t.timings.stt_ms = started.elapsed().as_millis() as u64;
            return Ok(t);
        }
        let mut failures: Vec<String> = self.unavailable.clone();
        for engine in &self.engines {
            if cancel.is_cancelled() {
                return Err(SttError::Cancelled);
            }
            match engine.transcribe_drafting(audio, draft, cancel) {
                Ok(mut t) => {
                    t.fallbacks = failures;
                    t.timings.stt_ms = started.elapsed().as_millis() as u64;
                    return Ok(t);
                }
                Err(SttError::Cancelled) => return Err(SttError::Cancelled),
                Err(e) => {
                    tracing::warn!(engine = engine.name(), error = %e, "STT engine failed; trying the next");
                    failures.push(format!("{}: {e}", engine.name()));
                }
            }
        }
        Err(SttError::AllFailed(failures))
    }
}

#[cfg(feature = "whisper")]
fn build_local(
    cfg: &SttConfig,
    paths: &crate::paths::Paths,
) -> Result<Arc<dyn Transcriber>, SttError> {
    let path = paths.model_path(&cfg.whisper_model);
    if !path.is_file() {
        return Err(SttError::ModelMissing {
            path: path.display().to_string(),
        });
    }
    let load = quantize::model_to_load(&path, cfg.whisper_weights, &paths.state_dir.join("cache"));
    Ok(Arc::new(whisper::WhisperStt::load(&load, cfg)?))
}

#[cfg(not(feature = "whisper"))]
fn build_local(
    _cfg: &SttConfig,
    _paths: &crate::paths::Paths,
) -> Result<Arc<dyn Transcriber>, SttError> {
    Err(SttError::Local(
        "this build has no local STT (built without the `whisper` feature)".into(),
    ))
}

/// The number of threads to use: the configured value, else the cores
/// available.
pub fn threads(cfg: &SttConfig) -> usize {
    if cfg.threads > 0 {
        cfg.threads
    } else {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_cloud_key() {
        let cfg = SttConfig {
            cloud_api_key: "gsk_planted_stt_key".into(),
            ..Default::default()
        };
        let shown = format!("{cfg:?}");
        assert!(!shown.contains("gsk_planted_stt_key"), "{shown}");
        assert!(
            shown.contains("whisper-large-v3") && shown.contains("***"),
            "{shown}"
        );
    }
}
