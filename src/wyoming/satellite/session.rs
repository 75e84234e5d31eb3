//! One connection to one satellite, from `run-satellite` to the hang-up.
//!
//! The session thread only reads events, endpoints audio and sends small
//! control events; each request's STT, turn and spoken answer run on a
//! worker thread, so the session keeps draining the satellite's audio (an
//! always-streaming satellite sends 32 kB/s) and sees `played`,
//! `pause-satellite` and the shutdown flag while the answer is produced.
//!
//! Event flow (wyoming-satellite 1.0.0 and Home Assistant's conventions):
//! - earshot → satellite: `describe`, `run-satellite` on connect;
//!   `voice-started` / `voice-stopped` when earshot's endpointer hears the
//!   request begin and end; `transcript` with the words; `synthesize` with
//!   the answer's text; the answer as `audio-start` / `audio-chunk`s /
//!   `audio-stop` (when the pipeline's end stage is `tts`); `error` when
//!   STT or the turn failed; `pause-satellite` before hanging up at
//!   shutdown (newer satellites stop streaming; 1.0.0 ignores it).
//! - satellite → earshot: `run-pipeline` (start/end stages) when it starts
//!   streaming, then `audio-chunk`s (16 kHz mono from its microphone);
//!   `audio-stop` (its VAD timed out) and `voice-stopped` end the request
//!   early, whichever comes before earshot's endpointer; `played` (newer
//!   satellites) says the answer finished playing; `info` answers
//!   `describe`; `ping` gets `pong`; `pause-satellite` from a relay mutes
//!   the session until `run-satellite`/`run-pipeline`.
//!
//! While the answer is produced and played the satellite's audio is read
//! and dropped, so it never answers its own voice; playing ends with
//! `played`, or — for satellites that don't send it — when the audio sent
//! has had time to play.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::speech::{playback_end, AnswerStats, SatelliteSink, SharedTts};
use super::worker::{Job, Outcome};
use super::SatelliteError;
use crate::agent::Services;
use crate::audio::resample::Stream16k;
use crate::audio::vad::{Endpointer, Utterance, VadConfig, VadEvent};
use crate::audio::SAMPLE_RATE;
use crate::cancel::CancelToken;
use crate::stt::Stt;
use crate::tts::speaker::Speaker;
use crate::voice_loop::ring::{Ringer, RingerFactory};
use crate::wyoming_proto::audio::{decode_mono_f32, AudioFormat};
use crate::wyoming_proto::client::{Connection, EventWriter};
use crate::wyoming_proto::protocol::{Event, ProtocolError};

/// How often the session looks at the shutdown flag and its deadlines
/// when the satellite is quiet.
const TICK: Duration = Duration::from_millis(50);

/// Everything a session borrows from its satellite's host thread.
pub(super) struct Ctx<'a> {
    /// `tcp://…` as configured, for logs.
    pub label: &'a str,
    pub services: &'a Services,
    /// `audio.vad`: endpointing of the satellite's microphone.
    pub vad: &'a VadConfig,
    pub stt: &'a Stt,
    pub tts: &'a SharedTts,
    pub shutdown: &'a CancelToken,
    /// The satellite's conversation, kept across reconnects.
    pub conversation: &'a mut Option<i64>,
    /// Print one JSON line per turn on stdout (`earshot run --json`).
    pub json: bool,
    /// Makes this connection's timer ringer.
    pub ring: Option<&'a RingerFactory>,
}

/// Why a session ended.
pub(super) enum End {
    Shutdown,
    Lost {
        reason: SatelliteError,
        /// The satellite streamed audio: reconnecting soon is reasonable.
        healthy: bool,
    },
}

/// What the satellite's `run-pipeline` asked for.
#[derive(Debug, Clone)]
struct Pipeline {
    start: String,
    end: String,
}

impl Pipeline {
    /// Without a `run-pipeline` (audio first) assume Home Assistant's
    /// default for a satellite without a local wake word.
    fn assumed() -> Pipeline {
        Pipeline {
            start: "wake".into(),
            end: "tts".into(),
        }
    }

    fn speaks(&self) -> bool {
        self.end == "tts"
    }
}

enum Phase {
    Listening,
    /// STT, turn and answer on a worker thread.
    Busy {
        worker: JoinHandle<Outcome>,
        cancel: CancelToken,
    },
    /// The satellite is playing the answer until `played` or this moment.
    Playing {
        until: Instant,
    },
}

/// Run the session on `conn` until the satellite hangs up, the connection
/// breaks or earshot shuts down.
pub(super) fn run(ctx: &mut Ctx<'_>, conn: Connection) -> End {
    let writer = conn.writer();
    let sink = Arc::new(SatelliteSink::new(writer.clone(), ctx.label.to_string()));
    let speaker = match Speaker::start(ctx.tts.for_speaker(), sink.clone()) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            return End::Lost {
                reason: SatelliteError::Local(e.to_string()),
                healthy: false,
            }
        }
    };
    let mut endpointer = match Endpointer::new(ctx.vad) {
        Ok(e) => e,
        Err(e) => {
            return End::Lost {
                reason: SatelliteError::Local(format!("audio.vad settings: {e}")),
                healthy: false,
            }
        }
    };
    for event in [Event::new("describe"), Event::new("run-satellite")] {
        if let Err(e) = writer.send(&event) {
            return End::Lost {
                reason: SatelliteError::send(&event.kind, e),
                healthy: false,
            };
        }
    }
    let mut s = Session {
        label: ctx.label.to_string(),
        writer,
        sink,
        speaker,
        pipeline: Pipeline::assumed(),
        phase: Phase::Listening,
        paused: false,
        healthy: false,
        resampler: None,
        dropped_ms: 0,
        vad: ctx.vad.clone(),
        played: false,
    };
    let mut ringer = ctx.ring.map(|make| make());
    let end = loop {
        if ctx.shutdown.is_cancelled() {
            s.stop_answer();
            let _ = s.writer.send(&Event::new("pause-satellite"));
            break End::Shutdown;
        }
        if let Some(lost) = s.poll_phase(ctx, &mut endpointer) {
            break End::Lost {
                reason: lost,
                healthy: s.healthy,
            };
        }
        if let Some(ringer) = ringer.as_mut() {
            if let Err(reason) = s.ring_tick(ringer, &endpointer) {
                break End::Lost {
                    reason,
                    healthy: s.healthy,
                };
            }
        }
        let event = match conn.recv_timeout(TICK) {
            Ok(Some(event)) => event,
            Ok(None) => continue,
            Err(ProtocolError::Closed) => {
                break End::Lost {
                    reason: SatelliteError::Closed,
                    healthy: s.healthy,
                }
            }
            Err(e) => {
                break End::Lost {
                    reason: SatelliteError::Protocol(e.to_string()),
                    healthy: s.healthy,
                }
            }
        };
        if let Err(reason) = s.on_event(ctx, &mut endpointer, event) {
            break End::Lost {
                reason,
                healthy: s.healthy,
            };
        }
    };
    // Close first, so the cancelled answer's last writes fail fast instead
    // of waiting on a satellite that stopped reading; then wait for the
    // worker (a transcription in progress finishes first).
    conn.close();
    s.stop_answer();
    if let Phase::Busy { worker, .. } = std::mem::replace(&mut s.phase, Phase::Listening) {
        if let Ok(outcome) = worker.join() {
            if outcome.conversation_id.is_some() {
                *ctx.conversation = outcome.conversation_id;
            }
        }
    }
    end
}

struct Session {
    label: String,
    writer: EventWriter,
    sink: Arc<SatelliteSink>,
    speaker: Arc<Speaker>,
    pipeline: Pipeline,
    phase: Phase,
    /// `pause-satellite` received: audio is dropped until the satellite
    /// runs again.
    paused: bool,
    /// The satellite streamed decodable audio this session.
    healthy: bool,
    /// The satellite's rate → 16 kHz (`None` until the first chunk).
    resampler: Option<(u32, Stream16k)>,
    /// Audio dropped while answering (ms), logged once per answer.
    dropped_ms: u64,
    /// `audio.vad`, for a fresh endpointer per request.
    vad: VadConfig,
    /// `played` arrived while the worker was still finishing.
    played: bool,
}

impl Session {
    fn send(&self, event: &Event) -> Result<(), SatelliteError> {
        self.writer
            .send(event)
            .map_err(|e| SatelliteError::send(&event.kind, e))
    }

    fn on_event(
        &mut self,
        ctx: &mut Ctx<'_>,
        endpointer: &mut Endpointer,
        event: Event,
    ) -> Result<(), SatelliteError> {
        // Events queued behind the worker's end see the phase after it.
        if let Some(lost) = self.poll_phase(ctx, endpointer) {
            return Err(lost);
        }
        match event.kind.as_str() {
            "audio-chunk" => self.on_audio(ctx, endpointer, &event),
            "audio-start" => {
                AudioFormat::from_event(&event).map_err(SatelliteError::Protocol)?;
                Ok(())
            }
            "run-pipeline" => {
                self.pipeline = Pipeline {
                    start: event.str("start_stage").unwrap_or("wake").to_string(),
                    end: event.str("end_stage").unwrap_or("tts").to_string(),
                };
                tracing::info!(
                    "satellite {}: streaming (pipeline {} → {})",
                    self.label,
                    self.pipeline.start,
                    self.pipeline.end
                );
                self.resume(endpointer);
                Ok(())
            }
            "run-satellite" => {
                self.resume(endpointer);
                Ok(())
            }
            "audio-stop" | "voice-stopped" => {
                // The satellite's own end of the request (its VAD timed
                // out, or it endpointed): whatever earshot heard is it.
                if matches!(self.phase, Phase::Listening) && !self.paused {
                    match endpointer.finish() {
                        Some(u) => self.start_turn(ctx, u)?,
                        None => tracing::debug!(
                            "satellite {}: {} with no speech heard",
                            self.label,
                            event.kind
                        ),
                    }
                    self.fresh_endpointer(endpointer);
                }
                Ok(())
            }
            "played" => {
                match self.phase {
                    Phase::Playing { .. } => {
                        tracing::debug!("satellite {}: answer played", self.label);
                        self.listen_again(endpointer);
                    }
                    // The satellite played the answer before the session
                    // saw the worker finish: once audio-stop went out the
                    // worker has no more I/O, so join it and listen now
                    // (the next request may already be on its way).
                    Phase::Busy { .. } => {
                        self.played = true;
                        if self.sink.answer_sent() {
                            if let Some(lost) = self.finish_worker(ctx, endpointer) {
                                return Err(lost);
                            }
                        }
                    }
                    Phase::Listening => {}
                }
                Ok(())
            }
            "pause-satellite" => {
                tracing::info!("satellite {}: paused (until it runs again)", self.label);
                self.stop_answer();
                self.paused = true;
                Ok(())
            }
            "info" => {
                let name = event
                    .data
                    .get("satellite")
                    .and_then(|s| s.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("(unnamed)");
                tracing::debug!("satellite {}: describes itself as {name:?}", self.label);
                Ok(())
            }
            "ping" => self.send(&Event::with_data("pong", Value::Object(event.data))),
            "error" => {
                tracing::warn!(
                    "satellite {}: reports an error: {}",
                    self.label,
                    event.str("text").unwrap_or("(no text)")
                );
                Ok(())
            }
            other => {
                tracing::debug!("satellite {}: ignoring {other}", self.label);
                Ok(())
            }
        }
    }

    fn on_audio(
        &mut self,
        ctx: &mut Ctx<'_>,
        endpointer: &mut Endpointer,
        event: &Event,
    ) -> Result<(), SatelliteError> {
        let format = AudioFormat::from_event(event).map_err(SatelliteError::Protocol)?;
        self.healthy = true;
        let payload = event.payload.as_deref().unwrap_or_default();
        if self.paused || !matches!(self.phase, Phase::Listening) {
            self.dropped_ms += payload.len() as u64 * 1000
                / (u64::from(format.rate) * format.frame_bytes() as u64).max(1);
            return Ok(());
        }
        let mono = decode_mono_f32(format, payload);
        let resampler = match &mut self.resampler {
            Some((rate, r)) if *rate == format.rate => r,
            slot => {
                let r = Stream16k::new(format.rate).map_err(SatelliteError::Protocol)?;
                &mut slot.insert((format.rate, r)).1
            }
        };
        let mut at16k = Vec::with_capacity(mono.len() * SAMPLE_RATE as usize / 8000 + 16);
        resampler
            .push(&mono, &mut at16k)
            .map_err(SatelliteError::Local)?;
        let pcm = crate::audio::to_i16(&at16k);
        tracing::trace!(
            samples = pcm.len(),
            peak = pcm.iter().map(|s| s.unsigned_abs()).max().unwrap_or(0),
            "satellite {}: audio",
            self.label
        );
        for vad in endpointer.push(&pcm) {
            match vad {
                VadEvent::SpeechStart { at_ms } => {
                    tracing::debug!("satellite {}: speech started", self.label);
                    self.send(&Event::with_data(
                        "voice-started",
                        json!({ "timestamp": at_ms }),
                    ))?;
                }
                VadEvent::Utterance(u) => {
                    self.start_turn(ctx, u)?;
                    // The rest of this chunk belongs to the answer's time.
                    break;
                }
                VadEvent::Discarded { speech_ms, .. } => {
                    tracing::debug!(
                        "satellite {}: {speech_ms} ms of speech is too short to be a request",
                        self.label
                    );
                }
                // Satellites end on the full hang-over (their STT may be a
                // service of their own; no speculative look here).
                VadEvent::Pause(_) => {}
            }
        }
        Ok(())
    }

    /// The request is complete: tell the satellite, then STT, turn and
    /// answer on a worker.
    fn start_turn(
        &mut self,
        ctx: &mut Ctx<'_>,
        utterance: Utterance,
    ) -> Result<(), SatelliteError> {
        self.send(&Event::with_data(
            "voice-stopped",
            json!({ "timestamp": utterance.end_ms() }),
        ))?;
        let cancel = CancelToken::new();
        // A fresh answer (before the worker starts, so a late `played`
        // can't mistake the previous answer's end for this one's).
        self.sink.begin();
        let job = Job {
            label: self.label.clone(),
            services: ctx.services.clone(),
            stt: ctx.stt.clone(),
            writer: self.writer.clone(),
            sink: self.sink.clone(),
            speaker: self.speaker.clone(),
            speaks: self.pipeline.speaks(),
            conversation: *ctx.conversation,
            cancel: cancel.clone(),
            json: ctx.json,
        };
        let worker = std::thread::Builder::new()
            .name(format!("satellite-turn {}", self.label))
            .spawn(move || job.run(utterance))
            .map_err(|e| SatelliteError::Local(format!("cannot start a turn thread: {e}")))?;
        self.dropped_ms = 0;
        self.played = false;
        self.phase = Phase::Busy { worker, cancel };
        Ok(())
    }

    /// Move on when the worker finished or the answer has played.
    fn poll_phase(
        &mut self,
        ctx: &mut Ctx<'_>,
        endpointer: &mut Endpointer,
    ) -> Option<SatelliteError> {
        match &self.phase {
            Phase::Busy { worker, .. } if worker.is_finished() => {
                self.finish_worker(ctx, endpointer)
            }
            Phase::Playing { until } if Instant::now() >= *until => {
                self.listen_again(endpointer);
                None
            }
            _ => None,
        }
    }

    /// Join the worker (finished, or past its last write) and go on to
    /// playing or listening. Returns why the connection is lost, if it is.
    fn finish_worker(
        &mut self,
        ctx: &mut Ctx<'_>,
        endpointer: &mut Endpointer,
    ) -> Option<SatelliteError> {
        let Phase::Busy { worker, .. } = std::mem::replace(&mut self.phase, Phase::Listening)
        else {
            return None;
        };
        let outcome = worker.join().unwrap_or_else(|_| Outcome {
            conversation_id: None,
            answer: AnswerStats::default(),
            lost: None,
        });
        if outcome.conversation_id.is_some() {
            *ctx.conversation = outcome.conversation_id;
        }
        if let Some(lost) = outcome.lost {
            return Some(lost);
        }
        match playback_end(&outcome.answer) {
            Some(until) if until > Instant::now() && !self.played => {
                self.phase = Phase::Playing { until };
            }
            _ => self.listen_again(endpointer),
        }
        None
    }

    /// Back to listening: forget audio heard while answering.
    fn listen_again(&mut self, endpointer: &mut Endpointer) {
        if self.dropped_ms > 0 {
            tracing::debug!(
                "satellite {}: ignored {} ms of its audio while answering",
                self.label,
                self.dropped_ms
            );
        }
        self.dropped_ms = 0;
        self.phase = Phase::Listening;
        self.fresh_endpointer(endpointer);
        if let Some((_, r)) = &mut self.resampler {
            r.reset();
        }
    }

    /// The satellite runs (again): a fresh request starts.
    fn resume(&mut self, endpointer: &mut Endpointer) {
        self.paused = false;
        if matches!(self.phase, Phase::Playing { .. }) {
            // A new pipeline (its wake word again) ends our playback wait.
            self.listen_again(endpointer);
        } else if matches!(self.phase, Phase::Listening) {
            self.fresh_endpointer(endpointer);
        }
    }

    /// A new endpointer instead of `Endpointer::reset`: webrtc-vad's reset
    /// (libfvad `fvad_reset`) puts the detector back to 8 kHz, after which
    /// every 16 kHz frame is rejected and nothing is ever heard again.
    fn fresh_endpointer(&self, endpointer: &mut Endpointer) {
        match Endpointer::new(&self.vad) {
            Ok(e) => *endpointer = e,
            Err(e) => tracing::warn!("satellite {}: audio.vad settings: {e}", self.label),
        }
    }

    /// The timers: take in their events and, when the satellite is
    /// listening and hears no request, send a due round (chime + label)
    /// as answer audio. A worker waits for it to be sent and closes the
    /// stream; the session then waits for it to play like an answer (its
    /// microphone is ignored meanwhile, so it never hears its own chime).
    fn ring_tick(
        &mut self,
        ringer: &mut Ringer,
        endpointer: &Endpointer,
    ) -> Result<(), SatelliteError> {
        let now = Instant::now();
        ringer.poll(self.speaker.as_ref());
        // Settles a finished round into its pause (never plays: not quiet).
        ringer.play_due(self.speaker.as_ref(), false, now);
        let free = matches!(self.phase, Phase::Listening)
            && !self.paused
            && self.pipeline.speaks()
            && !endpointer.is_speaking();
        if !free || !ringer.due(now) {
            return Ok(());
        }
        self.sink.begin();
        if !ringer.play_due(self.speaker.as_ref(), true, now) {
            return Ok(());
        }
        tracing::info!("satellite {}: ringing", self.label);
        let speaker = self.speaker.clone();
        let sink = self.sink.clone();
        let cancel = CancelToken::new();
        let stop = cancel.clone();
        let worker = std::thread::Builder::new()
            .name(format!("satellite-ring {}", self.label))
            .spawn(move || {
                speaker.wait_done(&stop, Duration::from_secs(30));
                let answer = sink.finish();
                Outcome {
                    conversation_id: None,
                    lost: answer.error.clone(),
                    answer,
                }
            })
            .map_err(|e| SatelliteError::Local(format!("cannot start a ring thread: {e}")))?;
        self.dropped_ms = 0;
        self.played = false;
        self.phase = Phase::Busy { worker, cancel };
        Ok(())
    }

    /// Cancel the turn in progress and drop the rest of its answer.
    fn stop_answer(&mut self) {
        if let Phase::Busy { cancel, .. } = &self.phase {
            cancel.cancel();
            self.speaker.stop();
        }
    }
}
