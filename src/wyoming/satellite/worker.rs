//! One request's work on its own thread: transcribe the endpointed audio,
//! send `transcript`, run the turn (source `wyoming`, the satellite's
//! conversation), and speak the answer back through the satellite's
//! [`Speaker`] — `synthesize`, then audio sentence by sentence, then
//! `audio-stop`. The session thread meanwhile keeps reading the
//! satellite's events.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::speech::{AnswerStats, SatelliteSink};
use super::SatelliteError;
use crate::agent::turn::{run_turn, TurnInput};
use crate::agent::Services;
use crate::audio::vad::Utterance;
use crate::cancel::CancelToken;
use crate::events::{Event as TurnEvent, EventSink};
use crate::stt::Stt;
use crate::tts::speaker::{Speaker, TurnSpeech};
use crate::wyoming_proto::client::EventWriter;
use crate::wyoming_proto::protocol::Event;

/// Longest an answer may take to synthesise and send before the worker
/// gives up on it.
const ANSWER_LIMIT: Duration = Duration::from_secs(120);

/// What the worker did with one request.
pub(super) struct Outcome {
    pub conversation_id: Option<i64>,
    pub answer: AnswerStats,
    /// A write to the satellite failed: the connection is gone.
    pub lost: Option<SatelliteError>,
}

/// One request's work, moved onto its worker thread.
pub(super) struct Job {
    pub label: String,
    pub services: Services,
    pub stt: Stt,
    pub writer: EventWriter,
    pub sink: Arc<SatelliteSink>,
    pub speaker: Arc<Speaker>,
    pub speaks: bool,
    pub conversation: Option<i64>,
    pub cancel: CancelToken,
    pub json: bool,
}

impl Job {
    pub(super) fn run(self, utterance: Utterance) -> Outcome {
        let audio_end = utterance.decided_at;
        let mut outcome = Outcome {
            conversation_id: self.conversation,
            answer: AnswerStats::default(),
            lost: None,
        };
        let transcript = self.stt.transcribe(&utterance.to_f32());
        let stt_ms = ms_since(audio_end);
        let t = match transcript {
            Ok(t) if t.no_speech || t.text.trim().is_empty() => {
                tracing::info!(
                    "satellite {}: heard no words ({}); listening again",
                    self.label,
                    t.reason
                );
                return outcome;
            }
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("satellite {}: speech-to-text failed: {e}", self.label);
                let sentence = e.user_sentence();
                outcome.lost = self
                    .writer
                    .send(&Event::with_data(
                        "error",
                        json!({"text": sentence, "code": "stt-failed"}),
                    ))
                    .err()
                    .map(|e| SatelliteError::send("error", e));
                if outcome.lost.is_none() && self.speaks {
                    self.speaker.say(sentence);
                    self.speaker.wait_done(&self.cancel, ANSWER_LIMIT);
                    outcome.answer = self.sink.finish();
                    outcome.lost = outcome.answer.error.clone();
                }
                return outcome;
            }
        };
        tracing::info!(
            engine = %t.engine,
            path = %t.path,
            stt_ms = t.timings.stt_ms,
            "satellite {}: heard: {}",
            self.label,
            t.text
        );
        if crate::voice_loop::ring::is_stop_word(&t.text) {
            // "stop" while something rings only stops the ringing (on every
            // speaker, through the timers): no turn, no model.
            match self.services.timers.stop_ringing(None) {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(
                        stopped = n,
                        "satellite {}: heard {:?} while ringing: stopping it",
                        self.label,
                        t.text
                    );
                    return outcome;
                }
                Err(e) => tracing::warn!("could not stop the ringing timers: {e}"),
            }
        }
        if let Err(e) = self
            .writer
            .send(&Event::with_data("transcript", json!({"text": t.text})))
        {
            outcome.lost = Some(SatelliteError::send("transcript", e));
            return outcome;
        }
        let mut input = TurnInput::text(t.text.clone());
        input.source = "wyoming".into();
        input.conversation_id = self.conversation;
        input
            .timings
            .insert("capture".into(), utterance.duration_ms() as f64);
        input.timings.insert("stt".into(), stt_ms);
        input.extra.insert(
            "stt".into(),
            json!({"engine": t.engine, "path": t.path, "reason": t.reason, "stt_ms": t.timings.stt_ms}),
        );
        input
            .extra
            .insert("satellite".into(), json!(self.label.clone()));

        let turn_started = Instant::now();
        let mut speech = SatelliteSpeech {
            inner: TurnSpeech::new(&self.speaker),
            writer: &self.writer,
            speaks: self.speaks,
            lost: None,
        };
        let result = run_turn(&self.services, input, &mut speech, &self.cancel);
        let lost = speech.lost.take();
        drop(speech);
        if result.ok {
            outcome.conversation_id = result.conversation_id;
        }
        if lost.is_none() {
            self.speaker.wait_done(&self.cancel, ANSWER_LIMIT);
        }
        outcome.answer = self.sink.finish();
        for e in self.speaker.take_errors() {
            tracing::error!("satellite {}: could not speak the answer: {e}", self.label);
        }
        let _ = self.speaker.take_stats();
        outcome.lost = lost.or_else(|| outcome.answer.error.clone());
        let first_audio = outcome
            .answer
            .first_audio_at
            .map(|at| at.saturating_duration_since(audio_end).as_secs_f64() * 1000.0);
        let line = json!({
            "source": "wyoming",
            "satellite": self.label,
            "text": t.text,
            "answer": result.response,
            "ok": result.ok,
            "turn_id": result.turn_id,
            "route": result.route,
            "intent": result.intent,
            "conversation_id": result.conversation_id,
            // Stamps in ms after the request's audio ended (the endpoint).
            "after_audio_end_ms": {
                "stt_done": stt_ms,
                "turn_start": turn_started.saturating_duration_since(audio_end).as_secs_f64() * 1000.0,
                "first_audio": first_audio,
                "sent_all": ms_since(audio_end),
            },
            "audio_seconds": outcome.answer.audio_seconds,
        });
        tracing::info!("satellite {}: turn: {line}", self.label);
        if self.json {
            println!("{line}");
        }
        outcome
    }
}

/// The turn's speech toward a satellite: `synthesize` with the answer's
/// text, the audio through [`TurnSpeech`] when the pipeline ends in `tts`,
/// `error` when the turn failed, and the tree's `stop` action honoured.
struct SatelliteSpeech<'a> {
    inner: TurnSpeech<'a>,
    writer: &'a EventWriter,
    speaks: bool,
    lost: Option<SatelliteError>,
}

impl SatelliteSpeech<'_> {
    fn send(&mut self, event: Event) {
        if self.lost.is_some() {
            return;
        }
        if let Err(e) = self.writer.send(&event) {
            self.lost = Some(SatelliteError::send(&event.kind, e));
        }
    }
}

impl EventSink for SatelliteSpeech<'_> {
    fn emit(&mut self, event: &TurnEvent) {
        match event {
            TurnEvent::Done(done) => {
                if done.actions.iter().any(|a| a == "stop") {
                    return; // "stop": say nothing
                }
                self.send(Event::with_data(
                    "synthesize",
                    json!({ "text": done.response }),
                ));
            }
            TurnEvent::Error { message } => {
                self.send(Event::with_data(
                    "error",
                    json!({"text": message, "code": "turn-failed"}),
                ));
            }
            _ => {}
        }
        if self.speaks && self.lost.is_none() {
            self.inner.emit(event);
        }
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}
