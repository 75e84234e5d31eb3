//! The seam to a pipeline that runs elsewhere: an utterance the wake word
//! or the button started goes there instead of the local `run_turn` while
//! it is [`RemotePipeline::ready`] (Home Assistant's Assist through
//! `esphome::satellite`, `[esphome] serve`). Defined here so the loop never
//! names the front door that implements it.
//!
//! The loop hands the endpointed utterance to [`RemotePipeline::run`] on a
//! worker thread and keeps ticking, watching the button, the stop word and
//! the shutdown flag, which cancel the remote turn like a local one. What
//! the remote side wants played between turns (an announcement, a timer's
//! chime) is [`RemotePipeline::take_pending`], played by the loop when it
//! is quiet so the microphone never takes it for a request.

use std::time::{Duration, Instant};

use crate::audio::playback::Clip;
use crate::audio::vad::Utterance;
use crate::audio::{AudioError, SAMPLE_RATE};
use crate::cancel::CancelToken;
use crate::device::leds::LedState;
use crate::tts::speaker::Speaker;

/// The detection fires a little into what follows the wake word (a
/// request in the same breath): this much before it is kept.
const WORD_MARGIN_MS: u64 = 300;

/// Shorter audio after the wake word is not a request (0.3 s).
const MIN_REQUEST: usize = SAMPLE_RATE as usize * 3 / 10;

/// One request for the remote pipeline.
pub struct RemoteRequest<'a> {
    /// The utterance, 16 kHz mono.
    pub samples: &'a [i16],
    /// The wake word that opened the microphone (`None`: the button, or
    /// no wake word).
    pub wake_word: Option<&'a str>,
}

/// How a remote turn went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteOutcome {
    /// The remote pipeline took the turn (its answer was played, or its
    /// error was said): nothing more to do here.
    Handled {
        /// What the remote side heard, when it said.
        heard: String,
        /// Its answer's text, when it said.
        answer: String,
        /// It expects a reply: listen again without the wake word.
        follow_up: bool,
    },
    /// It did not take the turn (not connected, no answer in time): the
    /// loop answers locally. The reason is one log line.
    Declined(String),
}

/// Something the remote side wants played between turns.
pub struct Pending {
    /// What the log calls it ("announcement", "timer").
    pub label: String,
    /// Played in order.
    pub clips: Vec<Clip>,
    /// Said after the clips (with the local voice), when not empty.
    pub text: String,
    /// Told whether it was played to the end (not cut by a press).
    pub done: Option<Box<dyn FnOnce(bool) + Send>>,
}

/// A pipeline outside the loop.
pub trait RemotePipeline: Send + Sync {
    /// Whether a request would go there now.
    fn ready(&self) -> bool;
    /// Run one request; play its answer on `speaker`. Returns soon after
    /// `cancel` (the answer is then stopped by the loop).
    fn run(
        &self,
        request: RemoteRequest<'_>,
        speaker: &Speaker,
        cancel: &CancelToken,
    ) -> RemoteOutcome;
    /// The next thing to play between turns, if any.
    fn take_pending(&self) -> Option<Pending>;
}

impl super::VoiceLoop {
    /// Hand `utterance` to the remote pipeline; `None` when it declined
    /// (the caller answers locally), else whether a press cut it (the
    /// press is still held: push-to-talk follows).
    pub(super) fn remote_turn(
        &mut self,
        remote: &dyn RemotePipeline,
        tick: &mut dyn FnMut(),
        utterance: &Utterance,
    ) -> Option<bool> {
        // After a detection, the request starts where the wake word ended
        // (HA's STT is not told to drop it); after a press, all of it.
        let word_end = self.wake.as_ref().and_then(|g| g.word_end_ms);
        let wake_word = word_end.and_then(|_| self.wake.as_ref()?.words().first().cloned());
        let skip = word_end.map_or(0, |end| {
            let from = end.saturating_sub(WORD_MARGIN_MS);
            (from.saturating_sub(utterance.start_ms) * u64::from(SAMPLE_RATE) / 1000) as usize
        });
        let samples = utterance.samples.get(skip..).unwrap_or_default();
        if samples.len() < MIN_REQUEST {
            // Only the wake word: the local loop hears it and waits for
            // the request, which then goes to the remote side.
            tracing::debug!("only the wake word; the loop listens for the request");
            return None;
        }
        self.light(LedState::Thinking);
        let cancel = CancelToken::new();
        let speaker = self.speaker.clone();
        let started = Instant::now();
        let mut pressed = false;
        let button = &self.button;
        let shutdown = &self.shutdown;
        let source = &mut self.source;
        let interrupter = &mut self.interrupter;
        if let Some(listener) = interrupter.as_mut() {
            listener.reset();
        }
        let stt = &self.stt;
        let outcome = std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                remote.run(
                    RemoteRequest {
                        samples,
                        wake_word: wake_word.as_deref(),
                    },
                    &speaker,
                    &cancel,
                )
            });
            let mut buf = vec![0i16; (SAMPLE_RATE / 50) as usize];
            while !worker.is_finished() {
                tick();
                if shutdown.is_cancelled() && !cancel.is_cancelled() {
                    tracing::info!("stopping: cancelling the remote turn");
                    cancel.cancel();
                    speaker.stop();
                }
                if !cancel.is_cancelled() && super::pressed(button) {
                    tracing::info!("barge-in: button pressed during the remote turn");
                    cancel.cancel();
                    speaker.stop();
                    pressed = true;
                }
                // The microphone: the stop word, else read and dropped (the
                // device must not hear its own answer). A recording is not
                // read: what follows in it is the next request.
                if !source.is_live() {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                match source.read(&mut buf, Duration::from_millis(10)) {
                    Ok(n) if !cancel.is_cancelled() => {
                        if let Some(listener) = interrupter.as_mut() {
                            if let Some(super::interrupt::Interruption::Stop(text)) =
                                listener.hear(&buf[..n], stt, None)
                            {
                                tracing::info!(
                                    "barge-in: stop word {text:?} during the remote turn"
                                );
                                cancel.cancel();
                                speaker.stop();
                            }
                        }
                    }
                    Ok(_) | Err(AudioError::Ended) => {}
                    Err(e) => tracing::warn!("microphone error during the remote turn: {e}"),
                }
            }
            worker
                .join()
                .unwrap_or_else(|_| RemoteOutcome::Declined("the remote turn crashed".into()))
        });
        match outcome {
            RemoteOutcome::Declined(reason) if !cancel.is_cancelled() => {
                tracing::info!("{reason}; answering locally");
                None
            }
            RemoteOutcome::Declined(_) => {
                self.after_speaking();
                Some(pressed)
            }
            RemoteOutcome::Handled {
                heard,
                answer,
                follow_up,
            } => {
                // From the end of speech, as the local turn line counts.
                let ms = super::ms_since(utterance.decided_at).round();
                tracing::info!(
                    after_vad_end_ms = ms,
                    remote_ms = started.elapsed().as_millis() as u64,
                    heard = %heard,
                    answer = %answer,
                    "remote turn done"
                );
                if self.json {
                    let line = serde_json::json!({
                        "text": heard,
                        "answer": answer,
                        "ok": true,
                        "pipeline": "remote",
                        "barge_in": pressed.then_some("button"),
                        "after_vad_end_ms": { "done": ms },
                    });
                    println!("{line}");
                }
                self.after_speaking();
                if let Some(gate) = self.wake.as_mut() {
                    gate.awake_until = None;
                    if follow_up && !pressed && !cancel.is_cancelled() && gate.follow_up_if(true) {
                        tracing::info!("follow-up: listening without the wake word");
                        self.light(LedState::Listening);
                    }
                }
                Some(pressed)
            }
        }
    }

    /// Play what the remote side queued (an announcement, a timer's
    /// chime), waiting for the speaker like a spoken error; true when
    /// something was played.
    pub(super) fn play_remote_pending(
        &mut self,
        remote: &dyn RemotePipeline,
        tick: &mut dyn FnMut(),
    ) -> bool {
        let Some(item) = remote.take_pending() else {
            return false;
        };
        tracing::info!(what = %item.label, "playing for Home Assistant");
        self.light(LedState::Speaking);
        for clip in item.clips {
            self.speaker.play(&item.label, clip);
        }
        if !item.text.trim().is_empty() {
            self.speaker.say(&item.text);
        }
        self.wait_speech(tick);
        if let Some(done) = item.done {
            done(!self.shutdown.is_cancelled());
        }
        self.after_speaking();
        true
    }
}
