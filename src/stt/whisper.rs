//! Local STT through whisper.cpp (whisper-rs), with the short-utterance
//! fast path of issue 9.
//!
//! One `WhisperContext` (the weights) and one `WhisperState` (the KV
//! caches and compute buffers) are created at start and reused for every
//! turn, behind a mutex: whisper.cpp's state is not re-entrant and a device
//! hears one utterance at a time.
//!
//! **Fast path.** whisper.cpp pads every input to 30 s and the encoder
//! always attends over 1500 frames; for a 3 s command that is 10× the work.
//! We set `audio_ctx` to the utterance length plus a margin (in 20 ms
//! encoder frames), decode a single segment without timestamps, cap the
//! tokens by the audio length, and abort at a wall-time cap. The result is
//! checked (repetition loop, low average log-probability, a hit cap, no
//! text at all); if it looks wrong the utterance is decoded again with the
//! full context, and `Transcript::path`/`reason` say so.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use whisper_rs::{
    FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters, WhisperState,
};

use super::{gaps, text, FastConfig, SttConfig, SttError, SttTimings, Transcriber, Transcript};
use crate::audio::SAMPLE_RATE;
use crate::cancel::CancelToken;

/// Encoder frames per second of audio (mel hop 10 ms, conv stride 2).
const CTX_PER_SEC: f32 = 50.0;
/// Decoder budget of [`WhisperStt::word_plan`].
pub const WORD_TOKENS: u32 = 6;
/// whisper.cpp refuses less than 100 ms and is unreliable under ~1 s:
/// shorter utterances are padded with silence to this many samples.
const MIN_SAMPLES: usize = SAMPLE_RATE as usize + SAMPLE_RATE as usize / 10;

/// How one decoding pass is set up.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Encoder context in frames; 0 = the model's full 1500.
    pub audio_ctx: u32,
    /// Token budget per segment; 0 = unlimited.
    pub max_tokens: u32,
    pub single_segment: bool,
    pub no_timestamps: bool,
    /// Temperature fallback inside whisper.cpp (off on the fast path:
    /// our own fallback is cheaper and more predictable).
    pub temperature_fallback: bool,
    pub wall_cap: Duration,
    /// Silence prepended to the audio (ms): whisper on a shrunken context
    /// tends to drop a word that starts at the very first frame.
    pub lead_ms: u32,
    /// Greedy decoding whatever `[stt] beam_size` says: for a word or a
    /// short command the beams cost more than they find
    /// (`[stt.fast] greedy_max_ms`).
    pub greedy: bool,
    /// Stop as soon as another pass wants the engine (the start-up
    /// warm-up: a live word or turn never waits behind it).
    pub yields: bool,
}

/// What a pass produced.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub text: String,
    /// Text tokens (timestamps and specials excluded).
    pub tokens: usize,
    pub avg_logprob: f32,
    /// The least likely text token's log-probability and its text: one
    /// misheard word hides in an average over a sentence.
    pub min_logprob: f32,
    pub weakest: String,
    pub no_speech_prob: f32,
    pub aborted: bool,
    pub elapsed: Duration,
}

/// whisper.cpp behind the [`Transcriber`] trait.
pub struct WhisperStt {
    cfg: SttConfig,
    threads: usize,
    model_ctx: u32,
    eot: i32,
    states: Arc<States>,
    /// One pass at a time: a device hears one utterance at a time, and two
    /// passes would only share the same cores.
    run: Mutex<()>,
    /// Passes that don't yield, waiting for `run` or holding it: a
    /// yielding pass (the warm-up) stops when this is above zero.
    live: Arc<AtomicUsize>,
    model_path: PathBuf,
    /// The last reading and the audio it was of: a look at a pause inside
    /// speech read the head of what the next look reads whole, so the
    /// check for words lost after that pause ([`gaps`]) knows the head's
    /// words without a pass.
    last_reading: Mutex<Option<(Vec<f32>, String)>>,
}

/// Counts a live pass in [`WhisperStt::live`] until dropped.
struct LivePass(Arc<AtomicUsize>);

impl LivePass {
    fn enter(live: &Arc<AtomicUsize>) -> LivePass {
        live.fetch_add(1, Ordering::SeqCst);
        LivePass(live.clone())
    }
}

impl Drop for LivePass {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What whisper.cpp's abort callback looks at during one pass: the wall
/// cap (counted from when the pass got the engine) and, for a pass that
/// yields, whether a live one wants the engine.
///
/// whisper-rs 0.16's `set_abort_callback_safe` hands the callback a
/// pointer to a boxed trait object but reads it as the closure itself,
/// so a closure's captures were read from the wrong memory (caps never
/// fired; a larger closure crashed). This goes through the raw setter
/// with a plain struct instead.
struct AbortWatch {
    began: OnceLock<Instant>,
    cap: Duration,
    yields: bool,
    live: Arc<AtomicUsize>,
    /// The caller no longer wants the words (the voice loop's look at a
    /// pause, once speech went on).
    cancel: Option<CancelToken>,
    aborted: AtomicBool,
}

impl AbortWatch {
    fn due(&self) -> bool {
        let capped = self.began.get().is_some_and(|t| t.elapsed() > self.cap);
        let give_way = self.yields && self.live.load(Ordering::SeqCst) > 0;
        let unwanted = self.cancel.as_ref().is_some_and(CancelToken::is_cancelled);
        let due = capped || give_way || unwanted;
        if due {
            self.aborted.store(true, Ordering::Relaxed);
        }
        due
    }
}

/// whisper.cpp's abort callback: `user_data` is the pass's [`AbortWatch`].
unsafe extern "C" fn abort_if_due(user_data: *mut std::ffi::c_void) -> bool {
    // SAFETY: `decode` sets this pointer to an `AbortWatch` that outlives
    // the pass; the callback only reads it (its flags are atomics).
    let watch = unsafe { &*user_data.cast::<AbortWatch>() };
    watch.due()
}

/// The weights plus whisper.cpp states (KV caches and compute buffers).
///
/// whisper.cpp 1.8.3 with flash attention writes the cross-attention K/V
/// of `audio_ctx` frames but reads them padded to a multiple of 256 with
/// no mask, so frames left over from an earlier pass of another length
/// leak into the next one: measured here, the same clip gave different
/// words depending on what was transcribed before. A clean state per
/// pass (`stt.fresh_state`, default on) makes every pass reproducible;
/// the next clean state is built in the background (~20 ms) while the
/// device listens, so a turn doesn't wait for it.
struct States {
    ctx: WhisperContext,
    spare: Mutex<Option<WhisperState>>,
    /// Signalled when the refill thread has put a state in `spare`.
    filled: Condvar,
    refilling: AtomicBool,
}

/// How long a pass waits for the state being built in the background
/// (~20 ms) before building its own.
const REFILL_WAIT: Duration = Duration::from_millis(250);

impl States {
    fn create(&self) -> Result<WhisperState, SttError> {
        self.ctx
            .create_state()
            .map_err(|e| SttError::Local(format!("cannot allocate a whisper state: {e}")))
    }

    /// A clean state: the spare, or the one being built in the
    /// background (a retry right after a pass waits for it rather than
    /// build a second one beside it: two states built at once cost ~25 MB
    /// more at the peak, issue 21), or a new one.
    fn take(&self) -> Result<WhisperState, SttError> {
        let deadline = Instant::now() + REFILL_WAIT;
        let Ok(mut spare) = self.spare.lock() else {
            return self.create();
        };
        loop {
            if let Some(state) = spare.take() {
                return Ok(state);
            }
            let now = Instant::now();
            if !self.refilling.load(Ordering::SeqCst) || now >= deadline {
                drop(spare);
                return self.create();
            }
            spare = match self.filled.wait_timeout(spare, deadline - now) {
                Ok((guard, _)) => guard,
                Err(_) => return self.create(),
            };
        }
    }

    /// Build the next clean state on a background thread (and drop the
    /// used one there), unless one is being built already.
    fn refill(self: &Arc<Self>, used: Option<WhisperState>) {
        if self.refilling.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.clone();
        // Taken here, before the thread exists, so an exit racing the
        // spawn still waits for it.
        let in_flight = exit_guard::enter();
        let spawned = std::thread::Builder::new()
            .name("whisper-state".into())
            .spawn(move || {
                let _in_flight = in_flight;
                drop(used);
                match me.create() {
                    Ok(state) => {
                        if let Ok(mut spare) = me.spare.lock() {
                            spare.get_or_insert(state);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not prepare the next whisper state")
                    }
                }
                // Under the lock, so a waiting pass can't miss the wake-up.
                let spare = me.spare.lock();
                me.refilling.store(false, Ordering::SeqCst);
                me.filled.notify_all();
                drop(spare);
            });
        if spawned.is_err() {
            // The next pass builds its state itself.
            self.refilling.store(false, Ordering::SeqCst);
        }
    }
}

/// Process exit waits (boundedly) for whisper.cpp work still running on
/// other threads.
///
/// `exit` runs ggml's C++ static destructors (its backend registry among
/// them); a state being built or freed on the background refill thread at
/// that moment reads freed memory. Seen as a SIGSEGV after the last
/// transcription of a short-lived process (`earshot transcribe`, a test
/// binary). An `atexit` hook registered after whisper.cpp's statics runs
/// before their destructors, so it can wait for the work to finish.
mod exit_guard {
    use std::sync::{Condvar, Mutex, Once};
    use std::time::{Duration, Instant};

    static IN_FLIGHT: Mutex<usize> = Mutex::new(0);
    static SETTLED: Condvar = Condvar::new();
    /// A refill takes ~20 ms; a pass is capped by its own wall time. Exit
    /// is never held longer than this.
    const MAX_WAIT: Duration = Duration::from_secs(5);

    /// Marks whisper.cpp work in flight until dropped.
    pub(super) struct Guard(());

    pub(super) fn enter() -> Guard {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            // SAFETY: registers a plain `extern "C" fn()` with libc; it
            // touches only the statics above.
            unsafe {
                libc::atexit(wait_at_exit);
            }
        });
        *IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        Guard(())
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            let mut n = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
            *n = n.saturating_sub(1);
            SETTLED.notify_all();
        }
    }

    /// Number of pieces of work in flight (for tests).
    #[cfg(test)]
    pub(super) fn in_flight() -> usize {
        *IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks until nothing is in flight or `MAX_WAIT` has passed.
    pub(super) fn settle(max: Duration) -> bool {
        let deadline = Instant::now() + max;
        let mut n = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
        while *n > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            n = match SETTLED.wait_timeout(n, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        true
    }

    extern "C" fn wait_at_exit() {
        settle(MAX_WAIT);
    }
}

/// Route whisper.cpp's chatty stderr logging into `tracing` (once).
fn quiet_whisper_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(whisper_rs::install_logging_hooks);
}

impl WhisperStt {
    /// Load the ggml model at `path` and create the reusable state.
    pub fn load(path: &Path, cfg: &SttConfig) -> Result<Self, SttError> {
        quiet_whisper_logs();
        if !path.is_file() {
            return Err(SttError::ModelMissing {
                path: path.display().to_string(),
            });
        }
        check_ggml_header(path)?;
        let path_str = path.to_str().ok_or_else(|| SttError::ModelCorrupt {
            path: path.display().to_string(),
            reason: "the path is not UTF-8".into(),
        })?;
        let mut params = WhisperContextParameters::default();
        // whisper.cpp's own default (whisper-rs turns it off); see notes/stt.md.
        params.flash_attn(cfg.flash_attn);
        let ctx = WhisperContext::new_with_params(path_str, params).map_err(|e| {
            SttError::ModelCorrupt {
                path: path.display().to_string(),
                reason: format!("whisper.cpp: {e}"),
            }
        })?;
        let state = ctx.create_state().map_err(|e| SttError::ModelCorrupt {
            path: path.display().to_string(),
            reason: format!("cannot allocate whisper state: {e}"),
        })?;
        let model_ctx = ctx.n_audio_ctx().max(1) as u32;
        let eot = ctx.token_eot();
        // The free-core history starts now, before the first turn.
        crate::cpu::start_sampling();
        Ok(Self {
            threads: super::threads(cfg),
            cfg: cfg.clone(),
            model_ctx,
            eot,
            states: Arc::new(States {
                ctx,
                spare: Mutex::new(Some(state)),
                filled: Condvar::new(),
                refilling: AtomicBool::new(false),
            }),
            run: Mutex::new(()),
            live: Arc::new(AtomicUsize::new(0)),
            model_path: path.to_path_buf(),
            last_reading: Mutex::new(None),
        })
    }

    /// Run whisper.cpp on `input` with a state lent for this pass (one
    /// pass at a time), then read the segments with `read`. Afterwards
    /// the state is kept for the next pass, or replaced by a clean one
    /// built in the background (`stt.fresh_state`). `watch.began` is set
    /// when the pass gets the engine: a wall cap counts from there, not
    /// from the wait behind another pass. A pass that doesn't yield (or
    /// has no watch: the reference decode) is counted in
    /// [`WhisperStt::live`] from before the wait to its end.
    fn run_pass<T>(
        &self,
        params: FullParams,
        input: &[f32],
        watch: Option<&AbortWatch>,
        read: impl FnOnce(Result<(), whisper_rs::WhisperError>, &WhisperState) -> T,
    ) -> Result<T, SttError> {
        let cancelled =
            || watch.is_some_and(|w| w.cancel.as_ref().is_some_and(CancelToken::is_cancelled));
        // Not wanted any more: neither wait for the engine nor run.
        if cancelled() {
            return Err(SttError::Cancelled);
        }
        let yields = watch.is_some_and(|w| w.yields);
        let _live = (!yields).then(|| LivePass::enter(&self.live));
        let _one_at_a_time = self.run.lock().map_err(|_| {
            SttError::Local("the whisper engine was poisoned by an earlier panic".into())
        })?;
        // Cancelled while it waited for the engine: whisper.cpp would only
        // ask after its encoder.
        if cancelled() {
            return Err(SttError::Cancelled);
        }
        if let Some(watch) = watch {
            let _ = watch.began.set(Instant::now());
        }
        let _in_flight = exit_guard::enter();
        let mut state = self.states.take()?;
        let result = state.full(params, input);
        let out = read(result, &state);
        if self.cfg.fresh_state {
            self.states.refill(Some(state));
        } else if let Ok(mut spare) = self.states.spare.lock() {
            *spare = Some(state);
        }
        Ok(out)
    }

    /// The model file this engine runs.
    pub fn model_path(&self) -> &Path {
        &self.model_path
    }

    /// Threads used per pass.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Whether the context was created with flash attention (`stt.flash_attn`).
    pub fn flash_attn(&self) -> bool {
        self.cfg.flash_attn
    }

    /// The fast-path plan for `samples` of audio (16 kHz), or `None` when
    /// the full context is used directly (fast path off, or too long).
    pub fn fast_plan(&self, samples: usize) -> Option<Plan> {
        let f = &self.cfg.fast;
        let audio_ms = samples as u64 * 1000 / u64::from(SAMPLE_RATE);
        if !f.enabled || audio_ms > u64::from(f.max_audio_ms) {
            return None;
        }
        let ctx = audio_ctx_for(audio_ms + u64::from(f.lead_ms), f).min(self.model_ctx);
        if ctx >= self.model_ctx {
            return None;
        }
        Some(Plan {
            audio_ctx: ctx,
            max_tokens: token_budget(audio_ms, f),
            single_segment: true,
            no_timestamps: !f.timestamps,
            temperature_fallback: false,
            wall_cap: Duration::from_millis(u64::from(f.max_wall_ms)),
            lead_ms: f.lead_ms,
            greedy: audio_ms <= u64::from(f.greedy_max_ms.max(f.greedy_try_max_ms)),
            yields: false,
        })
    }

    /// Whether `plan` decodes greedily only on trial: audio longer than
    /// `greedy_max_ms`, within `greedy_try_max_ms`, with beams configured
    /// (see [`crate::stt::FastConfig::greedy_try_max_ms`]).
    pub fn greedy_on_trial(&self, plan: &Plan, audio_ms: u64) -> bool {
        let f = &self.cfg.fast;
        plan.greedy
            && self.cfg.beam_size > 1
            && audio_ms > u64::from(f.greedy_max_ms)
            && audio_ms <= u64::from(f.greedy_try_max_ms)
    }

    /// The full-context plan: whisper.cpp's own decoding (timestamps,
    /// segments, temperature fallback) with a token budget per 30 s
    /// window and a wall-time cap, so nothing can run away.
    pub fn full_plan(&self, samples: usize) -> Plan {
        let f = &self.cfg.fast;
        let audio_ms = (samples as u64 * 1000 / u64::from(SAMPLE_RATE)).min(30_000);
        Plan {
            audio_ctx: 0,
            max_tokens: token_budget(audio_ms, f) * 2,
            single_segment: false,
            no_timestamps: false,
            temperature_fallback: true,
            wall_cap: Duration::from_millis(u64::from(f.full_max_wall_ms)),
            lead_ms: 0,
            greedy: false,
            yields: false,
        }
    }

    /// Run one pass with `plan` (and the configured language, prompt,
    /// threads, greedy/beam).
    pub fn decode(&self, audio: &[f32], plan: &Plan) -> Result<Decoded, SttError> {
        self.decode_unless(audio, plan, None)
    }

    /// [`WhisperStt::decode`], stopped (as `aborted`) soon after `cancel`
    /// fires: whisper.cpp asks after its encoder and after every decoded
    /// token (the encoder itself runs to its end), and a pass cancelled
    /// before it got the engine never runs ([`SttError::Cancelled`]).
    fn decode_unless(
        &self,
        audio: &[f32],
        plan: &Plan,
        cancel: Option<&CancelToken>,
    ) -> Result<Decoded, SttError> {
        let strategy = if self.cfg.beam_size > 1 && !plan.greedy {
            SamplingStrategy::BeamSearch {
                beam_size: self.cfg.beam_size as i32,
                patience: -1.0,
            }
        } else if plan.temperature_fallback {
            SamplingStrategy::Greedy { best_of: 5 }
        } else {
            // whisper.cpp readies `best_of` decoders (three vocabulary-wide
            // arrays each) for every pass, but only a temperature fallback
            // samples with more than one: without it the words are the same
            // and the pass holds ~2.5 MB less.
            SamplingStrategy::Greedy { best_of: 1 }
        };
        let mut params = FullParams::new(strategy);
        // Never more threads than the cores free right now: ggml's workers
        // wait for each other after every operation, so one that shares a
        // core with a busy process stalls the rest (crate::cpu).
        params.set_n_threads(crate::cpu::threads_for(self.threads) as i32);
        let lang = self.cfg.language.trim();
        params.set_language(Some(if lang.is_empty() { "en" } else { lang }));
        params.set_translate(false);
        params.set_no_context(true);
        params.set_print_progress(false);
        params.set_print_realtime(false);
        params.set_print_special(false);
        params.set_print_timestamps(false);
        params.set_suppress_blank(true);
        params.set_suppress_nst(true);
        params.set_single_segment(plan.single_segment);
        params.set_no_timestamps(plan.no_timestamps);
        params.set_audio_ctx(plan.audio_ctx as i32);
        params.set_max_tokens(plan.max_tokens as i32);
        if !plan.temperature_fallback {
            params.set_temperature_inc(0.0);
        }
        if !self.cfg.prompt.trim().is_empty() {
            params.set_initial_prompt(self.cfg.prompt.trim());
        }
        if self.cfg.fast.stop_restart {
            // SAFETY: the filter only reads the vocabulary and writes the
            // logits array whisper.cpp hands it (super::restart).
            unsafe { params.set_filter_logits_callback(Some(super::restart::stop_at_restart)) };
        }
        let watch = AbortWatch {
            began: OnceLock::new(),
            cap: plan.wall_cap,
            yields: plan.yields,
            live: self.live.clone(),
            cancel: cancel.cloned(),
            aborted: AtomicBool::new(false),
        };
        let started = Instant::now();
        // SAFETY: `abort_if_due` reads `watch` through the pointer only
        // while whisper.cpp runs this pass, inside `run_pass` below;
        // `watch` lives on this frame until after it returns.
        unsafe {
            params.set_abort_callback(Some(abort_if_due));
            params.set_abort_callback_user_data(
                std::ptr::from_ref(&watch)
                    .cast_mut()
                    .cast::<std::ffi::c_void>(),
            );
        }

        let lead = plan.lead_ms as usize * SAMPLE_RATE as usize / 1000;
        let padded;
        let input = if lead > 0 || audio.len() < MIN_SAMPLES {
            let mut v = vec![0.0f32; lead];
            v.extend_from_slice(audio);
            if v.len() < MIN_SAMPLES {
                v.resize(MIN_SAMPLES, 0.0);
            }
            padded = v;
            &padded[..]
        } else {
            audio
        };

        let eot = self.eot;
        let (result, text_out, logprob_sum, min_logprob, weakest, tokens, no_speech_prob) = self
            .run_pass(params, input, Some(&watch), |result, state| {
                let mut text_out = String::new();
                let mut logprob_sum = 0.0f32;
                let mut min_logprob = 0.0f32;
                let mut weakest = String::new();
                let mut tokens = 0usize;
                let mut no_speech_prob = 0.0f32;
                for seg in state.as_iter() {
                    no_speech_prob = no_speech_prob.max(seg.no_speech_probability());
                    if let Ok(s) = seg.to_str_lossy() {
                        text_out.push_str(&s);
                    }
                    for i in 0..seg.n_tokens() {
                        if let Some(tok) = seg.get_token(i) {
                            let data = tok.token_data();
                            if data.id >= eot {
                                continue; // specials and timestamps
                            }
                            logprob_sum += data.plog;
                            tokens += 1;
                            if data.plog < min_logprob {
                                min_logprob = data.plog;
                                weakest = tok
                                    .to_str_lossy()
                                    .map(|t| t.to_string())
                                    .unwrap_or_default();
                            }
                        }
                    }
                }
                (
                    result,
                    text_out,
                    logprob_sum,
                    min_logprob,
                    weakest,
                    tokens,
                    no_speech_prob,
                )
            })?;
        let was_aborted = watch.aborted.load(Ordering::Relaxed);
        if let Err(e) = result {
            if !was_aborted {
                return Err(SttError::Local(format!("whisper.cpp failed: {e}")));
            }
        }
        Ok(Decoded {
            text: text_out.trim().to_string(),
            tokens,
            avg_logprob: if tokens > 0 {
                logprob_sum / tokens as f32
            } else {
                0.0
            },
            min_logprob,
            weakest,
            no_speech_prob,
            aborted: was_aborted,
            elapsed: started.elapsed(),
        })
    }

    /// The benchmark's reference: whisper.cpp's library defaults for greedy
    /// decoding (`whisper_full_default_params(GREEDY)`: full context,
    /// timestamps, temperature fallback), with only threads, language and
    /// printing set — on the same loaded model and state as earshot's path.
    pub fn decode_library_default(&self, audio: &[f32]) -> Result<Decoded, SttError> {
        self.decode_reference(audio, SamplingStrategy::Greedy { best_of: 5 })
    }

    /// whisper-cli's default decoding, for the side-by-side overhead check
    /// (issue 6.7): beam search 5 over the full context with timestamps,
    /// temperature fallback +0.2, entropy 2.4 / logprob -1.0 / no-speech 0.6
    /// thresholds (all the library defaults whisper-cli keeps), our threads.
    /// One difference whisper-rs 0.16 can't remove: whisper-cli also sets
    /// `greedy.best_of = 5`, which whisper.cpp only uses when its
    /// temperature fallback fires (then 5 sampled decoders instead of 1).
    pub fn decode_cli_default(&self, audio: &[f32]) -> Result<Decoded, SttError> {
        self.decode_reference(
            audio,
            SamplingStrategy::BeamSearch {
                beam_size: 5,
                patience: -1.0,
            },
        )
    }

    fn decode_reference(
        &self,
        audio: &[f32],
        strategy: SamplingStrategy,
    ) -> Result<Decoded, SttError> {
        let mut params = FullParams::new(strategy);
        params.set_n_threads(self.threads as i32);
        params.set_language(Some("en"));
        params.set_print_progress(false);
        params.set_print_realtime(false);
        params.set_print_timestamps(false);
        let started = Instant::now();
        let (result, text_out) = self.run_pass(params, audio, None, |result, state| {
            let mut text_out = String::new();
            for seg in state.as_iter() {
                if let Ok(s) = seg.to_str_lossy() {
                    text_out.push_str(&s);
                }
            }
            (result, text_out)
        })?;
        result.map_err(|e| SttError::Local(format!("whisper.cpp failed: {e}")))?;
        let elapsed = started.elapsed();
        Ok(Decoded {
            text: text_out.trim().to_string(),
            tokens: 0,
            avg_logprob: 0.0,
            min_logprob: 0.0,
            weakest: String::new(),
            no_speech_prob: 0.0,
            aborted: false,
            elapsed,
        })
    }

    /// One pass with `plan`; a decoder that said the whole utterance and
    /// then started over (from its start or, between whole repeats, from
    /// its middle), or looped on its last words, keeps its first
    /// saying (the loop, not the words, is what a small context gets
    /// wrong: the retry it caused cost 1.2–1.4 s). Returns the note for
    /// `reason`.
    fn pass(
        &self,
        audio: &[f32],
        plan: &Plan,
        cancel: &CancelToken,
    ) -> Result<(Decoded, String), SttError> {
        let mut d = self.decode_unless(audio, plan, Some(cancel))?;
        if cancel.is_cancelled() {
            return Err(SttError::Cancelled);
        }
        let mut note = String::new();
        if !d.aborted {
            if let Some(once) = text::periodic_prefix(&d.text)
                .or_else(|| text::looping_tail(&d.text))
                .or_else(|| text::repeated_sentence(&d.text))
            {
                note = format!("; trimmed a repeat loop after {once:?}");
                d.text = once;
                d.tokens = 0;
            }
        }
        Ok((d, note))
    }

    /// The plan for a word or two (the stop word): the context just covers
    /// the (padded) audio, and the decoder stops after
    /// [`WORD_TOKENS`] tokens ("okay, stop it" is five), so a looping
    /// decoder costs little; greedy, as the beams of `[stt] beam_size`
    /// only slow a word down (the stop word's latency is this pass).
    pub fn word_plan(&self, samples: usize) -> Plan {
        let f = &self.cfg.fast;
        let audio_ms = samples.max(MIN_SAMPLES) as u64 * 1000 / u64::from(SAMPLE_RATE);
        // No lead silence: the utterance starts with the endpointer's
        // pre-roll already.
        let secs = (audio_ms + 100) as f32 / 1000.0;
        let ctx = ((secs * CTX_PER_SEC).ceil() as u32).div_ceil(8) * 8;
        Plan {
            audio_ctx: ctx.min(self.model_ctx),
            max_tokens: WORD_TOKENS,
            single_segment: true,
            no_timestamps: true,
            temperature_fallback: false,
            // Bounded by its tokens and its short audio already; the
            // fast cap would only turn a slow moment into a missed "stop".
            wall_cap: Duration::from_millis(u64::from(f.full_max_wall_ms)),
            lead_ms: 0,
            greedy: true,
            yields: false,
        }
    }

    /// The retry after a rejected fast pass: `wide_scale` × its context,
    /// or `None` when that reaches the model's full context (then the full
    /// pass runs directly) or the retry is off (`wide_scale` ≤ 1).
    pub fn wide_plan(&self, fast: &Plan) -> Option<Plan> {
        let scale = self.cfg.fast.wide_scale;
        if scale.is_nan() || scale <= 1.0 {
            return None;
        }
        let ctx = ((fast.audio_ctx as f32 * scale).ceil() as u32).div_ceil(8) * 8;
        if ctx >= self.model_ctx {
            return None;
        }
        // The retry of a pass that looked wrong gets the beams back.
        Some(Plan {
            audio_ctx: ctx,
            greedy: false,
            ..*fast
        })
    }

    /// Why a fast pass should be redone with the full context, if it should.
    fn suspicious(
        &self,
        d: &Decoded,
        plan: &Plan,
        audio_ms: u64,
        min_avg_logprob: f32,
    ) -> Option<String> {
        let f = &self.cfg.fast;
        if d.aborted {
            return Some(format!(
                "fast pass hit the {} ms wall-time cap",
                plan.wall_cap.as_millis()
            ));
        }
        if plan.max_tokens > 0 && d.tokens + 1 >= plan.max_tokens as usize {
            return Some(format!("fast pass hit the {}-token cap", plan.max_tokens));
        }
        if let Some(rep) = text::repetition(&d.text, f.max_repeats) {
            return Some(format!("fast pass repeated {rep}"));
        }
        if d.tokens > 0 && d.avg_logprob < min_avg_logprob {
            return Some(format!(
                "fast pass avg logprob {:.2} < {:.2}",
                d.avg_logprob, min_avg_logprob
            ));
        }
        if text::clean(&d.text).is_empty() && audio_ms >= 1000 {
            return Some("fast pass produced no text for speech".into());
        }
        None
    }
}

impl WhisperStt {
    /// The reading `whole` of `audio`, or a better one when it lost the
    /// words after a pause inside the utterance ([`gaps`]). Returns the
    /// note for `reason` when those words had been lost; `checked` is set
    /// once a pass of the check ran.
    fn keep_words_after_pauses(
        &self,
        audio: &[f32],
        whole: Decoded,
        checked: &std::cell::Cell<bool>,
        cancel: &CancelToken,
    ) -> Result<(Decoded, Option<String>), SttError> {
        if text::clean(&whole.text).is_empty() {
            return Ok((whole, None));
        }
        let pauses = gaps::inner_gaps(audio);
        let (Some(from), Some(last)) = (gaps::tail_start(&pauses), pauses.last()) else {
            return Ok((whole, None));
        };
        // The words before the pause, when the last reading was of just
        // them (the look at this pause): a whole with more words has
        // read on past the pause.
        let head_read = self.head_reading(audio, gaps::head_end(&pauses), from);
        if let Some(head) = &head_read {
            if text::normalise(&whole.text).len() > text::normalise(head).len() {
                return Ok((whole, None));
            }
        }
        checked.set(true);
        let tail_audio = &audio[from.min(audio.len())..];
        let Some(mut plan) = self.fast_plan(tail_audio.len()) else {
            return Ok((whole, None));
        };
        // A few words: greedy is as good as the beams (`greedy_max_ms`).
        plan.greedy = true;
        let (tail, _) = self.pass(tail_audio, &plan, cancel)?;
        let tail_text = text::clean(&tail.text);
        // The VAD heard words there: unsure words, or words whisper's
        // no-speech rule would drop, still say the whole may have lost
        // some (the tail of "leap years" alone read "Late peers." at
        // −1.77 with a high no-speech probability). Only adding the tail
        // as read alone needs that rule passed.
        let tail_is_words = !tail.aborted && !tail_text.is_empty();
        let tail_is_speech = !(tail.no_speech_prob > 0.6 && tail.avg_logprob < -1.0);
        tracing::debug!(
            whole = %whole.text,
            tail = %tail_text,
            tail_avg_logprob = tail.avg_logprob,
            pause_ms = last.ms(),
            "STT: the words after the last pause read alone"
        );
        if !tail_is_words || gaps::holds(&whole.text, &tail_text) {
            return Ok((whole, None));
        }
        tracing::info!(
            whole = %whole.text,
            tail = %tail_text,
            pause_ms = last.ms(),
            "STT reading lacks the words after a pause; reading again with the pauses closed"
        );
        let closed = gaps::close(audio, &pauses);
        let Some(plan) = self.fast_plan(closed.len()) else {
            return Ok((whole, None));
        };
        let (again, _) = self.pass(&closed, &plan, cancel)?;
        tracing::debug!(again = %again.text, avg_logprob = again.avg_logprob, "STT: the reading with the pauses closed");
        let closed_ms = closed.len() as u64 * 1000 / u64::from(SAMPLE_RATE);
        let again_sound = self
            .suspicious(&again, &plan, closed_ms, self.cfg.fast.wide_min_avg_logprob)
            .is_none();
        let lost = format!(
            "; the words after a {} ms pause were lost ({:?} without {:?})",
            last.ms(),
            whole.text,
            tail_text
        );
        if again_sound && gaps::holds(&again.text, &tail_text) {
            return Ok((
                again,
                Some(format!("{lost}: read again with the pauses closed")),
            ));
        }
        // The tail alone may be the misreading (a word the whole had,
        // heard differently): words are only added when the reading with
        // the pauses closed has more of them than the whole.
        let more = text::normalise(&again.text).len() > text::normalise(&whole.text).len();
        if again_sound && more {
            return Ok((
                again,
                Some(format!(
                    "{lost}: read again with the pauses closed, more words"
                )),
            ));
        }
        // Both readings stop at the pause when they hold no more words
        // than the speech before it read alone: then the tail's own
        // reading is added.
        if !tail_is_speech {
            return Ok((whole, None));
        }
        let head = match head_read {
            Some(text) => text,
            None => {
                let head_audio = &audio[..gaps::head_end(&pauses).min(audio.len())];
                let Some(plan) = self.fast_plan(head_audio.len()) else {
                    return Ok((whole, None));
                };
                let (head, _) = self.pass(head_audio, &plan, cancel)?;
                if head.aborted {
                    return Ok((whole, None));
                }
                head.text
            }
        };
        if text::normalise(&whole.text).len() <= text::normalise(&head).len() {
            let mut joined = whole;
            joined.text = gaps::join(&joined.text, &tail_text);
            return Ok((joined, Some(format!("{lost}: added as read alone"))));
        }
        Ok((whole, None))
    }

    /// The last reading, when it was of `audio`'s first `head_end`
    /// samples and ended before `tail_from` (a look at the pause there).
    fn head_reading(&self, audio: &[f32], head_end: usize, tail_from: usize) -> Option<String> {
        let last = self.last_reading.lock().ok()?;
        let (heard, text) = last.as_ref()?;
        let covers_head = heard.len() >= head_end && head_end <= audio.len();
        // The look's audio ends with the `tail_ms` kept after the words
        // (or silence standing in for it), inside the pause.
        let stops_in_pause = heard.len() <= tail_from;
        (covers_head && stops_in_pause && heard[..head_end] == audio[..head_end])
            .then(|| text.clone())
    }
}

/// Encoder context for `audio_ms` of audio: the audio plus the margin,
/// at least `min_audio_ctx`, rounded up to a multiple of 8 frames.
pub fn audio_ctx_for(audio_ms: u64, f: &FastConfig) -> u32 {
    let secs = (audio_ms + u64::from(f.margin_ms)) as f32 / 1000.0;
    let ctx = (secs * CTX_PER_SEC).ceil() as u32;
    ctx.max(f.min_audio_ctx).div_ceil(8) * 8
}

/// Decoder budget for `audio_ms` of audio.
pub fn token_budget(audio_ms: u64, f: &FastConfig) -> u32 {
    (audio_ms as f32 / 1000.0 * f.tokens_per_sec).ceil() as u32 + f.token_slack
}

/// A ggml whisper file starts with the magic `ggml` (0x67676d6c, LE);
/// checking it turns "not a model" into a clear error before whisper.cpp
/// prints pages of logs.
fn check_ggml_header(path: &Path) -> Result<(), SttError> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic));
    match read {
        Ok(()) if u32::from_le_bytes(magic) == 0x6767_6d6c => Ok(()),
        Ok(()) => Err(SttError::ModelCorrupt {
            path: path.display().to_string(),
            reason: "not a ggml whisper model (bad magic)".into(),
        }),
        Err(e) => Err(SttError::ModelCorrupt {
            path: path.display().to_string(),
            reason: format!("cannot read it: {e}"),
        }),
    }
}

impl Transcriber for WhisperStt {
    fn name(&self) -> &'static str {
        "whisper"
    }

    fn transcribe(&self, audio: &[f32]) -> Result<Transcript, SttError> {
        self.transcribe_drafting(audio, &mut |_| false, &CancelToken::new())
    }

    fn transcribe_drafting(
        &self,
        audio: &[f32],
        draft: &mut dyn FnMut(&str) -> bool,
        cancel: &CancelToken,
    ) -> Result<Transcript, SttError> {
        // Background jobs wait while this runs (crate::cpu).
        let _live = crate::cpu::LiveWork::begin();
        let started = Instant::now();
        let audio_ms = audio.len() as u64 * 1000 / u64::from(SAMPLE_RATE);
        let mut timings = SttTimings {
            audio_ms,
            ..Default::default()
        };
        let mut path = "full";
        let mut reason;
        let mut audio_ctx = None;
        let fast = self.fast_plan(audio.len());
        let decoded = match fast {
            Some(mut plan) => {
                let (mut d, mut trimmed) = self.pass(audio, &plan, cancel)?;
                if self.greedy_on_trial(&plan, audio_ms)
                    && !d.aborted
                    && d.avg_logprob < self.cfg.fast.greedy_min_avg_logprob
                {
                    // Most unsure trials read the same words as the
                    // beams: work on them may begin now, and a caller
                    // that heard these very words another way keeps them.
                    if draft(&d.text) {
                        tracing::debug!(
                            avg_logprob = d.avg_logprob,
                            greedy_text = %d.text,
                            "greedy trial pass unsure, but its words are confirmed; kept"
                        );
                    } else {
                        tracing::debug!(
                            avg_logprob = d.avg_logprob,
                            greedy_text = %d.text,
                            "greedy trial pass unsure; the beams decode it"
                        );
                        let greedy_took = d.elapsed;
                        plan.greedy = false;
                        (d, trimmed) = self.pass(audio, &plan, cancel)?;
                        d.elapsed += greedy_took;
                    }
                }
                timings.fast_ms = Some(d.elapsed.as_millis() as u64);
                match self.suspicious(&d, &plan, audio_ms, self.cfg.fast.min_avg_logprob) {
                    None => {
                        path = "fast";
                        reason = format!(
                            "{audio_ms} ms ≤ {} ms: audio_ctx {} of {}, ≤ {} tokens",
                            self.cfg.fast.max_audio_ms,
                            plan.audio_ctx,
                            self.model_ctx,
                            plan.max_tokens
                        );
                        audio_ctx = Some(plan.audio_ctx);
                        reason.push_str(&trimmed);
                        d
                    }
                    Some(why) => {
                        tracing::info!(reason = %why, fast_text = %d.text, "STT fast pass rejected");
                        reason = why;
                        // First a wider (still partial) context: most
                        // rejected fast passes are fixed by it at a fraction
                        // of the full encoder's cost.
                        let wide = match self.wide_plan(&plan) {
                            Some(wide) => {
                                let (w, trimmed) = self.pass(audio, &wide, cancel)?;
                                timings.wide_ms = Some(w.elapsed.as_millis() as u64);
                                let verdict = self.suspicious(
                                    &w,
                                    &wide,
                                    audio_ms,
                                    self.cfg.fast.wide_min_avg_logprob,
                                );
                                match verdict {
                                    None => {
                                        reason.push_str(&format!(
                                            "; audio_ctx {} accepted{trimmed}",
                                            wide.audio_ctx
                                        ));
                                        audio_ctx = Some(wide.audio_ctx);
                                        Some(w)
                                    }
                                    Some(why) => {
                                        tracing::info!(reason = %why, wide_text = %w.text, "STT wide pass rejected; full context");
                                        reason.push_str(&format!(
                                            "; audio_ctx {}: {}",
                                            wide.audio_ctx,
                                            why.trim_start_matches("fast pass ")
                                        ));
                                        None
                                    }
                                }
                            }
                            None => None,
                        };
                        match wide {
                            Some(w) => {
                                path = "fast+wide";
                                w
                            }
                            None => {
                                path = if timings.wide_ms.is_some() {
                                    "fast+wide+full"
                                } else {
                                    "fast+full"
                                };
                                // Same bounded decoding, full context:
                                // in-distribution for the model, still one
                                // segment and a token cap.
                                let full = Plan {
                                    audio_ctx: 0,
                                    no_timestamps: true,
                                    temperature_fallback: true,
                                    wall_cap: Duration::from_millis(u64::from(
                                        self.cfg.fast.full_max_wall_ms,
                                    )),
                                    // A greedy trial that failed here gets
                                    // the beams, as before the trial.
                                    greedy: plan.greedy && !self.greedy_on_trial(&plan, audio_ms),
                                    ..plan
                                };
                                let d = self.decode_unless(audio, &full, Some(cancel))?;
                                if cancel.is_cancelled() {
                                    return Err(SttError::Cancelled);
                                }
                                timings.full_ms = Some(d.elapsed.as_millis() as u64);
                                d
                            }
                        }
                    }
                }
            }
            None => {
                reason = if self.cfg.fast.enabled {
                    format!(
                        "{audio_ms} ms > stt.fast.max_audio_ms = {}",
                        self.cfg.fast.max_audio_ms
                    )
                } else {
                    "stt.fast.enabled = false".into()
                };
                let full = self.full_plan(audio.len());
                let d = self.decode_unless(audio, &full, Some(cancel))?;
                if cancel.is_cancelled() {
                    return Err(SttError::Cancelled);
                }
                timings.full_ms = Some(d.elapsed.as_millis() as u64);
                d
            }
        };
        let mut decoded = decoded;
        let mut gap_note = None;
        // A full-context reading goes on past a pause (segments and
        // timestamps); only a shrunken context ends at one.
        let shrunken = !path.contains("full");
        if self.cfg.fast.gap_check && self.cfg.fast.enabled && shrunken && !decoded.aborted {
            let gap_started = Instant::now();
            let ran = std::cell::Cell::new(false);
            let (kept, note) = self.keep_words_after_pauses(audio, decoded, &ran, cancel)?;
            decoded = kept;
            if ran.get() {
                timings.gap_ms = Some(gap_started.elapsed().as_millis() as u64);
            }
            gap_note = note;
        }
        if let Some(note) = &gap_note {
            reason.push_str(note);
        }
        if decoded.aborted && path != "fast" {
            reason.push_str(&format!(
                "; full pass stopped at the {} ms wall-time cap (text may be partial)",
                self.cfg.fast.full_max_wall_ms
            ));
        }
        if self.cfg.fast.gap_check && audio_ms <= u64::from(self.cfg.fast.max_audio_ms) {
            if let Ok(mut last) = self.last_reading.lock() {
                *last = Some((audio.to_vec(), decoded.text.clone()));
            }
        }
        let cleaned = text::clean(&decoded.text);
        // whisper's own rule for "this was not speech".
        let no_speech =
            cleaned.is_empty() || (decoded.no_speech_prob > 0.6 && decoded.avg_logprob < -1.0);
        timings.stt_ms = started.elapsed().as_millis() as u64;
        Ok(Transcript {
            text: if no_speech { String::new() } else { cleaned },
            no_speech,
            engine: "whisper".into(),
            path: if gap_note.is_some() {
                format!("{path}+gap")
            } else {
                path.into()
            },
            reason,
            timings,
            audio_ctx,
            avg_logprob: Some(decoded.avg_logprob),
            min_logprob: Some(decoded.min_logprob),
            weakest_word: Some(decoded.weakest.trim().to_string()),
            fallbacks: Vec::new(),
        })
    }

    fn transcribe_word(&self, audio: &[f32]) -> Result<Transcript, SttError> {
        let _live = crate::cpu::LiveWork::begin();
        let started = Instant::now();
        let audio_ms = audio.len() as u64 * 1000 / u64::from(SAMPLE_RATE);
        let plan = self.word_plan(audio.len());
        let (d, trimmed) = self.pass(audio, &plan, &CancelToken::new())?;
        let cleaned = text::clean(&d.text);
        let no_speech = cleaned.is_empty() || (d.no_speech_prob > 0.6 && d.avg_logprob < -1.0);
        let timings = SttTimings {
            audio_ms,
            fast_ms: Some(d.elapsed.as_millis() as u64),
            stt_ms: started.elapsed().as_millis() as u64,
            ..Default::default()
        };
        Ok(Transcript {
            text: if no_speech { String::new() } else { cleaned },
            no_speech,
            engine: "whisper".into(),
            path: "word".into(),
            reason: format!(
                "a word: audio_ctx {}, ≤ {} tokens{trimmed}",
                plan.audio_ctx, plan.max_tokens
            ),
            timings,
            audio_ctx: Some(plan.audio_ctx),
            avg_logprob: Some(d.avg_logprob),
            min_logprob: Some(d.min_logprob),
            weakest_word: Some(d.weakest.trim().to_string()),
            fallbacks: Vec::new(),
        })
    }

    fn warm_up(&self) -> Result<(), SttError> {
        // Quiet noise through the path short commands take, so the weights
        // are resident before the first real turn (every path reads them
        // all). The full context is not warmed: its encoder is one graph
        // whisper.cpp can't stop midway, and a word said while it ran
        // would wait behind it. The pass gives way to a live one anyway.
        let noise: Vec<f32> = (0..SAMPLE_RATE as usize * 2)
            .map(|i| (i as f32 * 0.37).sin() * 0.001)
            .collect();
        let plan = self.fast_plan(noise.len()).unwrap_or_else(|| Plan {
            max_tokens: 4,
            ..self.full_plan(noise.len())
        });
        let plan = Plan {
            yields: true,
            ..plan
        };
        if self.decode(&noise, &plan)?.aborted {
            tracing::debug!("STT warm-up gave way to a live pass");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{exit_guard, CancelToken, Plan, SttError, WhisperStt};
    use crate::stt::SttConfig;
    use std::path::Path;
    use std::sync::{Arc, OnceLock};
    use std::time::{Duration, Instant};

    /// The tiny model from `models/` (or `EARSHOT_MODELS_DIR`), once.
    fn engine() -> Arc<WhisperStt> {
        static ENGINE: OnceLock<Arc<WhisperStt>> = OnceLock::new();
        ENGINE
            .get_or_init(|| {
                let dir = std::env::var_os("EARSHOT_MODELS_DIR")
                    .map(std::path::PathBuf::from)
                    .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"));
                let model = dir.join("ggml-tiny.en.bin");
                Arc::new(WhisperStt::load(&model, &SttConfig::default()).expect("ggml-tiny.en.bin"))
            })
            .clone()
    }

    fn hum(seconds: f32) -> Vec<f32> {
        (0..(16_000.0 * seconds) as usize)
            .map(|i| (i as f32 * 0.05).sin() * 0.05)
            .collect()
    }

    /// Blocks until some pass holds the engine.
    fn until_busy(w: &WhisperStt) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while w.run.try_lock().is_ok() {
            assert!(Instant::now() < deadline, "the pass never started");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The tests below watch who holds the one engine, and the count of
    /// passes in flight that every decode adds to: not at once (a full
    /// pass of the first one, slow on a loaded machine, was still in
    /// flight when the last one waited for the count to reach zero).
    fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        ONE.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[test]
    fn a_word_pass_stops_the_warm_up_instead_of_waiting_for_it() {
        let _one = one_at_a_time();
        let w = engine();
        let audio = hum(2.0);
        let warm = {
            let (w, audio) = (w.clone(), audio.clone());
            std::thread::spawn(move || {
                let plan = Plan {
                    yields: true,
                    max_tokens: 4,
                    ..w.full_plan(audio.len())
                };
                w.decode(&audio, &plan).expect("warm-up pass")
            })
        };
        until_busy(&w);
        let word = w
            .decode(&audio[..12_000], &w.word_plan(12_000))
            .expect("word");
        let warm = warm.join().expect("warm-up thread");
        assert!(warm.aborted, "the warm-up ran on ({:?})", warm.elapsed);
        assert!(!word.aborted);
        // A pass that does not yield is not stopped by another.
        let full = Plan {
            max_tokens: 4,
            ..w.full_plan(audio.len())
        };
        assert!(!w.decode(&audio, &full).expect("full").aborted);
    }

    #[test]
    fn a_cancelled_pass_stops_and_one_cancelled_before_it_starts_never_runs() {
        let _one = one_at_a_time();
        let w = engine();
        let audio = hum(2.0);
        let plan = Plan {
            max_tokens: 32,
            ..w.full_plan(audio.len())
        };
        // Cancelled once the pass holds the engine: it stops after the
        // encoder (the same pass uncancelled runs on: the test above).
        let cancel = CancelToken::new();
        let canceller = {
            let (w, cancel) = (w.clone(), cancel.clone());
            std::thread::spawn(move || {
                until_busy(&w);
                cancel.cancel();
            })
        };
        let stopped = w.decode_unless(&audio, &plan, Some(&cancel)).expect("pass");
        canceller.join().expect("canceller");
        assert!(stopped.aborted, "{stopped:?}");
        // Cancelled before: no encoder, no decoder.
        let started = Instant::now();
        let never = w.decode_unless(&audio, &plan, Some(&cancel));
        assert!(matches!(never, Err(SttError::Cancelled)), "{never:?}");
        assert!(
            started.elapsed() < stopped.elapsed / 2,
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_wall_cap_counts_from_when_the_pass_gets_the_engine() {
        let _one = one_at_a_time();
        let w = engine();
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let holder = {
            let w = w.clone();
            std::thread::spawn(move || {
                let _held = w.run.lock().expect("engine lock");
                held_tx.send(()).expect("test alive");
                // Another pass, longer than the word's cap.
                std::thread::sleep(Duration::from_millis(1500));
            })
        };
        held_rx.recv().expect("holder");
        let plan = Plan {
            wall_cap: Duration::from_millis(1000),
            ..w.word_plan(12_000)
        };
        let word = w.decode(&hum(0.75), &plan).expect("word");
        holder.join().expect("holder thread");
        assert!(
            word.elapsed >= Duration::from_millis(1400),
            "{:?}",
            word.elapsed
        );
        assert!(!word.aborted, "capped by the wait behind another pass");
        // And a pass that runs past its cap is stopped.
        let capped = Plan {
            wall_cap: Duration::from_millis(1),
            max_tokens: 4,
            ..w.full_plan(32_000)
        };
        assert!(w.decode(&hum(2.0), &capped).expect("capped").aborted);
    }

    #[test]
    fn exit_waits_for_work_in_flight_and_no_longer_than_its_bound() {
        let _one = one_at_a_time();
        let guard = exit_guard::enter();
        assert!(exit_guard::in_flight() >= 1);
        // Held: settling gives up at its bound.
        let t = Instant::now();
        assert!(!exit_guard::settle(Duration::from_millis(50)));
        assert!(t.elapsed() >= Duration::from_millis(50));
        // Released on another thread after 100 ms: settling waits for it.
        let worker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(guard);
        });
        let t = Instant::now();
        assert!(exit_guard::settle(Duration::from_secs(5)));
        assert!(
            t.elapsed() >= Duration::from_millis(90),
            "{:?}",
            t.elapsed()
        );
        worker.join().unwrap();
    }
}
