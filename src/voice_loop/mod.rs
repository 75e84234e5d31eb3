//! `earshot run`: the voice loop — listen, transcribe, take the turn,
//! speak — until SIGTERM/SIGINT.
//!
//! One thread owns the microphone, the endpointer and the button channel;
//! each turn runs on a worker thread while this one keeps watching the
//! button, the microphone and the shutdown flag, so a press (or speech,
//! with `audio.barge_in`) stops the answer at once and starts listening.
//! While it speaks without barge-in, the microphone is read and thrown
//! away, so the device never answers itself. Nothing here waits on
//! background work: memory and summaries are jobs the turn enqueued.
//!
//! What opens the microphone is `[wake] mode` ([`WakeGate`]). In `wake`
//! mode (the default) the microphone goes to the wake-word detector
//! (openWakeWord in-process, or a Wyoming service) until it fires; then
//! the endpointer takes the request that follows, starting with the
//! audio from just before the detection (a request in the same breath),
//! for up to [`WAKE_WINDOW`] to start speaking, and the wake word is taken
//! out of the transcript (only the wake word: the window stays open for
//! the request after a pause). A press opens the same window; in `button`
//! mode only a press does (also when the wake model can't be loaded: the
//! lights show the error). In `always` mode every sentence is a request
//! (VAD endpointing) and a press starts a push-to-talk utterance that ends
//! at the release (`audio.push_to_talk = true` means hold-to-talk in every
//! mode). While a Wyoming wake service is down the loop listens without a
//! wake word (see [`crate::wake::wyoming`] for why).
//!
//! The tree's device actions act here: `stop` silences the speaker,
//! `dnd_on`/`dnd_off` (pause) mute answers other than the resume itself,
//! `volume_up`/`volume_down` set the speaker's volume from the `volume`
//! device state, and `repeat` is answered by the tree from `last_answer`.
//!
//! Timers ring here ([`ring::Ringer`]): a round (chime + label) plays when
//! the speaker is free and no request is being heard — between answers,
//! or between an answer's sentences while the LLM is still thinking, never
//! during STT. While something rings the button stops it (instead of
//! starting push-to-talk), the wake word is not needed, and a turn whose
//! answer is the tree's `stop` (or that is just "stop") stops it after
//! being run and logged like any turn. Without barge-in the microphone is
//! ignored while a round sounds (the device must not hear its own chime)
//! and listens in the pauses between rounds; with barge-in, speech cuts
//! the round and is heard.

pub mod interrupt;
pub mod remote;
pub mod ring;
pub mod speculate;
pub mod speech_check;
pub mod wake;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use crossbeam_channel::Receiver;
use serde_json::{json, Value};

use crate::agent::turn::{run_turn, TurnInput, TurnOutcome};
use crate::agent::Services;
use crate::audio::vad::{EndReason, Endpointer, Utterance, VadEvent};
use crate::audio::{AudioError, AudioSource, SAMPLE_RATE};
use crate::cancel::CancelToken;
use crate::device::button::ButtonEvent;
use crate::device::leds::LedState;
use crate::events::{Event, EventSink};
use crate::stt::Stt;
use crate::tts::speaker::{Speaker, TurnSpeech};
use wake::WakeGate;

/// How long one read of the microphone may block (the loop's tick).
const TICK: Duration = Duration::from_millis(20);

/// After the wake word, how long the user has to start the request before
/// the loop waits for the wake word again.
pub const WAKE_WINDOW: Duration = Duration::from_secs(8);

/// Opens the input again after a device failure.
pub type Reopen = Box<dyn FnMut() -> Result<Box<dyn AudioSource>, AudioError>>;

/// What the loop needs, built by `earshot run` (or a test).
pub struct VoiceLoop {
    pub services: Services,
    pub stt: Stt,
    pub speaker: Arc<Speaker>,
    pub source: Box<dyn AudioSource>,
    /// Reopens the input after the device failed (`None`: files can't).
    pub reopen: Option<Reopen>,
    pub endpointer: Endpointer,
    pub button: Option<Receiver<ButtonEvent>>,
    /// Set by SIGTERM/SIGINT.
    pub shutdown: CancelToken,
    pub push_to_talk: bool,
    pub barge_in: bool,
    /// Print one JSON line per turn on stdout.
    pub json: bool,
    /// What gates the microphone (`[wake] mode`): the wake word, or the
    /// button only (`None`: `always`, every sentence is a request).
    pub wake: Option<WakeGate>,
    /// `audio.vad`: the endpointer is rebuilt from it after a device
    /// failure, and it bounds an utterance.
    pub vad: crate::audio::vad::VadConfig,
    /// `tts.volume`: the speaker's base volume the `volume` device state scales.
    pub volume: f32,
    /// Timers, alarms and reminders ringing on this speaker (`None`: the
    /// timers are not available).
    pub ring: Option<ring::Ringer>,
    /// The device's lights (`[device] leds`; `None`: none).
    pub lights: Option<std::sync::Arc<crate::device::leds::Lights>>,
    /// The stop word and the wake word while it talks or rings
    /// (`[wake] stop_word`; `None`: off, or voice barge-in is on and any
    /// speech interrupts).
    pub interrupter: Option<interrupt::Interrupter>,
    /// Silero VAD's word on whether an utterance holds speech, asked
    /// before it is transcribed (`[audio.vad] speech_check`; `None`: off).
    pub speech_check: Option<speech_check::SpeechCheck>,
}

/// How the loop ended and what it did.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub turns: usize,
    pub barge_ins: usize,
    /// `signal` or `end of input`.
    pub reason: String,
}

enum Heard {
    Speech(Utterance, Option<Instant>),
    Shutdown,
    Ended,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Barge {
    Button,
    Voice,
    /// A stop word while it talked (`interrupt`).
    Stop,
    /// The wake word while it talked: a new request follows.
    WakeWord,
}

impl Barge {
    /// The turn line's `barge_in`.
    fn label(self) -> &'static str {
        match self {
            Barge::Button => "button",
            Barge::Voice => "voice",
            Barge::Stop => "stop_word",
            Barge::WakeWord => "wake_word",
        }
    }
}

impl VoiceLoop {
    /// Whether `samples` hold speech by the speech check (always, when
    /// it is off).
    fn holds_speech(&mut self, utterance: &Utterance) -> bool {
        self.speech_check
            .as_mut()
            .is_none_or(|check| check.holds_speech(utterance.start_ms, &utterance.samples))
    }

    /// Run the speech check on the speech in progress while it is said
    /// ([`speech_check::SpeechCheck::check_ahead`]); `started`: new speech
    /// began in this read.
    fn check_speech_ahead(&mut self, started: bool) {
        let Some(check) = self.speech_check.as_mut() else {
            return;
        };
        if started {
            check.forget();
        }
        if let Some((start_ms, samples)) = self.endpointer.speech_so_far() {
            check.check_ahead(start_ms, samples);
        }
    }

    /// Run until a signal (or the end of a file input). `tick` is called
    /// every iteration — at least every [`TICK`] while idle or speaking —
    /// and is where the systemd watchdog is fed.
    pub fn run(&mut self, tick: &mut dyn FnMut()) -> Result<Summary> {
        self.run_with_remote(tick, None)
    }

    /// [`VoiceLoop::run`], with requests going to `remote` while it is
    /// ready (`[esphome] serve`: Home Assistant's pipeline), and what it
    /// queues played between turns.
    pub fn run_with_remote(
        &mut self,
        tick: &mut dyn FnMut(),
        remote: Option<&dyn remote::RemotePipeline>,
    ) -> Result<Summary> {
        let mut summary = Summary::default();
        let mut pending: VecDeque<VadEvent> = VecDeque::new();
        // After a barge-in by button the press is still held: capture
        // push-to-talk right away.
        let mut held = false;
        let mut conversation: Option<i64> = None;
        self.apply_volume();
        // The control socket (`earshot mute`) is up before "listening" is
        // said: whoever waits for that line may mute at once.
        let mut mute = Mute::start(&self.services);
        tracing::info!(
            input = %self.source.describe(),
            output = %self.speaker.sink().describe(),
            push_to_talk = self.push_to_talk,
            barge_in = self.barge_in,
            wake = %self.wake.as_ref().map_or("always (every sentence is a request)".to_string(), |g| g.describe()),
            "listening"
        );
        crate::memtrim::give_back();
        if let Some(reason) = self
            .wake
            .as_ref()
            .and_then(|g| g.failed())
            .map(str::to_string)
        {
            // One log line and one spoken sentence; then the button only
            // (never every sentence), with the lights in the error state.
            tracing::error!(
                "the wake word is unavailable, so only the button starts a request: {reason}"
            );
            self.light(LedState::Error);
            self.speaker.say(
                "My wake word can't be loaded, so only the button starts a request; earshot doctor says why.",
            );
            self.wait_speech(tick);
            self.after_speaking();
        }
        loop {
            let heard = self.listen(
                tick,
                &mut pending,
                &mut held,
                &mut mute,
                remote,
                conversation,
            );
            let (utterance, pressed_at) = match heard {
                Heard::Speech(u, pressed_at) => (u, pressed_at),
                Heard::Shutdown => {
                    summary.reason = "signal".into();
                    break;
                }
                Heard::Ended => {
                    summary.reason = "end of input".into();
                    break;
                }
            };
            // Home Assistant's pipeline while it is connected (not for
            // "stop" over a ringing timer, which is local).
            if let Some(remote) = remote.filter(|r| r.ready() && !self.ringing()) {
                if let Some(pressed) = self.remote_turn(remote, tick, &utterance) {
                    summary.turns += 1;
                    if pressed {
                        summary.barge_ins += 1;
                        held = true;
                    }
                    if self.shutdown.is_cancelled() {
                        summary.reason = "signal".into();
                        break;
                    }
                    continue;
                }
            }
            let barge = self.one_turn(tick, utterance, pressed_at, &mut conversation, &mut pending);
            summary.turns += 1;
            crate::memtrim::give_back();
            match barge {
                Some(Barge::Button) => {
                    summary.barge_ins += 1;
                    held = true;
                }
                Some(Barge::Voice | Barge::Stop | Barge::WakeWord) => summary.barge_ins += 1,
                None => {}
            }
            if self.shutdown.is_cancelled() {
                summary.reason = "signal".into();
                break;
            }
        }
        self.speaker.stop();
        self.light(LedState::Idle);
        tracing::info!(turns = summary.turns, reason = %summary.reason, "voice loop stopped");
        Ok(summary)
    }

    /// Wait for the next utterance: VAD endpointing, or push-to-talk
    /// between a press and its release.
    fn listen(
        &mut self,
        tick: &mut dyn FnMut(),
        pending: &mut VecDeque<VadEvent>,
        held: &mut bool,
        mute: &mut Mute,
        remote: Option<&dyn remote::RemotePipeline>,
        conversation: Option<i64>,
    ) -> Heard {
        let mut buf = vec![0i16; (SAMPLE_RATE / 10) as usize];
        // A ring round was queued: the microphone hears it until it ends.
        let mut echo = false;
        if let Some(wake) = self.wake.as_mut() {
            wake.rearm();
        }
        loop {
            tick();
            if self.shutdown.is_cancelled() {
                return Heard::Shutdown;
            }
            if mute.requested() != mute.applied {
                self.apply_mute(mute, tick);
            }
            if mute.applied {
                // Nothing is captured; timers still ring (a press stops them).
                if self.pressed() && self.ringing() {
                    self.stop_ringing();
                }
                // Home Assistant's announcements still play.
                if let Some(remote) = remote {
                    if !self.ringing()
                        && !self.speaker.is_speaking()
                        && self.play_remote_pending(remote, tick)
                    {
                        continue;
                    }
                }
                self.ring_tick(true);
                self.light(if self.ringing() {
                    LedState::Ringing
                } else {
                    LedState::Muted
                });
                std::thread::sleep(TICK);
                continue;
            }
            let press = *held || self.pressed();
            if press && self.ringing() {
                // The press stops the ringing; it does not open the mic.
                *held = false;
                self.stop_ringing();
                self.after_speaking();
                continue;
            }
            if press && !self.push_to_talk && self.wake.is_some() {
                // Wake and button mode: a press opens the microphone like
                // the wake word does (the request is endpointed by VAD).
                *held = false;
                tracing::info!("button pressed: listening");
                self.open_window(pending, false);
                continue;
            }
            if press {
                *held = false;
                let pressed_at = Instant::now();
                match self.push_to_talk_capture(tick) {
                    Some(u) => return Heard::Speech(u, Some(pressed_at)),
                    None if self.shutdown.is_cancelled() => return Heard::Shutdown,
                    None => continue,
                }
            }
            while let Some(event) = pending.pop_front() {
                match event {
                    // Noise webrtc-vad let through falls to `_`: dropped.
                    VadEvent::Utterance(u) if !self.push_to_talk && self.holds_speech(&u) => {
                        return Heard::Speech(u, None)
                    }
                    VadEvent::SpeechStart { at_ms } => {
                        tracing::debug!(at_ms, "speech started");
                        self.light(LedState::Listening);
                    }
                    VadEvent::Discarded { speech_ms, .. } => {
                        tracing::debug!(speech_ms, "too short to be a request; ignored")
                    }
                    // A pause inside speech, and nothing after it yet: a
                    // speculative look (speculate.rs).
                    VadEvent::Pause(snapshot) if !self.push_to_talk && pending.is_empty() => {
                        if let Some(u) = self.on_pause(snapshot, pending, conversation) {
                            return Heard::Speech(u, None);
                        }
                    }
                    _ => {}
                }
            }
            let awake = self.awake();
            let quiet = !self.endpointer.is_speaking() && !awake && pending.is_empty();
            if let Some(remote) = remote {
                // An announcement or a timer from Home Assistant: played
                // when nothing is being heard, the microphone dropped
                // meanwhile (never a request).
                if quiet
                    && !echo
                    && !self.ringing()
                    && !self.speaker.is_speaking()
                    && self.play_remote_pending(remote, tick)
                {
                    continue;
                }
            }
            if self.ring_tick(quiet) {
                let words = self
                    .ring
                    .as_ref()
                    .map(|r| r.sounding_words().to_string())
                    .unwrap_or_default();
                if let Some(listener) = self.interrupter.as_mut() {
                    if !echo {
                        listener.reset();
                    }
                    // "Your Alexa timer is done." is the device's own word.
                    listener.set_playing_text(&words);
                }
                echo = true;
            }
            self.light(if self.ringing() {
                LedState::Ringing
            } else if self.endpointer.is_speaking() || awake {
                LedState::Listening
            } else if self.speaker.is_speaking() {
                LedState::Speaking
            } else if self.wake.as_ref().is_some_and(|g| g.failed().is_some()) {
                // The wake word is unavailable: button only, shown.
                LedState::Error
            } else {
                LedState::Idle
            });
            match self.source.read(&mut buf, TICK) {
                Ok(n) => {
                    if self.push_to_talk {
                        continue; // only the button opens the microphone
                    }
                    if echo {
                        // A ring round is (or was) sounding.
                        if self.speaker.is_speaking() {
                            if !self.barge_in {
                                // Not our own chime as a request; only the
                                // stop word or the wake word cut it.
                                if self.interrupt_ringing(&buf[..n], pending) {
                                    echo = false;
                                    if let Some(listener) = self.interrupter.as_mut() {
                                        listener.set_playing_text("");
                                    }
                                }
                                continue;
                            }
                        } else {
                            echo = false;
                            if let Some(listener) = self.interrupter.as_mut() {
                                listener.set_playing_text("");
                            }
                            if !self.barge_in {
                                self.after_speaking();
                                continue;
                            }
                        }
                    }
                    if self.waiting_for_wake_word(pending) {
                        if let Some(wake) = self.wake.as_mut() {
                            wake.feed(&buf[..n]);
                        }
                        // A detection in this read opens the window at once,
                        // with the audio up to here.
                        self.poll_wake_word(pending);
                        continue;
                    }
                    let events = self.endpointer.push(&buf[..n]);
                    let started = events
                        .iter()
                        .any(|e| matches!(e, VadEvent::SpeechStart { .. }));
                    self.check_speech_ahead(started);
                    if echo
                        && self.speaker.is_speaking()
                        && events
                            .iter()
                            .any(|e| matches!(e, VadEvent::SpeechStart { .. }))
                    {
                        tracing::info!("speech while ringing: the round is cut to listen");
                        self.speaker.stop();
                    }
                    pending.extend(events);
                }
                Err(AudioError::Ended) => {
                    if let Some(u) = self.endpointer.finish() {
                        return Heard::Speech(u, None);
                    }
                    return Heard::Ended;
                }
                Err(e) => {
                    if !self.recover(&e, tick) {
                        return Heard::Ended;
                    }
                }
            }
        }
    }

    /// True while the microphone belongs to the wake word (or, button
    /// only, to nobody): a gate is there, its detector hears (a Wyoming
    /// service that is down must not make the device deaf), no detection or
    /// press has opened a window, and no utterance is under way. A window
    /// that ends without speech closes the gate again.
    fn waiting_for_wake_word(&mut self, pending: &mut VecDeque<VadEvent>) -> bool {
        if self.wake.is_none() || self.endpointer.is_speaking() {
            return false;
        }
        if self.ringing() {
            // "stop" needs no wake word while something rings.
            return false;
        }
        if let Some(until) = self.wake.as_ref().and_then(|g| g.awake_until) {
            if Instant::now() < until {
                return false;
            }
            tracing::info!("no request after the wake word; waiting for it again");
            self.reset_endpointer();
            if let Some(wake) = self.wake.as_mut() {
                wake.awake_until = None;
                wake.rearm();
            }
        }
        if self.poll_wake_word(pending) {
            return false;
        }
        self.wake
            .as_ref()
            .is_some_and(|g| g.needs_detector_or_button())
    }

    /// A detection waiting: open the window with the audio from just before
    /// it. True when one was.
    fn poll_wake_word(&mut self, pending: &mut VecDeque<VadEvent>) -> bool {
        let Some(wake) = self.wake.as_mut() else {
            return false;
        };
        let Some(detection) = wake.poll() else {
            return false;
        };
        tracing::info!(
            word = %detection.name,
            heard_at_ms = detection.timestamp_ms,
            now_ms = wake.position_ms(),
            "wake word heard: listening"
        );
        // The detection may lag the audio read so far: the word ended
        // that much before the end of the pre-roll.
        let lag = detection
            .timestamp_ms
            .map_or(0, |at| wake.position_ms().saturating_sub(at));
        self.open_window(pending, true);
        if let Some(wake) = self.wake.as_mut() {
            wake.word_end_ms = wake.word_end_ms.map(|end| end.saturating_sub(lag));
        }
        true
    }

    /// The wake word or a press: the endpointer takes what follows (for up
    /// to [`WAKE_WINDOW`] to start speaking); after a detection it first
    /// gets the audio from just before it (a request in the same breath).
    fn open_window(&mut self, pending: &mut VecDeque<VadEvent>, with_preroll: bool) {
        self.reset_endpointer();
        self.light(LedState::Listening);
        let Some(wake) = self.wake.as_mut() else {
            return;
        };
        if wake.earcon {
            self.speaker.play("earcon", wake::earcon());
        }
        wake.awake_until = Some(Instant::now() + WAKE_WINDOW);
        let preroll = wake.take_preroll();
        if with_preroll && !preroll.is_empty() {
            pending.extend(self.endpointer.push(&preroll));
        } else {
            wake.word_end_ms = None;
        }
    }

    /// Mute (`earshot mute`): the capture stream is closed (a live device)
    /// or no longer read (a file), red lights, said out loud; unmute opens
    /// it again.
    fn apply_mute(&mut self, mute: &mut Mute, tick: &mut dyn FnMut()) {
        mute.applied = mute.requested();
        if mute.applied {
            tracing::info!("muted: the microphone is off");
            if self.reopen.is_some() {
                // Dropping the source stops its capture stream.
                self.source = Box::new(MutedSource);
            }
            self.light(LedState::Muted);
            self.speaker.say("Muted.");
        } else {
            tracing::info!("unmuted: the microphone is on");
            if let Some(reopen) = self.reopen.as_mut() {
                match reopen() {
                    Ok(source) => self.source = source,
                    Err(e) => {
                        if !self.recover(&e, tick) {
                            return;
                        }
                    }
                }
            }
            self.light(LedState::Idle);
            self.speaker.say("I'm listening again.");
            self.wait_speech(tick);
            self.after_speaking();
        }
    }

    /// Whether a detection or a press has opened the microphone.
    fn awake(&self) -> bool {
        self.wake
            .as_ref()
            .and_then(|g| g.awake_until)
            .is_some_and(|until| Instant::now() < until)
    }

    /// A press: whatever the microphone hears until the release (or the
    /// longest utterance allowed) is the request.
    fn push_to_talk_capture(&mut self, tick: &mut dyn FnMut()) -> Option<Utterance> {
        self.source.flush();
        self.reset_endpointer();
        let max_ms = u64::from(self.vad.max_utterance_ms.max(1000));
        let max = (max_ms * u64::from(SAMPLE_RATE) / 1000) as usize;
        let mut samples: Vec<i16> = Vec::new();
        let mut buf = vec![0i16; (SAMPLE_RATE / 50) as usize];
        tracing::info!("button pressed: listening until release");
        self.light(LedState::Listening);
        let reason = loop {
            tick();
            if self.shutdown.is_cancelled() {
                return None;
            }
            if self.released() {
                break EndReason::EndOfInput;
            }
            if samples.len() >= max {
                break EndReason::MaxLength;
            }
            match self.source.read(&mut buf, TICK) {
                Ok(n) => samples.extend_from_slice(&buf[..n]),
                Err(AudioError::Ended) => break EndReason::EndOfInput,
                Err(e) => {
                    if !self.recover(&e, tick) {
                        break EndReason::EndOfInput;
                    }
                }
            }
        };
        samples.truncate(max);
        if samples.is_empty() {
            return None;
        }
        let ms = samples.len() as u64 * 1000 / u64::from(SAMPLE_RATE);
        Some(Utterance {
            samples,
            start_ms: 0,
            speech_start_ms: 0,
            speech_end_ms: ms,
            reason,
            decided_at: Instant::now(),
            speculation: None,
        })
    }

    /// One request: STT, the turn on a worker thread, speech; returns how
    /// the user interrupted it, if they did.
    fn one_turn(
        &mut self,
        tick: &mut dyn FnMut(),
        utterance: Utterance,
        pressed_at: Option<Instant>,
        conversation: &mut Option<i64>,
        pending: &mut VecDeque<VadEvent>,
    ) -> Option<Barge> {
        let vad_end = utterance.decided_at;
        let mut timings: BTreeMap<String, f64> = BTreeMap::new();
        timings.insert("capture".into(), utterance.duration_ms() as f64);
        timings.insert(
            "vad_hangover".into(),
            utterance.end_ms().saturating_sub(utterance.speech_end_ms) as f64,
        );
        if let Some(pressed) = pressed_at {
            timings.insert("push_to_talk_hold".into(), ms_between(pressed, vad_end));
        }
        self.light(LedState::Thinking);
        // Transcribed at a pause already when nothing was said after it.
        let speculative = speculate::carried(&utterance);
        let reused = speculative.is_some();
        if !reused {
            // A request begun at a pause was for words the speech went on
            // from; nothing of it computes beside this transcription.
            self.services.speculation.abandon();
        }
        let transcript = match speculative {
            Some(t) => Ok(t),
            None => self.stt.transcribe(&utterance.to_f32()),
        };
        timings.insert("stt".into(), ms_since(vad_end));
        let mut stt_facts = serde_json::Map::new();
        let endpoint = serde_json::json!({"reason": utterance.reason, "transcript_reused": reused});
        stt_facts.insert("endpoint".into(), endpoint.clone());
        if let Ok(t) = &transcript {
            stt_facts.insert(
                "stt".into(),
                serde_json::json!({
                    "engine": t.engine, "path": t.path, "reason": t.reason,
                    "stt_ms": t.timings.stt_ms,
                }),
            );
        }
        let text = match transcript {
            Ok(t) if t.no_speech || t.text.trim().is_empty() => {
                tracing::info!(reason = %t.reason, "heard no words; listening again");
                self.after_speaking();
                return None;
            }
            Ok(t) => {
                tracing::info!(engine = %t.engine, path = %t.path, stt_ms = t.timings.stt_ms, "heard: {}", t.text);
                t.text
            }
            Err(e) => {
                tracing::warn!("speech-to-text failed: {e}");
                self.speaker.say(e.user_sentence());
                self.wait_speech(tick);
                self.after_speaking();
                return None;
            }
        };
        let text = match self.wake.as_ref() {
            Some(gate) if !gate.words().is_empty() => {
                let stripped = crate::wake::strip::strip(&text, gate.words());
                if stripped != text.trim() {
                    tracing::info!("the request without the wake word: {stripped}");
                }
                stripped
            }
            _ => text,
        };
        if text.is_empty() {
            // Only the wake word, then a pause: the request comes next.
            tracing::info!("heard only the wake word: listening for the request");
            self.reset_endpointer();
            if let Some(gate) = self.wake.as_mut() {
                gate.awake_until = Some(Instant::now() + WAKE_WINDOW);
            }
            self.light(LedState::Listening);
            return None;
        }
        if let Some(gate) = self.wake.as_mut() {
            // The next request needs the wake word (or a press) again.
            gate.awake_until = None;
        }
        if self.ringing() && ring::is_stop_word(&text) {
            // "stop" while something rings only stops the ringing: no turn,
            // no answer, no model (it works with no LLM and no tree).
            tracing::info!("heard {text:?} while ringing: stopping it");
            self.stop_ringing();
            self.after_speaking();
            return None;
        }
        let paused = self.device_state("dnd").as_deref() == Some("on");
        let mut input = TurnInput::text(text.clone());
        input.source = "voice".into();
        input.conversation_id = *conversation;
        input.timings = timings;
        input.extra = stt_facts;

        let turn_cancel = CancelToken::new();
        let turn_started = Instant::now();
        let mut barge: Option<Barge> = None;
        let mut first_audio_logged = false;
        // Seconds played before this turn (the sink counts from its start).
        let played_before = self.speaker.sink().played_seconds();
        let services = &self.services;
        let speaker = self.speaker.clone();
        let button = &self.button;
        let source = &mut self.source;
        let endpointer = &mut self.endpointer;
        let shutdown = &self.shutdown;
        let voice_barge = self.barge_in && !self.push_to_talk;
        let stt = &self.stt;
        let interrupter = &mut self.interrupter;
        if let Some(listener) = interrupter.as_mut() {
            listener.reset();
        }
        // The answer's words as they stream, so the wake-word gate can tell
        // the device saying a wake word's name from the user saying it.
        let playing = interrupter.as_ref().map(|l| l.playing_text());
        if let Some(p) = &playing {
            p.set("");
        }
        let gate = &mut self.wake;
        let vad = &self.vad;
        let ring = &mut self.ring;
        let lights = self.lights.clone();
        // A request begun at a pause for other words (the speech went on)
        // is not this turn's.
        services.speculation.keep_only(&input.text);
        let (outcome, first_sentence_at, actions) = std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                let mut speech = DeviceSpeech {
                    inner: TurnSpeech::new(&speaker),
                    paused,
                    actions: Vec::new(),
                    speaker: &speaker,
                    playing: playing.clone(),
                };
                let outcome = run_turn(services, input, &mut speech, &turn_cancel);
                (outcome, speech.inner.first_sentence_at, speech.actions)
            });
            let mut buf = vec![0i16; (SAMPLE_RATE / 50) as usize];
            loop {
                tick();
                if shutdown.is_cancelled() && !turn_cancel.is_cancelled() {
                    tracing::info!("stopping: cancelling the current turn");
                    turn_cancel.cancel();
                    speaker.stop();
                }
                if let Some(ring) = ring.as_mut() {
                    // A round may go between the answer's sentences (the
                    // speaker is free: the LLM is still thinking); the
                    // rest of the answer queues after it.
                    ring.poll(speaker.as_ref());
                    if ring.play_due(speaker.as_ref(), barge.is_none(), Instant::now()) {
                        if let Some(p) = &playing {
                            p.set(ring.sounding_words());
                        }
                    }
                }
                let ringing = ring.as_ref().is_some_and(|r| r.is_ringing());
                if barge.is_none() && pressed(button) {
                    if ringing {
                        // The press stops the ringing, not the answer:
                        // the round ends, the answer goes on.
                        if let Some(ring) = ring.as_mut() {
                            ring.stop_quietly();
                        }
                    } else {
                        tracing::info!("barge-in: button pressed while answering");
                        turn_cancel.cancel();
                        speaker.stop();
                        barge = Some(Barge::Button);
                    }
                }
                if !first_audio_logged
                    && (speaker.sink().played_seconds() > played_before
                        || speaker.sink().is_playing())
                {
                    first_audio_logged = true;
                    tracing::info!(after_vad_ms = ms_since(vad_end) as u64, "speaking");
                    if let Some(lights) = &lights {
                        lights.set(LedState::Speaking);
                    }
                }
                // The microphone: barge-in by voice, or read and discard.
                // A recording is not read while answering: what follows in
                // it is the next request, not sound made meanwhile.
                if !source.is_live() {
                    std::thread::sleep(Duration::from_millis(10));
                    if worker.is_finished() && (barge.is_some() || !speaker.is_speaking()) {
                        break;
                    }
                    continue;
                }
                match source.read(&mut buf, Duration::from_millis(10)) {
                    Ok(n) if voice_barge && barge.is_none() => {
                        for event in endpointer.push(&buf[..n]) {
                            if matches!(event, VadEvent::SpeechStart { .. }) {
                                tracing::info!("barge-in: speech while answering");
                                turn_cancel.cancel();
                                speaker.stop();
                                barge = Some(Barge::Voice);
                            }
                            if barge.is_some() {
                                pending.push_back(event);
                            }
                        }
                    }
                    Ok(n) if matches!(barge, Some(Barge::Voice | Barge::WakeWord)) => {
                        pending.extend(endpointer.push(&buf[..n]));
                    }
                    Ok(n) if barge.is_none() && interrupter.is_some() => {
                        let Some(listener) = interrupter.as_mut() else {
                            continue;
                        };
                        let wake = gate.as_mut().filter(|g| g.has_detector());
                        match listener.hear(&buf[..n], stt, wake) {
                            Some(interrupt::Interruption::Stop(text)) if ringing => {
                                // Between the answer's sentences a round
                                // sounds: the word stops the ringing.
                                tracing::info!("stop word {text:?} over the ringing: stopping it");
                                if let Some(ring) = ring.as_mut() {
                                    ring.stop_quietly();
                                }
                            }
                            Some(interrupt::Interruption::Stop(text)) => {
                                tracing::info!("barge-in: stop word {text:?} while answering");
                                turn_cancel.cancel();
                                speaker.stop();
                                barge = Some(Barge::Stop);
                            }
                            Some(interrupt::Interruption::WakeWord(word)) => {
                                tracing::info!(%word, "barge-in: wake word while answering; listening");
                                turn_cancel.cancel();
                                speaker.stop();
                                if let Some(ring) = ring.as_mut() {
                                    ring.stop_quietly();
                                }
                                barge = Some(Barge::WakeWord);
                                if gate.as_ref().is_some_and(|g| g.earcon) {
                                    speaker.play("earcon", wake::earcon());
                                }
                                // The request may follow in the same
                                // breath: the endpointer takes it from just
                                // before the detection.
                                match Endpointer::new(vad) {
                                    Ok(fresh) => *endpointer = fresh,
                                    Err(_) => endpointer.reset(),
                                }
                                if let Some(g) = gate.as_mut() {
                                    let preroll = g.take_preroll();
                                    pending.extend(endpointer.push(&preroll));
                                    g.awake_until = Some(Instant::now() + WAKE_WINDOW);
                                }
                            }
                            None => {}
                        }
                    }
                    Ok(_) | Err(AudioError::Ended) => {}
                    Err(e) => {
                        tracing::warn!("microphone error while answering: {e}");
                    }
                }
                if worker.is_finished() && (barge.is_some() || !speaker.is_speaking()) {
                    break;
                }
            }
            match worker.join() {
                Ok(result) => result,
                Err(_) => (
                    failed_outcome("The turn crashed; please try again."),
                    None,
                    Vec::new(),
                ),
            }
        });
        if let Some(listener) = self.interrupter.as_mut() {
            listener.set_playing_text("");
        }
        let done_ms = ms_since(vad_end);
        if outcome.ok {
            *conversation = outcome.conversation_id;
        }
        if barge.is_none() && outcome.ok {
            if let Some(gate) = self.wake.as_mut() {
                if gate.follow_up_after(&outcome.response) {
                    tracing::info!("follow-up: listening without the wake word");
                    self.light(LedState::Listening);
                }
            }
        }
        if self.ringing() && (actions.iter().any(|a| a == "stop") || ring::is_stop_word(&text)) {
            self.stop_ringing();
        }
        self.apply_actions(&actions);
        self.record_speech(
            &text,
            &outcome,
            vad_end,
            turn_started,
            first_sentence_at,
            done_ms,
            barge,
            endpoint,
        );
        match barge {
            // What was said after the interruption is already in the
            // endpointer (the next request).
            Some(Barge::Voice | Barge::WakeWord) => {
                if barge == Some(Barge::WakeWord) {
                    self.light(LedState::Listening);
                }
            }
            _ => self.after_speaking(),
        }
        barge
    }

    /// Merge the speech timings into the turn's log row and print them.
    #[allow(clippy::too_many_arguments)]
    fn record_speech(
        &mut self,
        heard: &str,
        outcome: &TurnOutcome,
        vad_end: Instant,
        turn_started: Instant,
        first_sentence_at: Option<Instant>,
        done_ms: f64,
        barge: Option<Barge>,
        endpoint: Value,
    ) {
        let stats = self.speaker.take_stats();
        for e in self.speaker.take_errors() {
            tracing::error!("could not speak the answer: {e}");
        }
        let mut extra = serde_json::Map::new();
        let turn_offset = ms_between(vad_end, turn_started);
        if let Some(first) = stats.first() {
            extra.insert(
                "first_audio".into(),
                json!(ms_between(vad_end, first.queued_at)),
            );
            extra.insert(
                "first_sentence_to_audio".into(),
                json!(first_sentence_at
                    .map(|s| ms_between(s, first.queued_at))
                    .unwrap_or(first.ready_to_audio_ms)),
            );
            extra.insert("tts_engine".into(), json!(first.engine));
            let synth: f64 = stats.iter().map(|s| s.synth_ms).sum();
            let audio: f64 = stats.iter().map(|s| s.audio_ms).sum();
            extra.insert("tts_synth".into(), json!(synth));
            extra.insert("tts_audio".into(), json!(audio));
        }
        extra.insert("spoken_done".into(), json!(done_ms));
        extra.insert("turn_start".into(), json!(turn_offset));
        // The row's own stages (recall, route, first_token, total) are
        // relative to the turn's start; add the offset for the log line.
        let mut row_timings: BTreeMap<String, f64> = BTreeMap::new();
        if let Some(turn_id) = outcome.turn_id {
            match self.patch_turn_log(turn_id, &Value::Object(extra.clone())) {
                Ok(all) => row_timings = all,
                Err(e) => tracing::warn!("could not add speech timings to turn {turn_id}: {e}"),
            }
        }
        let stage = |key: &str| row_timings.get(key).copied();
        let line = json!({
            "text": heard,
            "answer": outcome.response,
            "ok": outcome.ok,
            "turn_id": outcome.turn_id,
            "route": outcome.route,
            "intent": outcome.intent,
            "actions": outcome.actions,
            "barge_in": barge.map(Barge::label),
            // How the request's end was found (speculate.rs).
            "endpoint": endpoint,
            // Stamps in ms after the end of speech was decided (VAD end).
            "after_vad_end_ms": {
                "stt_done": stage("stt"),
                "decision": stage("route").or(stage("tree")).map(|v| v + turn_offset),
                "first_token": stage("first_token").map(|v| v + turn_offset),
                "first_audio": extra.get("first_audio"),
                "done": done_ms,
            },
            "timings": row_timings,
            "speech": extra,
        });
        tracing::info!(answer = %outcome.response, "turn timings: {line}");
        if self.json {
            println!("{line}");
        }
    }

    /// `json_patch` the speech stages into the turn-log row; returns the
    /// row's merged timings.
    fn patch_turn_log(&self, turn_id: i64, extra: &Value) -> Result<BTreeMap<String, f64>> {
        let patch = extra.to_string();
        let merged: String = self.services.store.with_conn(|conn| {
            conn.execute(
                "UPDATE turn_log SET timings_json = json_patch(timings_json, ?1) WHERE id = ?2",
                rusqlite::params![patch, turn_id],
            )?;
            conn.query_row(
                "SELECT timings_json FROM turn_log WHERE id = ?1",
                [turn_id],
                |r| r.get(0),
            )
        })?;
        let value: Value = serde_json::from_str(&merged)?;
        Ok(value
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_f64().map(|f| (k.clone(), f)))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// A clean endpointer (no speech in progress, no pre-roll). Built anew
    /// rather than `Endpointer::reset`: that calls webrtc-vad's
    /// `fvad_reset`, which also puts the VAD back to 8 kHz and its default
    /// mode, after which no 16 kHz frame is ever voiced (the loop went deaf
    /// after its first turn).
    fn reset_endpointer(&mut self) {
        if let Some(gate) = self.wake.as_mut() {
            gate.word_end_ms = None;
        }
        if let Some(check) = self.speech_check.as_mut() {
            check.forget();
        }
        match Endpointer::new(&self.vad) {
            Ok(fresh) => self.endpointer = fresh,
            Err(e) => {
                tracing::warn!("audio.vad settings: {e}; keeping the endpointer");
                self.endpointer.reset();
            }
        }
    }

    /// Our own voice must not become the next request.
    fn after_speaking(&mut self) {
        self.source.flush();
        self.reset_endpointer();
    }

    fn wait_speech(&mut self, tick: &mut dyn FnMut()) {
        let mut buf = vec![0i16; (SAMPLE_RATE / 50) as usize];
        while self.speaker.is_speaking() && !self.shutdown.is_cancelled() {
            tick();
            if self.pressed() {
                self.speaker.stop();
                break;
            }
            if self.source.is_live() {
                let _ = self.source.read(&mut buf, Duration::from_millis(10));
            } else {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// A device that failed: say so, wait, reopen. False when it can't be.
    fn recover(&mut self, error: &AudioError, tick: &mut dyn FnMut()) -> bool {
        tracing::error!("microphone failed: {error}");
        self.light(LedState::Error);
        self.speaker.say(error.user_sentence());
        let Some(reopen) = self.reopen.as_mut() else {
            return false;
        };
        let mut wait = Duration::from_millis(500);
        loop {
            let until = Instant::now() + wait;
            while Instant::now() < until {
                tick();
                if self.shutdown.is_cancelled() {
                    return false;
                }
                std::thread::sleep(TICK);
            }
            match reopen() {
                Ok(source) => {
                    tracing::info!(input = %source.describe(), "microphone back");
                    self.source = source;
                    self.reset_endpointer();
                    return true;
                }
                Err(e) => {
                    tracing::warn!("microphone still unavailable: {e}");
                    wait = (wait * 2).min(Duration::from_secs(10));
                }
            }
        }
    }

    fn pressed(&self) -> bool {
        pressed(&self.button)
    }

    fn released(&self) -> bool {
        released(&self.button)
    }

    fn device_state(&self, key: &str) -> Option<String> {
        self.services
            .store
            .device_state(key)
            .map_err(|e| tracing::warn!("cannot read device state {key}: {e}"))
            .ok()
            .flatten()
    }

    /// Show `state` on the lights, if any (only changes reach them).
    fn light(&self, state: LedState) {
        if let Some(lights) = &self.lights {
            lights.set(state);
        }
    }

    /// Whether a timer, alarm or reminder is ringing on this speaker.
    fn ringing(&self) -> bool {
        self.ring.as_ref().is_some_and(|r| r.is_ringing())
    }

    /// Stop everything ringing (here and, through the timers, elsewhere).
    /// The microphone while a round sounds: the stop word stops the
    /// ringing, the wake word stops it and opens the microphone. True when
    /// either was heard.
    fn interrupt_ringing(&mut self, samples: &[i16], pending: &mut VecDeque<VadEvent>) -> bool {
        let Some(listener) = self.interrupter.as_mut() else {
            return false;
        };
        let gate = self.wake.as_mut().filter(|g| g.has_detector());
        match listener.hear(samples, &self.stt, gate) {
            Some(interrupt::Interruption::Stop(text)) => {
                tracing::info!("stop word {text:?} over the ringing: stopping it");
                self.stop_ringing();
                self.after_speaking();
                true
            }
            Some(interrupt::Interruption::WakeWord(word)) => {
                tracing::info!(%word, "wake word while ringing: stopping it and listening");
                self.stop_ringing();
                self.source.flush();
                self.open_window(pending, true);
                true
            }
            None => false,
        }
    }

    fn stop_ringing(&mut self) {
        if let Some(ring) = self.ring.as_mut() {
            ring.stop(self.speaker.as_ref());
        }
    }

    /// Take in the timers' events and play a round if one is due and the
    /// speaker is free; `quiet`: no request is being heard. True when a
    /// round was queued.
    fn ring_tick(&mut self, quiet: bool) -> bool {
        let Some(ring) = self.ring.as_mut() else {
            return false;
        };
        ring.poll(self.speaker.as_ref());
        ring.play_due(self.speaker.as_ref(), quiet, Instant::now())
    }

    /// The tree's device actions that act on the speaker.
    fn apply_actions(&mut self, actions: &[String]) {
        for action in actions {
            match action.as_str() {
                "stop" => self.speaker.stop(),
                "volume_up" | "volume_down" => self.apply_volume(),
                _ => {}
            }
        }
    }

    /// `volume` device state (0–100) × `tts.volume`.
    fn apply_volume(&mut self) {
        let level = self
            .device_state("volume")
            .and_then(|v| v.trim().parse::<f32>().ok())
            // A 0 stored by an older build is the floor, never silence.
            .map(|v| {
                (v / 100.0).clamp(crate::tree::actions::device::MIN_VOLUME as f32 / 100.0, 1.0)
            })
            .unwrap_or(1.0);
        self.speaker.set_volume(level * self.volume);
    }
}

/// The turn's speech with the device's rules on top: `stop` says nothing
/// and silences the speaker; while paused only the resume answer is
/// spoken.
struct DeviceSpeech<'a> {
    inner: TurnSpeech<'a>,
    paused: bool,
    actions: Vec<String>,
    speaker: &'a Speaker,
    /// What the speaker is saying, for the interrupter's wake-word gate.
    playing: Option<interrupt::PlayingText>,
}

impl EventSink for DeviceSpeech<'_> {
    fn emit(&mut self, event: &Event) {
        if let Some(p) = &self.playing {
            match event {
                Event::Content { data } => p.push(data),
                Event::Done(done) => p.set(&done.response),
                Event::Error { message } => p.set(message),
                _ => {}
            }
        }
        if let Event::Done(done) = event {
            self.actions = done.actions.clone();
            let has = |name: &str| done.actions.iter().any(|a| a == name);
            if has("stop") {
                self.speaker.stop();
                return;
            }
            if self.paused && !has("dnd_off") {
                tracing::info!("paused: not speaking \"{}\"", done.response);
                return;
            }
        }
        self.inner.emit(event);
    }
}

/// A press waiting on the button channel (releases are dropped).
fn pressed(button: &Option<Receiver<ButtonEvent>>) -> bool {
    let Some(rx) = button else {
        return false;
    };
    let mut pressed = false;
    while let Ok(event) = rx.try_recv() {
        if event == ButtonEvent::Press {
            pressed = true;
        }
    }
    pressed
}

/// A release waiting on the button channel (or the button is gone).
fn released(button: &Option<Receiver<ButtonEvent>>) -> bool {
    let Some(rx) = button else {
        return true;
    };
    loop {
        match rx.try_recv() {
            Ok(ButtonEvent::Release) => return true,
            Ok(ButtonEvent::Press) => {}
            Err(crossbeam_channel::TryRecvError::Empty) => return false,
            Err(crossbeam_channel::TryRecvError::Disconnected) => return true,
        }
    }
}

fn failed_outcome(message: &str) -> TurnOutcome {
    TurnOutcome {
        conversation_id: None,
        turn_id: None,
        response: message.into(),
        ok: false,
        route: None,
        intent: None,
        actions: Vec::new(),
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn ms_between(a: Instant, b: Instant) -> f64 {
    b.saturating_duration_since(a).as_secs_f64() * 1000.0
}

/// The mute state of `earshot run`: the control socket that sets it and
/// what the loop has applied.
struct Mute {
    server: Option<crate::device::control::ControlServer>,
    applied: bool,
}

impl Mute {
    /// The control socket in the state directory (beside the database); a
    /// socket that can't be opened is logged and mute is unavailable.
    fn start(services: &Services) -> Mute {
        let server = services.store.path().parent().and_then(|dir| {
            let path = crate::device::control::socket_path(dir);
            crate::device::control::ControlServer::start(&path)
                .map_err(|e| tracing::warn!("earshot mute will not reach this loop: {e:#}"))
                .ok()
        });
        Mute {
            server,
            applied: false,
        }
    }

    fn requested(&self) -> bool {
        self.server
            .as_ref()
            .is_some_and(|s| s.muted().load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// The input while muted: no device open, nothing captured.
struct MutedSource;

impl AudioSource for MutedSource {
    fn read(&mut self, _out: &mut [i16], timeout: Duration) -> Result<usize, AudioError> {
        std::thread::sleep(timeout.min(TICK));
        Ok(0)
    }
    fn flush(&mut self) {}
    fn overruns(&self) -> u64 {
        0
    }
    fn describe(&self) -> String {
        "muted".into()
    }
}
