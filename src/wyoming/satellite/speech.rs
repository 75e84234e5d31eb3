//! The answer's way back to a satellite: an [`AudioSink`] that sends each
//! synthesised clip as Wyoming audio events, and a [`Synthesizer`] that
//! lets every satellite speak with one loaded voice.
//!
//! The satellite host reuses the local loop's [`Speaker`] and
//! [`TurnSpeech`](crate::tts::speaker::TurnSpeech): sentences are
//! synthesised as the turn streams them and each clip goes out at once as
//! `audio-chunk`s, the first one preceded by `audio-start`. The session
//! sends `audio-stop` when the speaker has nothing left. Writes carry the
//! socket's write timeout, so a satellite that stops reading costs its own
//! session a bounded wait, never anyone else's.
//!
//! [`Speaker`]: crate::tts::speaker::Speaker

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::SatelliteError;
use crate::audio::playback::{AudioSink, Clip, PlaybackError};
use crate::tts::{Synthesizer, Tts, TtsError};
use crate::wyoming_proto::audio::{audio_chunk_i16, audio_start, audio_stop, AudioFormat};
use crate::wyoming_proto::client::EventWriter;

/// Samples per `audio-chunk` (what wyoming-piper sends: ~46 ms at 22 kHz).
const CHUNK_SAMPLES: usize = 1024;

/// One TTS chain shared by every satellite. Synthesis is serialised on its
/// lock (one voice model in memory, as on a Pi Zero host that matters);
/// nothing holds the lock across network I/O — the clip is sent after the
/// lock is released.
#[derive(Clone)]
pub struct SharedTts {
    inner: Arc<Mutex<Tts>>,
    name: &'static str,
}

impl SharedTts {
    pub fn new(tts: Tts) -> SharedTts {
        let name = tts.engine_names().first().copied().unwrap_or("none");
        SharedTts {
            inner: Arc::new(Mutex::new(tts)),
            name,
        }
    }

    /// A chain of one engine — this shared one — for a satellite's speaker.
    pub fn for_speaker(&self) -> Tts {
        Tts::with_engines(vec![Box::new(self.clone())])
    }
}

impl Synthesizer for SharedTts {
    fn name(&self) -> &'static str {
        self.name
    }

    fn synthesize(&mut self, text: &str) -> Result<Clip, TtsError> {
        let mut tts = self.inner.lock().map_err(|_| {
            TtsError::EngineUnavailable(
                "the shared text-to-speech engine crashed earlier; restart earshot".into(),
            )
        })?;
        Ok(tts.synthesize(text)?.clip)
    }
}

/// What one answer sent, for the session's playback estimate and latency.
#[derive(Debug, Clone, Default)]
pub struct AnswerStats {
    /// When `audio-start` went out (the first answer audio).
    pub first_audio_at: Option<Instant>,
    /// Seconds of audio sent.
    pub audio_seconds: f64,
    /// The first write error (the session treats it as a lost connection).
    pub error: Option<SatelliteError>,
}

#[derive(Default)]
struct State {
    started: bool,
    stopped: bool,
    stats: AnswerStats,
    /// Stream position in ms, for the chunks' timestamps.
    position_ms: u64,
    total_seconds: f64,
}

/// Sends the answer's audio to one satellite connection.
pub struct SatelliteSink {
    writer: EventWriter,
    peer: String,
    state: Mutex<State>,
}

impl SatelliteSink {
    pub fn new(writer: EventWriter, peer: String) -> SatelliteSink {
        SatelliteSink {
            writer,
            peer,
            state: Mutex::new(State::default()),
        }
    }

    /// Start a new answer (the next clip opens with `audio-start`).
    pub fn begin(&self) {
        if let Ok(mut s) = self.state.lock() {
            let total = s.total_seconds;
            *s = State {
                total_seconds: total,
                ..State::default()
            };
        }
    }

    /// The answer is closed (`finish` ran: `audio-stop` sent, or nothing
    /// was ever going to be).
    pub fn answer_sent(&self) -> bool {
        self.state.lock().map(|s| s.stopped).unwrap_or(true)
    }

    /// Close the answer: `audio-stop` if any audio went out. Returns what
    /// was sent.
    pub fn finish(&self) -> AnswerStats {
        let Ok(mut s) = self.state.lock() else {
            return AnswerStats::default();
        };
        if s.started && !s.stopped && s.stats.error.is_none() {
            if let Err(e) = self.writer.send(&audio_stop(Some(s.position_ms))) {
                s.stats.error = Some(SatelliteError::send("audio-stop", e));
            }
        }
        s.stopped = true;
        s.stats.clone()
    }

    fn send_clip(&self, s: &mut State, clip: &Clip) -> Result<(), PlaybackError> {
        if s.stopped {
            return Ok(()); // after a stop the rest of the answer is dropped
        }
        if let Some(e) = &s.stats.error {
            return Err(PlaybackError::DeviceGone(e.to_string()));
        }
        let format = AudioFormat {
            rate: clip.sample_rate,
            width: 2,
            channels: 1,
        };
        let result = (|| -> Result<(), SatelliteError> {
            if !s.started {
                self.writer
                    .send(&audio_start(format, Some(0)))
                    .map_err(|e| SatelliteError::send("audio-start", e))?;
                s.started = true;
                s.stats.first_audio_at = Some(Instant::now());
            }
            let pcm = crate::audio::to_i16(&clip.samples);
            for piece in pcm.chunks(CHUNK_SAMPLES) {
                self.writer
                    .send(&audio_chunk_i16(
                        clip.sample_rate,
                        piece,
                        Some(s.position_ms),
                    ))
                    .map_err(|e| SatelliteError::send("answer audio", e))?;
                s.position_ms += piece.len() as u64 * 1000 / u64::from(clip.sample_rate.max(1));
            }
            Ok(())
        })();
        s.stats.audio_seconds += clip.seconds();
        s.total_seconds += clip.seconds();
        result.map_err(|e| {
            s.stats.error = Some(e.clone());
            PlaybackError::DeviceGone(e.to_string())
        })
    }
}

impl AudioSink for SatelliteSink {
    fn play(&self, clip: &Clip) -> Result<(), PlaybackError> {
        let mut s = self
            .state
            .lock()
            .map_err(|_| PlaybackError::Poisoned("satellite sink lock poisoned"))?;
        self.send_clip(&mut s, clip)
    }

    fn stop(&self) {
        // Audio already sent is the satellite's to play; the rest is dropped
        // and the stream closed so the satellite stops waiting for it.
        let _ = self.finish();
    }

    fn is_playing(&self) -> bool {
        // Clips are sent synchronously in `play`: nothing is ever queued here.
        false
    }

    fn played_seconds(&self) -> f64 {
        self.state.lock().map(|s| s.total_seconds).unwrap_or(0.0)
    }

    fn describe(&self) -> String {
        format!("satellite {}", self.peer)
    }
}

/// How long after the first answer audio the satellite will still be
/// playing: the audio's length plus a margin for its output buffer.
pub fn playback_end(stats: &AnswerStats) -> Option<Instant> {
    let first = stats.first_audio_at?;
    Some(first + Duration::from_secs_f64(stats.audio_seconds) + Duration::from_millis(300))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wyoming_proto::client::Connection;
    use crate::wyoming_proto::protocol::{Event, Limits};
    use std::net::{TcpListener, TcpStream};

    /// A sink writing to one end of a loopback connection, the other end
    /// to read what it sent, and our end (dropping it closes the socket).
    fn pair() -> (SatelliteSink, Connection, Connection) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (theirs, _) = listener.accept().unwrap();
        let ours = Connection::from_stream(ours, Limits::default()).unwrap();
        let theirs = Connection::from_stream(theirs, Limits::default()).unwrap();
        let sink = SatelliteSink::new(ours.writer(), "test".into());
        (sink, theirs, ours)
    }

    fn next(conn: &Connection) -> Event {
        conn.recv_timeout(Duration::from_secs(5))
            .unwrap()
            .expect("an event")
    }

    #[test]
    fn an_answer_is_audio_start_chunks_of_1024_samples_and_audio_stop() {
        let (sink, peer, _ours) = pair();
        sink.begin();
        assert!(!sink.answer_sent());
        sink.play(&Clip::new(vec![0.5; 2500], 22_050)).unwrap();
        sink.play(&Clip::new(vec![-0.5; 100], 22_050)).unwrap();
        let stats = sink.finish();
        assert!(sink.answer_sent());
        assert!(stats.error.is_none());
        assert!(stats.first_audio_at.is_some());
        assert!((stats.audio_seconds - 2600.0 / 22_050.0).abs() < 1e-9);

        let start = next(&peer);
        assert_eq!(start.kind, "audio-start");
        assert_eq!(
            AudioFormat::from_event(&start).unwrap(),
            AudioFormat {
                rate: 22_050,
                width: 2,
                channels: 1
            }
        );
        let sizes: Vec<usize> = (0..4)
            .map(|_| {
                let c = next(&peer);
                assert_eq!(c.kind, "audio-chunk");
                assert_eq!(c.u64("rate"), Some(22_050));
                c.payload.map(|p| p.len()).unwrap_or(0)
            })
            .collect();
        // 2500 samples → 1024 + 1024 + 452, then the second clip's 100.
        assert_eq!(sizes, vec![2048, 2048, 904, 200]);
        assert_eq!(next(&peer).kind, "audio-stop");
        // Nothing more: finishing again sends nothing.
        let _ = sink.finish();
        assert!(peer
            .recv_timeout(Duration::from_millis(100))
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_stop_closes_the_stream_once_and_drops_the_rest() {
        let (sink, peer, _ours) = pair();
        sink.begin();
        sink.play(&Clip::new(vec![0.1; 1024], 16_000)).unwrap();
        sink.stop();
        sink.play(&Clip::new(vec![0.1; 1024], 16_000)).unwrap();
        let _ = sink.finish();
        let kinds: Vec<String> = (0..3).map(|_| next(&peer).kind).collect();
        assert_eq!(kinds, ["audio-start", "audio-chunk", "audio-stop"]);
        assert!(peer
            .recv_timeout(Duration::from_millis(100))
            .unwrap()
            .is_none());
    }

    #[test]
    fn no_audio_sends_nothing_and_a_dead_peer_is_an_error_not_a_panic() {
        let (sink, peer, _ours) = pair();
        sink.begin();
        let stats = sink.finish();
        assert!(stats.first_audio_at.is_none() && stats.error.is_none());
        assert!(peer
            .recv_timeout(Duration::from_millis(100))
            .unwrap()
            .is_none());

        peer.close();
        drop(peer);
        sink.begin();
        // The first writes may still land in the kernel buffer; keep
        // playing until the broken pipe shows.
        let mut failed = None;
        for _ in 0..200 {
            if let Err(e) = sink.play(&Clip::new(vec![0.1; 4096], 16_000)) {
                failed = Some(e.to_string());
                break;
            }
        }
        let failed = failed.expect("writes to a closed peer fail");
        assert!(failed.contains("cannot send"), "{failed}");
        // Later clips of the answer fail fast with the same error…
        let again = sink.play(&Clip::new(vec![0.1; 10], 16_000)).unwrap_err();
        assert_eq!(again.to_string(), failed);
        // …and the session learns it from the answer's stats.
        let lost = sink.finish().error.expect("the write error is kept");
        assert!(matches!(lost, SatelliteError::Send { .. }), "{lost:?}");
        assert_eq!(lost.to_string(), failed);
    }
}
