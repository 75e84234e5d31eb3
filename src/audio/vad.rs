//! Endpointing: webrtc-vad frame decisions turned into utterances.
//!
//! The state machine is small on purpose: *idle* keeps a pre-roll of the
//! last few hundred ms; `start_frames` voiced frames within the last
//! `start_window` frames start an utterance (pre-roll included, so the first
//! syllable is never clipped); `hangover_ms` of continuous non-speech ends
//! it; anything with less than `min_utterance_ms` of speech is dropped as a
//! blip; `max_utterance_ms` forces an end so a stuck-open mic can't grow a
//! buffer forever.
//!
//! `webrtc_vad::Vad` is not `Send`, so an [`Endpointer`] lives on the
//! thread that created it (the voice loop's listening thread).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use webrtc_vad::{SampleRate, Vad, VadMode};

use super::{AudioError, AudioSource, SAMPLE_RATE};
use crate::cancel::CancelToken;

/// `[audio.vad]`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VadConfig {
    /// 10, 20 or 30 (webrtc-vad's only frame sizes).
    pub frame_ms: u32,
    /// 0 (lets most sound through) … 3 (strictest about what is speech).
    pub aggressiveness: u8,
    /// Voiced frames needed within the last `start_window` frames to start.
    pub start_frames: u32,
    /// Window (in frames) the start trigger counts over.
    pub start_window: u32,
    /// Audio kept from before the trigger, so onsets are not clipped.
    pub preroll_ms: u32,
    /// Continuous non-speech that ends an utterance.
    pub hangover_ms: u32,
    /// Shorter speech (trigger to last voiced frame) is discarded as a blip.
    pub min_utterance_ms: u32,
    /// An utterance is cut here even if speech continues: long enough
    /// for a minute-long sentence (issue 21), short enough that a
    /// stuck-open microphone still ends.
    pub max_utterance_ms: u32,
    /// Non-speech kept after the last voiced frame (whisper likes a little).
    pub tail_ms: u32,
    /// Non-speech after which the audio so far is offered for a
    /// speculative look (`VadEvent::Pause`): the voice loop transcribes it
    /// during the hang-over and may end a complete command there (issue
    /// 21). 0 turns it off; at or above `hangover_ms` it never fires.
    pub early_ms: u32,
    /// Non-speech after which a finished question (or an order to tell or
    /// explain something), whose language-model request began at the
    /// look, ends instead of at `hangover_ms` (issue 21). Long enough
    /// that a pause inside a question after words that read whole ("Who
    /// painted? … the Mona Lisa") does not cut it; the answer is rarely
    /// ready much sooner anyway. At or above `hangover_ms` it never ends
    /// sooner; 0 = off.
    pub question_ms: u32,
    /// Non-speech after which words whose look reads whole but may not
    /// end sooner — a device command with two or three doubts (no full
    /// stop, a classifier less sure, a weak fit; often words misheard:
    /// "batteries on my shopping list" for "Put … batteries on my
    /// shopping list"), or a question whisper wrote without its mark —
    /// end instead of at `hangover_ms` (issue 21). As long as
    /// `question_ms`: a pause of 500 ms inside a sentence was measured
    /// here as up to 560. Words that trail off, end on one that needs
    /// more, or begin a longer command ("Set a timer.", "Remind me to
    /// call.") keep the whole hang-over: that is where a speaker pauses
    /// mid-sentence. At or above `hangover_ms` it never ends sooner;
    /// 0 = off.
    pub settle_ms: u32,
    /// Non-speech that ends an utterance whose look read words stopping
    /// on one that cannot end a sentence ("How hot is", "How do birds",
    /// "Add it to the"; not a trailing comma after a whole question),
    /// instead of `hangover_ms`: a speaker pausing there is looking for
    /// the next word (a pause of 600 ms inside "How hot is … the surface
    /// of the sun?" cut it at the hang-over). At or below `hangover_ms`
    /// it holds nothing longer; 0 = off.
    pub open_hold_ms: u32,
    /// Non-speech after which that look starts (≤ `early_ms`): the
    /// transcript is made while the pause grows to `early_ms`, so a
    /// complete command ends at `early_ms` instead of `early_ms` plus a
    /// transcription. The look runs beside the listening and is dropped
    /// when speech goes on, so a short gap inside a sentence costs no
    /// wait (issue 21: 90 before that). 0 = at `early_ms`.
    pub look_ms: u32,
    /// Speech longer than this is not offered for a look: no command is
    /// this long, and a look at a long utterance costs a transcription
    /// that grows with it while the microphone's ring fills (a long
    /// sentence with short pauses would otherwise be transcribed again at
    /// every pause). 0 = no limit.
    pub look_max_ms: u32,
    /// Inside an utterance, a frame this many dB below its loudest frame
    /// is silence whatever webrtc-vad says: its built-in overhang calls
    /// ~120 ms of true silence after the last word speech, which every
    /// request waited for (issue 21). 0 turns the override off.
    pub quiet_db: f32,
    /// Before anything is transcribed, a speech detector (Silero VAD,
    /// `silero_vad.onnx` in the models directory, `audio::silero`) must
    /// find speech in the utterance: a fan, music or dishes that
    /// webrtc-vad let through are dropped, not answered. Off: every
    /// utterance is transcribed. Without the model file the loop warns
    /// once and transcribes everything.
    pub speech_check: bool,
    /// Frames of 32 ms the detector must call speech for an utterance to
    /// count (5 = 160 ms; the shortest command measured had 16).
    pub speech_frames: u32,
}

impl Default for VadConfig {
    fn default() -> Self {
        Self {
            frame_ms: 30,
            aggressiveness: 2,
            start_frames: 4,
            start_window: 6,
            preroll_ms: 300,
            hangover_ms: 700,
            min_utterance_ms: 250,
            max_utterance_ms: 90_000,
            tail_ms: 200,
            early_ms: 300,
            question_ms: 600,
            settle_ms: 600,
            open_hold_ms: 1_200,
            look_ms: 60,
            look_max_ms: 8_000,
            quiet_db: 40.0,
            speech_check: true,
            speech_frames: 5,
        }
    }
}

impl VadConfig {
    /// Check the values; the error names the key and the allowed range.
    pub fn validate(&self) -> Result<(), String> {
        if ![10, 20, 30].contains(&self.frame_ms) {
            return Err(format!(
                "audio.vad.frame_ms = {} but webrtc-vad only takes 10, 20 or 30",
                self.frame_ms
            ));
        }
        if self.aggressiveness > 3 {
            return Err(format!(
                "audio.vad.aggressiveness = {} but it must be 0..=3",
                self.aggressiveness
            ));
        }
        if self.start_frames == 0 || self.start_window < self.start_frames {
            return Err(format!(
                "audio.vad.start_frames = {} must be ≥ 1 and ≤ audio.vad.start_window = {}",
                self.start_frames, self.start_window
            ));
        }
        if !(self.quiet_db.is_finite() && self.quiet_db >= 0.0) {
            return Err(format!(
                "audio.vad.quiet_db = {} must be a number ≥ 0 (0 = off)",
                self.quiet_db
            ));
        }
        if self.max_utterance_ms < 1000 || self.max_utterance_ms <= self.min_utterance_ms {
            return Err(format!(
                "audio.vad.max_utterance_ms = {} must be ≥ 1000 and above min_utterance_ms = {}",
                self.max_utterance_ms, self.min_utterance_ms
            ));
        }
        Ok(())
    }

    /// The pause at which `VadEvent::Pause` fires (0 = never).
    pub fn look_at_ms(&self) -> u32 {
        match (self.early_ms, self.look_ms) {
            (0, _) => 0,
            (early, 0) => early,
            (early, look) => look.min(early),
        }
    }

    fn frame_len(&self) -> usize {
        (SAMPLE_RATE * self.frame_ms / 1000) as usize
    }
}

/// Why an utterance ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// `hangover_ms` of non-speech.
    Silence,
    /// `max_utterance_ms` reached.
    MaxLength,
    /// The input ended (file drained, button released) mid-speech.
    EndOfInput,
    /// Ended at a pause by the listener ([`Endpointer::end_now`]): what
    /// was said so far is a complete request.
    Early,
}

/// What a listener made of the audio at a pause (a speculative
/// transcript), carried to the utterance when no speech followed, so it is
/// not computed twice. Opaque here: the audio layer does not know STT.
#[derive(Clone)]
pub struct Speculation(pub std::sync::Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Speculation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Speculation(..)")
    }
}

/// One endpointed stretch of speech, 16 kHz mono.
#[derive(Debug, Clone)]
pub struct Utterance {
    pub samples: Vec<i16>,
    /// Stream position of `samples[0]` (ms since the endpointer started).
    pub start_ms: u64,
    /// Stream position of the first voiced frame of the trigger.
    pub speech_start_ms: u64,
    /// Stream position just after the last voiced frame.
    pub speech_end_ms: u64,
    pub reason: EndReason,
    /// Wall-clock moment the end was decided (the loop's "VAD end" stamp).
    pub decided_at: Instant,
    /// What the listener made of this same speech at a pause
    /// ([`Endpointer::attach`]), when no voiced frame came after it.
    pub speculation: Option<Speculation>,
}

impl Utterance {
    /// Length of `samples` in ms.
    pub fn duration_ms(&self) -> u64 {
        self.samples.len() as u64 * 1000 / u64::from(SAMPLE_RATE)
    }

    /// Stream position just after the last sample.
    pub fn end_ms(&self) -> u64 {
        self.start_ms + self.duration_ms()
    }

    /// The samples as whisper wants them.
    pub fn to_f32(&self) -> Vec<f32> {
        super::to_f32(&self.samples)
    }
}

/// What a chunk of audio produced.
#[derive(Debug, Clone)]
pub enum VadEvent {
    /// The start trigger fired (the loop may duck playback / barge in).
    SpeechStart { at_ms: u64 },
    /// A complete utterance.
    Utterance(Utterance),
    /// Speech started but was shorter than `min_utterance_ms`.
    Discarded { start_ms: u64, speech_ms: u64 },
    /// `look_ms` (or `early_ms`) of non-speech inside an utterance: the
    /// audio so far (as the utterance would be if it ended now), once per
    /// pause.
    Pause(Utterance),
}

/// The endpointer. Not `Send` (webrtc-vad's handle): create it on the
/// thread that reads the source.
pub struct Endpointer {
    cfg: VadConfig,
    vad: Vad,
    frame_len: usize,
    /// Partial frame carried between `push` calls.
    partial: Vec<i16>,
    /// Samples consumed so far (whole frames).
    pos: u64,
    /// Idle: the last `preroll` samples plus the trigger window.
    preroll: VecDeque<i16>,
    preroll_cap: usize,
    /// Recent voiced flags (idle only), with each frame's start position.
    window: VecDeque<(bool, u64)>,
    speaking: Option<Speech>,
    /// Events produced but not yet returned by `listen`.
    queued: VecDeque<VadEvent>,
    /// A speculation on the speech up to this position (ms).
    attached: Option<(u64, Speculation)>,
}

impl std::fmt::Debug for Endpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // webrtc-vad's handle has no Debug; show the state that matters.
        f.debug_struct("Endpointer")
            .field("cfg", &self.cfg)
            .field("pos", &self.pos)
            .field("speaking", &self.speaking.is_some())
            .finish()
    }
}

struct Speech {
    buf: Vec<i16>,
    start_ms: u64,
    speech_start_ms: u64,
    last_voiced_end_ms: u64,
    silence_ms: u32,
    /// This pause was already offered (`VadEvent::Pause`).
    paused: bool,
    /// Mean square of the loudest frame so far (`VadConfig::quiet_db`).
    peak_power: f32,
    /// The hang-over of this pause when a look held it longer
    /// ([`Endpointer::hold`]); 0 = `hangover_ms`.
    hold_ms: u32,
}

/// How many of the speech's samples an utterance keeps: `tail_ms` after
/// the last voiced frame, the rest of the hang-over dropped.
fn kept(tail_ms: u32, sp: &Speech) -> usize {
    let keep_until_ms =
        (sp.last_voiced_end_ms + u64::from(tail_ms)).min(sp.start_ms + ms(sp.buf.len() as u64));
    let keep = ((keep_until_ms - sp.start_ms) * u64::from(SAMPLE_RATE) / 1000) as usize;
    keep.min(sp.buf.len())
}

/// A 16 kHz webrtc-vad detector at the configured aggressiveness.
fn new_vad(aggressiveness: u8) -> Vad {
    let mode = match aggressiveness {
        0 => VadMode::Quality,
        1 => VadMode::LowBitrate,
        2 => VadMode::Aggressive,
        _ => VadMode::VeryAggressive,
    };
    Vad::new_with_rate_and_mode(SampleRate::Rate16kHz, mode)
}

/// Mean square of a frame (full scale = 1.0).
/// Mean square (of samples scaled to ±1) under which a frame is digital
/// silence: an RMS of 2 LSB of 16 bits, far under any microphone's noise
/// floor.
const DIGITAL_SILENCE: f32 = (2.0 / 32768.0) * (2.0 / 32768.0);

fn mean_square(frame: &[i16]) -> f32 {
    if frame.is_empty() {
        return 0.0;
    }
    let sum: f32 = frame
        .iter()
        .map(|&s| {
            let x = f32::from(s) / 32768.0;
            x * x
        })
        .sum();
    sum / frame.len() as f32
}

fn ms(samples: u64) -> u64 {
    samples * 1000 / u64::from(SAMPLE_RATE)
}

impl Endpointer {
    /// A fresh endpointer; fails only on an invalid config.
    pub fn new(cfg: &VadConfig) -> Result<Self, String> {
        cfg.validate()?;
        let vad = new_vad(cfg.aggressiveness);
        let frame_len = cfg.frame_len();
        let preroll_cap =
            (SAMPLE_RATE * cfg.preroll_ms / 1000) as usize + frame_len * cfg.start_window as usize;
        Ok(Self {
            cfg: cfg.clone(),
            vad,
            frame_len,
            partial: Vec::with_capacity(frame_len),
            pos: 0,
            preroll: VecDeque::with_capacity(preroll_cap + frame_len),
            preroll_cap,
            window: VecDeque::with_capacity(cfg.start_window as usize + 1),
            speaking: None,
            queued: VecDeque::new(),
            attached: None,
        })
    }

    /// True between a start trigger and the utterance's end.
    pub fn is_speaking(&self) -> bool {
        self.speaking.is_some()
    }

    /// The speech in progress: its start (stream ms, as its utterance
    /// will say) and its samples so far.
    pub fn speech_so_far(&self) -> Option<(u64, &[i16])> {
        self.speaking
            .as_ref()
            .map(|sp| (sp.start_ms, sp.buf.as_slice()))
    }

    /// Stream position (ms) of everything consumed so far.
    pub fn position_ms(&self) -> u64 {
        ms(self.pos)
    }

    /// Forget any speech in progress and the pre-roll (after playback, so
    /// the device never answers its own voice). The clock keeps running.
    pub fn reset(&mut self) {
        self.partial.clear();
        self.preroll.clear();
        self.window.clear();
        self.speaking = None;
        self.queued.clear();
        self.attached = None;
        // A fresh detector, not `Vad::reset`: fvad_reset also puts the
        // sample rate back to 8 kHz, after which no 16 kHz frame is ever
        // speech (the loop went deaf after its first turn).
        self.vad = new_vad(self.cfg.aggressiveness);
    }

    /// Feed 16 kHz mono samples; returns what they completed.
    pub fn push(&mut self, samples: &[i16]) -> Vec<VadEvent> {
        let mut events = Vec::new();
        let mut rest = samples;
        if !self.partial.is_empty() {
            let need = self.frame_len - self.partial.len();
            let take = need.min(rest.len());
            self.partial.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.partial.len() == self.frame_len {
                let frame = std::mem::take(&mut self.partial);
                self.frame(&frame, &mut events);
                self.partial = frame;
                self.partial.clear();
            }
        }
        let mut chunks = rest.chunks_exact(self.frame_len);
        for frame in &mut chunks {
            self.frame(frame, &mut events);
        }
        self.partial.extend_from_slice(chunks.remainder());
        events
    }

    /// End of input: close an utterance in progress (if long enough).
    pub fn finish(&mut self) -> Option<Utterance> {
        let partial = std::mem::take(&mut self.partial);
        if let Some(sp) = self.speaking.as_mut() {
            sp.buf.extend_from_slice(&partial);
        }
        let mut events = Vec::new();
        self.end(EndReason::EndOfInput, &mut events);
        events.into_iter().find_map(|e| match e {
            VadEvent::Utterance(u) => Some(u),
            _ => None,
        })
    }

    fn frame(&mut self, frame: &[i16], events: &mut Vec<VadEvent>) {
        let frame_start = self.pos;
        self.pos += frame.len() as u64;
        // webrtc-vad only errors on a bad frame length, which `frame_len` rules out.
        let mut voiced = self.vad.is_voice_segment(frame).unwrap_or(false);
        // Digital silence is never speech: after a minute of speech
        // webrtc-vad was seen calling a second of exact zeros voiced.
        if voiced && mean_square(frame) < DIGITAL_SILENCE {
            voiced = false;
        }
        let frame_ms = self.cfg.frame_ms;
        if let Some(sp) = self.speaking.as_mut() {
            sp.buf.extend_from_slice(frame);
            if self.cfg.quiet_db > 0.0 {
                let power = mean_square(frame);
                sp.peak_power = sp.peak_power.max(power);
                if power < sp.peak_power * 10f32.powf(-self.cfg.quiet_db / 10.0) {
                    voiced = false;
                }
            }
            if voiced {
                sp.silence_ms = 0;
                sp.last_voiced_end_ms = ms(self.pos);
                sp.paused = false;
                sp.hold_ms = 0;
            } else {
                sp.silence_ms += frame_ms;
            }
            let len_ms = ms(sp.buf.len() as u64);
            let early = self.cfg.look_at_ms();
            let spoken_ms = sp.last_voiced_end_ms.saturating_sub(sp.speech_start_ms);
            if early > 0
                && !sp.paused
                && (self.cfg.look_max_ms == 0 || spoken_ms <= u64::from(self.cfg.look_max_ms))
                && sp.silence_ms >= early
                && sp.silence_ms < self.cfg.hangover_ms
                && spoken_ms >= u64::from(self.cfg.min_utterance_ms)
            {
                sp.paused = true;
                let keep = kept(self.cfg.tail_ms, sp);
                events.push(VadEvent::Pause(Utterance {
                    samples: sp.buf[..keep].to_vec(),
                    start_ms: sp.start_ms,
                    speech_start_ms: sp.speech_start_ms,
                    speech_end_ms: sp.last_voiced_end_ms,
                    reason: EndReason::Early,
                    decided_at: Instant::now(),
                    speculation: None,
                }));
            }
            if sp.silence_ms >= self.cfg.hangover_ms.max(sp.hold_ms) {
                self.end(EndReason::Silence, events);
            } else if len_ms >= u64::from(self.cfg.max_utterance_ms) {
                self.end(EndReason::MaxLength, events);
            }
            return;
        }
        // Idle: keep the pre-roll and the trigger window.
        self.preroll.extend(frame.iter().copied());
        while self.preroll.len() > self.preroll_cap {
            self.preroll.pop_front();
        }
        self.window.push_back((voiced, frame_start));
        while self.window.len() > self.cfg.start_window as usize {
            self.window.pop_front();
        }
        let count = self.window.iter().filter(|(v, _)| *v).count() as u32;
        if count >= self.cfg.start_frames {
            let first_voiced = self
                .window
                .iter()
                .find(|(v, _)| *v)
                .map_or(frame_start, |(_, p)| *p);
            let buf: Vec<i16> = self.preroll.drain(..).collect();
            let start = self.pos - buf.len() as u64;
            self.window.clear();
            events.push(VadEvent::SpeechStart {
                at_ms: ms(first_voiced),
            });
            self.speaking = Some(Speech {
                buf,
                start_ms: ms(start),
                speech_start_ms: ms(first_voiced),
                last_voiced_end_ms: ms(self.pos),
                silence_ms: 0,
                paused: false,
                peak_power: 0.0,
                hold_ms: 0,
            });
        }
    }

    fn end(&mut self, reason: EndReason, events: &mut Vec<VadEvent>) {
        let Some(mut sp) = self.speaking.take() else {
            return;
        };
        let speech_ms = sp.last_voiced_end_ms.saturating_sub(sp.speech_start_ms);
        if speech_ms < u64::from(self.cfg.min_utterance_ms) && reason != EndReason::MaxLength {
            events.push(VadEvent::Discarded {
                start_ms: sp.start_ms,
                speech_ms,
            });
            return;
        }
        let keep = kept(self.cfg.tail_ms, &sp);
        sp.buf.truncate(keep);
        let speculation = match self.attached.take() {
            Some((at, s)) if at == sp.last_voiced_end_ms => Some(s),
            _ => None,
        };
        events.push(VadEvent::Utterance(Utterance {
            samples: sp.buf,
            start_ms: sp.start_ms,
            speech_start_ms: sp.speech_start_ms,
            speech_end_ms: sp.last_voiced_end_ms,
            reason,
            decided_at: Instant::now(),
            speculation,
        }));
    }

    /// Where the speech in progress last had a voiced frame (ms), if any.
    pub fn last_voiced_end_ms(&self) -> Option<u64> {
        self.speaking.as_ref().map(|sp| sp.last_voiced_end_ms)
    }

    /// How long the pause after `speech_end_ms` has lasted (ms), while the
    /// speech in progress has had no voiced frame since; `None` once it
    /// resumed or ended.
    pub fn pause_ms(&self, speech_end_ms: u64) -> Option<u32> {
        self.speaking
            .as_ref()
            .filter(|sp| sp.last_voiced_end_ms == speech_end_ms)
            .map(|sp| sp.silence_ms)
    }

    /// Let the pause after `speech_end_ms` last up to `hold_ms` before it
    /// ends the utterance, instead of `hangover_ms` (the look there read
    /// words that cannot end a sentence: `VadConfig::open_hold_ms`).
    /// Nothing when speech resumed since, or `hold_ms` is shorter.
    pub fn hold(&mut self, speech_end_ms: u64, hold_ms: u32) {
        if let Some(sp) = self
            .speaking
            .as_mut()
            .filter(|sp| sp.last_voiced_end_ms == speech_end_ms)
        {
            sp.hold_ms = sp.hold_ms.max(hold_ms);
        }
    }

    /// Keep `speculation` for the speech up to `speech_end_ms`: the
    /// utterance carries it if it ends with no voiced frame after that.
    pub fn attach(&mut self, speech_end_ms: u64, speculation: Speculation) {
        self.attached = Some((speech_end_ms, speculation));
    }

    /// The speculation attached at an earlier pause of the speech in
    /// progress (its last look), whatever speech followed it.
    pub fn looked(&self) -> Option<&Speculation> {
        self.looked_at().map(|(_, s)| s)
    }

    /// [`Endpointer::looked`], with the speech end (stream ms) it was
    /// attached at.
    pub fn looked_at(&self) -> Option<(u64, &Speculation)> {
        let sp = self.speaking.as_ref()?;
        self.attached
            .as_ref()
            .filter(|(at, _)| *at >= sp.speech_start_ms)
            .map(|(at, s)| (*at, s))
    }

    /// End the speech in progress now (the listener judged what was said a
    /// complete request); `None` when nothing is in progress or no voiced
    /// frame came since `speech_end_ms` was not the last one.
    pub fn end_now(&mut self, speech_end_ms: u64) -> Option<Utterance> {
        if self.last_voiced_end_ms() != Some(speech_end_ms) {
            return None;
        }
        let mut events = Vec::new();
        self.end(EndReason::Early, &mut events);
        events.into_iter().find_map(|e| match e {
            VadEvent::Utterance(u) => Some(u),
            _ => None,
        })
    }

    /// Read `source` until one utterance is complete (or the source ends,
    /// `cancel` fires, or `max_wait` passes without speech starting).
    /// `Ok(None)` means no utterance: cancelled, timed out or input ended.
    /// Events after the utterance stay queued for the next call.
    pub fn listen(
        &mut self,
        source: &mut dyn AudioSource,
        cancel: &CancelToken,
        max_wait: Option<Duration>,
    ) -> Result<Option<Utterance>, AudioError> {
        let started = Instant::now();
        let mut buf = vec![0i16; self.frame_len * 4];
        loop {
            while let Some(ev) = self.queued.pop_front() {
                if let VadEvent::Utterance(u) = ev {
                    return Ok(Some(u));
                }
            }
            if cancel.is_cancelled() {
                return Ok(None);
            }
            if let Some(limit) = max_wait {
                if !self.is_speaking() && started.elapsed() >= limit {
                    return Ok(None);
                }
            }
            match source.read(&mut buf, Duration::from_millis(100)) {
                Ok(n) => {
                    let events = self.push(&buf[..n]);
                    self.queued.extend(events);
                }
                Err(AudioError::Ended) => return Ok(self.finish()),
                Err(e) => {
                    self.speaking = None;
                    return Err(e);
                }
            }
        }
    }
}

/// Cut a whole buffer into utterances (files, tests, the "is there any
/// speech at all" check before transcribing a file).
pub fn segment(samples: &[i16], cfg: &VadConfig) -> Result<Vec<Utterance>, String> {
    let mut ep = Endpointer::new(cfg)?;
    let mut out: Vec<Utterance> = ep
        .push(samples)
        .into_iter()
        .filter_map(|e| match e {
            VadEvent::Utterance(u) => Some(u),
            _ => None,
        })
        .collect();
    out.extend(ep.finish());
    Ok(out)
}

/// Milliseconds of frames webrtc-vad calls voiced (a cheap "is there any
/// speech" measure that ignores the trigger logic).
pub fn voiced_ms(samples: &[i16], aggressiveness: u8) -> u64 {
    voiced_frames(samples, aggressiveness)
        .iter()
        .filter(|&&v| v)
        .count() as u64
        * VOICED_FRAME_MS
}

/// The frame [`voiced_frames`] judges, in ms.
pub const VOICED_FRAME_MS: u64 = 30;

/// webrtc-vad's verdict on each whole 30 ms frame of `samples` (16 kHz),
/// without the trigger logic: where speech and the pauses inside it are.
pub fn voiced_frames(samples: &[i16], aggressiveness: u8) -> Vec<bool> {
    let mut vad = new_vad(aggressiveness);
    let frame = (u64::from(SAMPLE_RATE) * VOICED_FRAME_MS / 1000) as usize;
    samples
        .chunks_exact(frame)
        .map(|f| vad.is_voice_segment(f).unwrap_or(false))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_config() {
        let bad = VadConfig {
            frame_ms: 25,
            ..VadConfig::default()
        };
        assert!(Endpointer::new(&bad).unwrap_err().contains("frame_ms"));
        let bad = VadConfig {
            aggressiveness: 4,
            ..VadConfig::default()
        };
        assert!(Endpointer::new(&bad)
            .unwrap_err()
            .contains("aggressiveness"));
    }

    #[test]
    fn silence_gives_nothing() {
        let silence = vec![0i16; 16_000 * 3];
        assert!(segment(&silence, &VadConfig::default()).unwrap().is_empty());
    }

    #[test]
    fn pushes_in_odd_sizes_equal_one_push() {
        // Real speech between silences.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/speech/goforward.wav");
        let (speech, _) = crate::audio::wav::read_16k_mono(&path, None).unwrap();
        let mut sig = vec![0i16; 8000];
        sig.extend(crate::audio::to_i16(&speech));
        sig.extend(vec![0i16; 16_000]);
        let cfg = VadConfig::default();
        let whole = segment(&sig, &cfg).unwrap();
        assert!(!whole.is_empty(), "no utterance found in real speech");
        let mut ep = Endpointer::new(&cfg).unwrap();
        let mut pieces = Vec::new();
        for c in sig.chunks(317) {
            for e in ep.push(c) {
                if let VadEvent::Utterance(u) = e {
                    pieces.push(u);
                }
            }
        }
        pieces.extend(ep.finish());
        assert_eq!(whole.len(), pieces.len());
        for (a, b) in whole.iter().zip(&pieces) {
            assert_eq!(a.samples, b.samples);
            assert_eq!(a.start_ms, b.start_ms);
        }
    }

    /// The sounding part of a real recording ("go forward ten meters"),
    /// so the gaps a test puts around it are what the test says.
    fn sounding_speech() -> Vec<i16> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/speech/goforward.wav");
        let (speech, _) = crate::audio::wav::read_16k_mono(&path, None).unwrap();
        let speech = crate::audio::to_i16(&speech);
        let first = speech.iter().position(|s| s.unsigned_abs() > 800).unwrap();
        let last = speech.iter().rposition(|s| s.unsigned_abs() > 800).unwrap();
        speech[first..=last].to_vec()
    }

    /// Real speech, a pause of `gap_ms`, the same speech again, silence.
    fn two_phrases(gap_ms: usize) -> Vec<i16> {
        let speech = sounding_speech();
        let mut sig = vec![0i16; 8000];
        sig.extend(&speech);
        sig.extend(vec![0i16; 16 * gap_ms]);
        sig.extend(&speech);
        sig.extend(vec![0i16; 16_000]);
        sig
    }

    #[test]
    fn a_minute_long_sentence_with_short_pauses_is_one_utterance_and_looked_at_only_early() {
        // Real speech said again and again with 300 ms breaths between,
        // for over a minute: one request, not cut at a length limit.
        let speech = sounding_speech();
        let mut sig = vec![0i16; 8000];
        while sig.len() < 16 * 62_000 {
            sig.extend(&speech);
            sig.extend(vec![0i16; 16 * 300]);
        }
        sig.extend(vec![0i16; 16_000 * 3]);
        let cfg = VadConfig::default();
        let mut ep = Endpointer::new(&cfg).unwrap();
        let mut utterances = Vec::new();
        let mut looks = Vec::new();
        for c in sig.chunks(320) {
            for e in ep.push(c) {
                match e {
                    VadEvent::Pause(p) => looks.push(p.speech_end_ms - p.speech_start_ms),
                    VadEvent::Utterance(u) => utterances.push(u),
                    _ => {}
                }
            }
        }
        utterances.extend(ep.finish());
        assert_eq!(
            utterances.len(),
            1,
            "{:?}",
            utterances
                .iter()
                .map(|u| (u.start_ms, u.duration_ms(), u.reason))
                .collect::<Vec<_>>()
        );
        let u = &utterances[0];
        assert!(u.duration_ms() >= 61_000, "{} ms", u.duration_ms());
        assert_eq!(u.reason, EndReason::Silence);
        // The pauses of the first seconds are looked at; none after
        // `look_max_ms` of speech.
        assert!(looks.len() >= 2, "{looks:?}");
        assert!(
            looks.iter().all(|&l| l <= u64::from(cfg.look_max_ms)),
            "{looks:?}"
        );
    }

    #[test]
    fn the_pause_starts_where_the_sound_stops_not_after_webrtc_vads_overhang() {
        // A microphone's faint noise floor (±4 LSB), not digital silence,
        // which is never speech whatever the settings.
        let mut seed = 7u32;
        let sig: Vec<i16> = two_phrases(2000)
            .into_iter()
            .map(|s| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                s.saturating_add((seed >> 29) as i16 - 4)
            })
            .collect();
        // The first copy's sound ends here (ms into the signal).
        let sound_end = (8000 + sounding_speech().len() - 1) as u64 * 1000 / 16_000;
        let end_of_first = |cfg: &VadConfig| {
            let u = segment(&sig, cfg).unwrap();
            u.first().unwrap().speech_end_ms
        };
        let with = end_of_first(&VadConfig::default());
        let without = end_of_first(&VadConfig {
            quiet_db: 0.0,
            ..VadConfig::default()
        });
        // webrtc-vad alone calls the silence after the word speech for a
        // while; the override ends the speech within a frame or two of it.
        assert!(with <= sound_end + 60, "{with} ms vs sound end {sound_end}");
        assert!(
            without >= with + 60,
            "override {with} ms, webrtc alone {without} ms"
        );
        let bad = VadConfig {
            quiet_db: f32::NAN,
            ..VadConfig::default()
        };
        assert!(Endpointer::new(&bad).unwrap_err().contains("quiet_db"));
    }

    #[test]
    fn a_pause_is_offered_once_and_speech_after_it_drops_the_speculation() {
        let cfg = VadConfig::default();
        // A 400 ms gap (past early_ms, short of the hang-over) joins the
        // last utterance of the first copy to the first of the second.
        let apart = segment(&two_phrases(2000), &cfg).unwrap().len();
        let mut ep = Endpointer::new(&cfg).unwrap();
        let mut utterances = Vec::new();
        let mut attached_at = Vec::new();
        // The look attached earlier in the speech in progress, if any.
        let mut open: Option<u64> = None;
        let mut seen_again = 0;
        for c in two_phrases(400).chunks(1600) {
            for e in ep.push(c) {
                match e {
                    VadEvent::Pause(p) => {
                        // A second pause of one utterance sees its first look.
                        assert_eq!(
                            ep.looked().is_some(),
                            open.is_some_and(|at| at >= p.speech_start_ms),
                            "{}",
                            p.speech_end_ms
                        );
                        seen_again += usize::from(ep.looked().is_some());
                        // The listener looks at every pause.
                        attached_at.push(p.speech_end_ms);
                        ep.attach(p.speech_end_ms, Speculation(std::sync::Arc::new(1u8)));
                        open = Some(p.speech_end_ms);
                    }
                    VadEvent::Utterance(u) => {
                        utterances.push(u);
                        open = None;
                        assert!(ep.looked().is_none(), "an ended utterance's look");
                    }
                    _ => {}
                }
            }
        }
        assert!(seen_again > 0, "no utterance had two pauses");
        assert_eq!(
            utterances.len(),
            apart - 1,
            "the short gap does not end one"
        );
        // Each utterance carries the look at its own last pause only: one
        // whose pause was followed by speech carries nothing from it.
        for u in &utterances {
            let looked = attached_at.contains(&u.speech_end_ms);
            assert_eq!(u.speculation.is_some(), looked, "{}", u.speech_end_ms);
        }
        // Pauses were offered once each: no two at the same place.
        let mut unique = attached_at.clone();
        unique.dedup();
        assert_eq!(unique, attached_at);
        // And the joined one had a pause inside it that it does not carry.
        let joined = utterances
            .iter()
            .find(|u| {
                attached_at
                    .iter()
                    .any(|p| *p > u.speech_start_ms && *p < u.speech_end_ms)
            })
            .expect("a pause inside an utterance");
        assert!(joined.speculation.is_some() == attached_at.contains(&joined.speech_end_ms));
    }

    #[test]
    fn a_speculation_with_nothing_after_it_rides_on_the_utterance_and_end_now_ends_there() {
        let cfg = VadConfig::default();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/speech/goforward.wav");
        let (speech, _) = crate::audio::wav::read_16k_mono(&path, None).unwrap();
        let mut sig = vec![0i16; 8000];
        sig.extend(crate::audio::to_i16(&speech));
        sig.extend(vec![0i16; 16_000]);
        // Carried to the utterance the hang-over ends.
        let mut ep = Endpointer::new(&cfg).unwrap();
        let mut carried = None;
        for c in sig.chunks(1600) {
            for e in ep.push(c) {
                match e {
                    VadEvent::Pause(p) => {
                        ep.attach(p.speech_end_ms, Speculation(std::sync::Arc::new(7u8)))
                    }
                    VadEvent::Utterance(u) => carried = Some(u),
                    _ => {}
                }
            }
        }
        let u = carried.expect("an utterance");
        let value = u.speculation.expect("the speculation rides on it");
        assert_eq!(value.0.downcast_ref::<u8>(), Some(&7));
        // Ended at the pause by the listener: the same speech, sooner.
        let mut ep = Endpointer::new(&cfg).unwrap();
        let mut early = None;
        'feed: for c in sig.chunks(160) {
            for e in ep.push(c) {
                if let VadEvent::Pause(p) = e {
                    assert!(ep.end_now(p.speech_end_ms + 30).is_none(), "not its pause");
                    early = ep.end_now(p.speech_end_ms);
                    break 'feed;
                }
            }
        }
        let early = early.expect("ended at the pause");
        assert_eq!(early.reason, EndReason::Early);
        assert_eq!(early.speech_end_ms, u.speech_end_ms);
        assert!(early.samples.len() <= u.samples.len());
        assert!(!ep.is_speaking());
    }

    #[test]
    fn a_held_pause_outlasts_the_hang_over_and_speech_after_it_ends_the_hold() {
        // Two phrases 1000 ms apart: the hang-over (700) cuts them in two;
        // a look that holds the pause to 1200 keeps them one utterance.
        let cfg = VadConfig::default();
        let utterances = |hold: Option<u32>| {
            let mut ep = Endpointer::new(&cfg).unwrap();
            let mut out = Vec::new();
            let mut sig = two_phrases(1000);
            sig.extend(vec![0i16; 16_000]);
            for c in sig.chunks(160) {
                for e in ep.push(c) {
                    match e {
                        VadEvent::Pause(p) => {
                            if let Some(ms) = hold {
                                ep.hold(p.speech_end_ms + 30, ms); // not its pause: nothing
                                ep.hold(p.speech_end_ms, ms);
                            }
                        }
                        VadEvent::Utterance(u) => out.push(u),
                        _ => {}
                    }
                }
            }
            out.extend(ep.finish());
            out
        };
        assert_eq!(utterances(None).len(), 2);
        let held = utterances(Some(1200));
        assert_eq!(held.len(), 1, "{held:?}");
        // The second phrase's end, held again by its own look, still
        // ends once its hold has passed.
        assert_eq!(held[0].reason, EndReason::Silence);
        assert!(held[0].duration_ms() > 2000, "both phrases: {held:?}");
        // A hold shorter than the hang-over holds nothing.
        assert_eq!(utterances(Some(300)).len(), 2);
    }

    #[test]
    fn hears_speech_again_after_a_reset() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/speech/goforward.wav");
        let (speech, _) = crate::audio::wav::read_16k_mono(&path, None).unwrap();
        let mut sig = vec![0i16; 8000];
        sig.extend(crate::audio::to_i16(&speech));
        sig.extend(vec![0i16; 16_000]);
        let mut ep = Endpointer::new(&VadConfig::default()).unwrap();
        let count = |ep: &mut Endpointer| {
            let mut n = 0;
            for e in ep.push(&sig) {
                if let VadEvent::Utterance(_) = e {
                    n += 1;
                }
            }
            n + usize::from(ep.finish().is_some())
        };
        let first = count(&mut ep);
        assert!(first > 0, "no utterance in real speech");
        ep.reset();
        assert_eq!(count(&mut ep), first, "deaf after reset");
    }
}
