//! earshot as Home Assistant's voice satellite inside `earshot run`
//! (`[esphome] serve = true`): while Home Assistant's ESPHome integration
//! is connected and subscribed (audio over the API), a request the wake
//! word or the button started runs through HA's Assist pipeline instead of
//! the local turn, as an ESPHome voice device's does.
//!
//! One request ([`Satellite::run`], on the voice loop's worker thread):
//! `VoiceAssistantRequest{start}` (the conversation HA named last time,
//! the wake word), HA's `VoiceAssistantResponse` within
//! [`RESPONSE_TIMEOUT`] (else the loop answers locally), the endpointed
//! utterance as `VoiceAssistantAudio` (16 kHz mono s16le, cut short at
//! HA's `STT_VAD_END`) and the end of audio, then HA's events: the answer
//! streamed over the API (`TTS_STREAM_START`, audio, `TTS_STREAM_END`:
//! what HA does for a device with a speaker) is played as it comes; else
//! the WAV of `TTS_END`'s URL is fetched (bounded in size and time) and
//! played; `ERROR` is said in one sentence; `RUN_END` ends it once the
//! answer has played (then `VoiceAssistantAnnounceFinished`, as firmware
//! sends after its answer). The button, the stop word or SIGTERM stop it
//! (`VoiceAssistantRequest{start: false}`, HA aborts).
//!
//! Between requests HA's announcements (`VoiceAssistantAnnounceRequest`)
//! are fetched on their own thread and played by the loop when it is
//! quiet, answered with `VoiceAssistantAnnounceFinished`; a finished HA
//! timer plays the timers' chime and a sentence. Nothing here holds its
//! lock across network I/O; every send goes through the connection's
//! writer ([`super::server::Link`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use prost::Message;

use super::frame::FrameError;
use super::messages::{self as pb, ids, VoiceAssistantEvent as Ev, VoiceAssistantTimerEvent};
use super::server::{Link, Voice};
use crate::audio::playback::Clip;
use crate::audio::SAMPLE_RATE;
use crate::cancel::CancelToken;
use crate::tts::speaker::Speaker;
use crate::voice_loop::remote::{Pending, RemoteOutcome, RemotePipeline, RemoteRequest};

/// A request this long after HA's last answer starts a new conversation
/// (ESPHome's `conversation_timeout` default).
pub const CONVERSATION_TIMEOUT: Duration = Duration::from_secs(300);
/// How long HA has to answer a request before the loop answers locally.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);
/// A running pipeline silent this long (no event, no audio) is given up.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(30);
/// After `RUN_END` with a URL and no streamed answer yet, how long to
/// wait for the stream before fetching the URL.
pub const STREAM_GRACE: Duration = Duration::from_millis(500);
/// The largest answer or announcement fetched (about 8 minutes of 16 kHz
/// mono); a larger one is refused unread past the limit.
pub const MAX_MEDIA_BYTES: u64 = 16 << 20;
/// Fetching one answer or announcement, connect to last byte.
pub const MEDIA_TIMEOUT: Duration = Duration::from_secs(15);
/// The most streamed answer kept (5 minutes); the rest is dropped.
const MAX_STREAM_SAMPLES: usize = 5 * 60 * SAMPLE_RATE as usize;
/// Samples per `VoiceAssistantAudio` sent (64 ms).
const CHUNK: usize = 1024;
/// Streamed answer audio is handed to the speaker in pieces this long
/// (0.25 s): short enough to start at once, long enough not to stutter.
const PLAY_PIECE: usize = SAMPLE_RATE as usize / 4;
/// Announcements and chimes waiting for the loop.
const MAX_PENDING: usize = 8;
/// Announcements being fetched at once; more are refused at once.
const MAX_FETCHING: usize = 2;
/// `SubscribeVoiceAssistantRequest.flags`: audio over the API connection.
/// aioesphomeapi (what HA runs) sends `VoiceAssistantSubscriptionFlag.
/// API_AUDIO` = 1 << 2; the proto's `VOICE_ASSISTANT_SUBSCRIBE_API_AUDIO`
/// is 1. Either bit counts.
const SUBSCRIBE_API_AUDIO: u32 = 1 | 1 << 2;
/// How long an abort may wait to be written.
const ABORT_FLUSH: Duration = Duration::from_millis(500);
/// How often the worker looks at its channel and the cancel token.
const POLL: Duration = Duration::from_millis(20);

/// What the connection threads hand a running request.
enum RunEvent {
    Response {
        error: bool,
    },
    Event {
        kind: Option<Ev>,
        data: HashMap<String, String>,
    },
    Audio(Vec<u8>),
    Lost,
}

#[derive(Default)]
struct State {
    /// The connection subscribed with API audio (HA's integration).
    subscriber: Option<Arc<Link>>,
    /// The request under way: its connection and where its events go.
    run: Option<(u64, Sender<RunEvent>)>,
    /// Announcements and chimes for the loop.
    pending: VecDeque<Pending>,
    /// The conversation HA named at the last `INTENT_END`, and when; it
    /// is forgotten after [`CONVERSATION_TIMEOUT`] (as firmware does).
    conversation: Option<(String, Instant)>,
}

/// The satellite: the server's [`Voice`] and the loop's
/// [`RemotePipeline`].
pub struct Satellite {
    state: Mutex<State>,
    agent: ureq::Agent,
    /// Announcements being fetched.
    fetching: std::sync::atomic::AtomicUsize,
}

/// Why an answer or announcement could not be played (one log line).
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("not an http(s) URL")]
    Url,
    #[error("{0}")]
    Http(#[from] crate::http::HttpError),
    #[error("not a WAV file ({content_type}, {bytes} bytes); only WAV plays here")]
    NotWav { content_type: String, bytes: usize },
    #[error("an unreadable WAV: {0}")]
    BadWav(String),
}

impl Satellite {
    pub fn new() -> Arc<Satellite> {
        let agent = crate::http::HttpSettings {
            connect_timeout: Some(Duration::from_secs(3)),
            ..crate::http::HttpSettings::with_deadline(MEDIA_TIMEOUT)
        }
        .agent();
        Arc::new(Satellite {
            state: Mutex::default(),
            agent,
            fetching: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hand a message to the request under way on `link`, if any.
    fn forward(&self, link: &Link, event: RunEvent) {
        let tx = match &self.state().run {
            Some((id, tx)) if *id == link.id() => tx.clone(),
            _ => {
                tracing::debug!("esphome satellite: no request under way; message dropped");
                return;
            }
        };
        if tx.try_send(event).is_err() {
            tracing::warn!(
                "esphome satellite: the request is not keeping up; a message was dropped"
            );
        }
    }

    fn queue(&self, item: Pending) {
        let mut state = self.state();
        if state.pending.len() >= MAX_PENDING {
            drop(state);
            tracing::warn!(what = %item.label, "esphome satellite: too much waiting to play; dropped");
            if let Some(done) = item.done {
                done(false);
            }
            return;
        }
        state.pending.push_back(item);
    }

    /// An announcement: fetched here (its own thread), played by the loop.
    fn announce(self: &Arc<Self>, link: &Arc<Link>, request: pb::VoiceAssistantAnnounceRequest) {
        use std::sync::atomic::Ordering;
        let refuse = |link: &Link, why: &str| {
            tracing::warn!("esphome satellite: an announcement is not played: {why}");
            let _ = link.try_send(
                ids::VOICE_ASSISTANT_ANNOUNCE_FINISHED,
                &pb::VoiceAssistantAnnounceFinished { success: false },
            );
        };
        if self.fetching.fetch_add(1, Ordering::SeqCst) >= MAX_FETCHING {
            self.fetching.fetch_sub(1, Ordering::SeqCst);
            refuse(link, "too many at once");
            return;
        }
        let me = Arc::clone(self);
        let link = Arc::clone(link);
        let refused = Arc::clone(&link);
        let spawned = std::thread::Builder::new()
            .name("esphome-announce".into())
            .spawn(move || {
                me.prepare(&link, request);
                me.fetching.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            self.fetching.fetch_sub(1, Ordering::SeqCst);
            refuse(&refused, "no thread for it");
        }
    }

    /// Fetch an announcement's media and queue it for the loop (or answer
    /// that it failed).
    fn prepare(&self, link: &Arc<Link>, request: pb::VoiceAssistantAnnounceRequest) {
        if request.start_conversation {
            tracing::info!(
                "esphome satellite: an announcement that starts a conversation is played only"
            );
        }
        let mut clips = Vec::new();
        if !request.preannounce_media_id.is_empty() {
            match self.fetch(&request.preannounce_media_id) {
                Ok(clip) => clips.push(clip),
                Err(e) => tracing::warn!(
                    "esphome satellite: the announcement's chime from {} is not played: {e}",
                    origin(&request.preannounce_media_id)
                ),
            }
        }
        let mut text = String::new();
        if !request.media_id.is_empty() {
            match self.fetch(&request.media_id) {
                Ok(clip) => clips.push(clip),
                Err(e) => {
                    tracing::warn!(
                        "esphome satellite: cannot play the announcement from {}: {e}{}",
                        origin(&request.media_id),
                        if request.text.is_empty() {
                            ""
                        } else {
                            "; saying its text"
                        }
                    );
                    text = request.text.clone();
                }
            }
        } else {
            text = request.text.clone();
        }
        let finished = Arc::clone(link);
        let done = Box::new(move |success: bool| {
            let reply = pb::VoiceAssistantAnnounceFinished { success };
            if let Err(e) = finished.try_send(ids::VOICE_ASSISTANT_ANNOUNCE_FINISHED, &reply) {
                tracing::warn!("esphome satellite: announcement finished, not told: {e}");
            }
        });
        if clips.is_empty() && text.trim().is_empty() {
            done(false);
            return;
        }
        tracing::info!("esphome satellite: announcement ready");
        self.queue(Pending {
            label: "announcement".into(),
            clips,
            text,
            done: Some(done),
        });
    }

    /// GET a WAV (bounded) as a clip.
    pub fn fetch(&self, url: &str) -> Result<Clip, MediaError> {
        fetch_wav(&self.agent, url)
    }

    fn take_run(&self) {
        self.state().run = None;
    }
}

/// `scheme://host:port` of a URL, for the log (HA's media paths carry
/// tokens).
fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or(host);
    if scheme.is_empty() {
        "a URL that is not http(s)".into()
    } else {
        format!("{scheme}://{host}")
    }
}

/// GET `url` within [`MAX_MEDIA_BYTES`] and [`MEDIA_TIMEOUT`]; a WAV
/// becomes a 16 kHz mono clip.
fn fetch_wav(agent: &ureq::Agent, url: &str) -> Result<Clip, MediaError> {
    let lower = url.to_ascii_lowercase();
    if !lower.starts_with("http://") && !lower.starts_with("https://") {
        return Err(MediaError::Url);
    }
    let response = agent
        .get(url)
        .call()
        .map_err(crate::http::HttpError::from)?;
    let reply = crate::http::read_reply(response, MAX_MEDIA_BYTES)?.error_for_status()?;
    let body = &reply.body;
    if body.len() < 12 || &body[..4] != b"RIFF" || &body[8..12] != b"WAVE" {
        return Err(MediaError::NotWav {
            content_type: if reply.head.content_type.is_empty() {
                "no content type".into()
            } else {
                reply.head.content_type.chars().take(60).collect()
            },
            bytes: body.len(),
        });
    }
    let (samples, _) = crate::audio::wav::read_from(
        std::io::Cursor::new(body.as_slice()),
        std::path::Path::new("the answer"),
        None,
    )
    .map_err(|e| MediaError::BadWav(e.to_string()))?;
    Ok(Clip::new(samples, SAMPLE_RATE))
}

fn decode<M: Message + Default>(kind: u32, payload: &[u8]) -> Result<M, FrameError> {
    M::decode(payload).map_err(|e| {
        FrameError::Handshake(format!(
            "a {} that does not decode: {e}",
            ids::name(kind).unwrap_or("message")
        ))
    })
}

/// The `Voice` side needs the `Arc` (announcements run on their own
/// thread); the server holds it as `Arc<dyn Voice>`.
pub struct SatelliteVoice(pub Arc<Satellite>);

impl Voice for SatelliteVoice {
    fn message(&self, link: &Arc<Link>, kind: u32, payload: &[u8]) -> Result<bool, FrameError> {
        let sat = &self.0;
        match kind {
            ids::SUBSCRIBE_VOICE_ASSISTANT_REQUEST => {
                let msg: pb::SubscribeVoiceAssistantRequest = decode(kind, payload)?;
                let mut state = sat.state();
                if msg.subscribe && msg.flags & SUBSCRIBE_API_AUDIO != 0 {
                    state.subscriber = Some(Arc::clone(link));
                    drop(state);
                    tracing::info!(
                        peer = %link.peer(),
                        "esphome satellite: Home Assistant subscribed; requests go to its pipeline"
                    );
                } else if msg.subscribe {
                    drop(state);
                    tracing::warn!("esphome satellite: Home Assistant asked for audio over UDP; earshot sends it over the API only, so requests stay local");
                } else if state
                    .subscriber
                    .as_ref()
                    .is_some_and(|s| s.id() == link.id())
                {
                    state.subscriber = None;
                    drop(state);
                    tracing::info!(
                        "esphome satellite: Home Assistant unsubscribed; answering locally"
                    );
                }
            }
            ids::VOICE_ASSISTANT_RESPONSE => {
                let msg: pb::VoiceAssistantResponse = decode(kind, payload)?;
                sat.forward(link, RunEvent::Response { error: msg.error });
            }
            ids::VOICE_ASSISTANT_EVENT_RESPONSE => {
                let msg: pb::VoiceAssistantEventResponse = decode(kind, payload)?;
                let data = msg
                    .data
                    .into_iter()
                    .take(32)
                    .map(|d| (d.name, d.value))
                    .collect();
                let kind = Ev::try_from(msg.event_type).ok();
                sat.forward(link, RunEvent::Event { kind, data });
            }
            ids::VOICE_ASSISTANT_AUDIO => {
                let msg: pb::VoiceAssistantAudio = decode(kind, payload)?;
                sat.forward(link, RunEvent::Audio(msg.data));
            }
            ids::VOICE_ASSISTANT_ANNOUNCE_REQUEST => {
                let msg: pb::VoiceAssistantAnnounceRequest = decode(kind, payload)?;
                sat.announce(link, msg);
            }
            ids::VOICE_ASSISTANT_TIMER_EVENT_RESPONSE => {
                let msg: pb::VoiceAssistantTimerEventResponse = decode(kind, payload)?;
                let event = VoiceAssistantTimerEvent::try_from(msg.event_type).ok();
                tracing::info!(?event, name = %msg.name, "esphome satellite: Home Assistant timer");
                if event == Some(VoiceAssistantTimerEvent::VoiceAssistantTimerFinished) {
                    let name: String = msg.name.chars().take(60).collect();
                    sat.queue(Pending {
                        label: "timer".into(),
                        clips: vec![crate::voice_loop::ring::chime(SAMPLE_RATE)],
                        text: if name.trim().is_empty() {
                            "Your timer is done.".into()
                        } else {
                            format!("The {} timer is done.", name.trim())
                        },
                        done: None,
                    });
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn closed(&self, link: &Arc<Link>) {
        let mut state = self.0.state();
        if state
            .subscriber
            .as_ref()
            .is_some_and(|s| s.id() == link.id())
        {
            state.subscriber = None;
            tracing::info!("esphome satellite: Home Assistant disconnected; answering locally");
        }
        if let Some((id, tx)) = &state.run {
            if *id == link.id() {
                let _ = tx.try_send(RunEvent::Lost);
            }
        }
    }
}

/// Clears the request under way however `run` ends.
struct RunGuard<'a>(&'a Satellite);

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        self.0.take_run();
    }
}

/// What one request has seen so far.
#[derive(Default)]
struct Run {
    heard: String,
    answer: String,
    url: Option<String>,
    url_played: bool,
    streaming: bool,
    stream_done: bool,
    stream: Vec<i16>,
    streamed: usize,
    played: bool,
    vad_end: bool,
    error: bool,
    run_end: Option<Instant>,
    lost: bool,
    /// `INTENT_END`'s `continue_conversation`: HA expects a reply.
    continue_conversation: bool,
}

impl Run {
    /// Take in one message; audio goes to the speaker as it comes.
    fn take(&mut self, sat: &Satellite, event: RunEvent, speaker: &Speaker) {
        match event {
            RunEvent::Response { .. } => {}
            RunEvent::Lost => self.lost = true,
            RunEvent::Audio(bytes) => {
                if !self.streaming {
                    tracing::debug!("esphome satellite: audio outside a stream; dropped");
                    return;
                }
                let room = MAX_STREAM_SAMPLES.saturating_sub(self.streamed + self.stream.len());
                let samples = bytes
                    .chunks_exact(2)
                    .map(|b| i16::from_le_bytes([b[0], b[1]]))
                    .take(room);
                self.stream.extend(samples);
                if self.stream.len() >= PLAY_PIECE {
                    self.flush(speaker);
                }
            }
            RunEvent::Event { kind, data } => {
                let get = |k: &str| data.get(k).cloned().unwrap_or_default();
                match kind {
                    Some(Ev::VoiceAssistantSttVadEnd) => self.vad_end = true,
                    Some(Ev::VoiceAssistantSttEnd) => self.heard = get("text"),
                    Some(Ev::VoiceAssistantIntentEnd) => {
                        self.continue_conversation = get("continue_conversation") == "1";
                        let id = get("conversation_id");
                        if !id.is_empty() && id.len() <= 200 {
                            sat.state().conversation = Some((id, Instant::now()));
                        }
                    }
                    Some(Ev::VoiceAssistantTtsStart) => self.answer = get("text"),
                    Some(Ev::VoiceAssistantTtsEnd) => {
                        let url = get("url");
                        self.url = (!url.is_empty()).then_some(url);
                    }
                    Some(Ev::VoiceAssistantTtsStreamStart) => self.streaming = true,
                    Some(Ev::VoiceAssistantTtsStreamEnd) => {
                        self.flush(speaker);
                        self.stream_done = true;
                    }
                    Some(Ev::VoiceAssistantError) => {
                        tracing::warn!(
                            code = %get("code"),
                            message = %get("message"),
                            "esphome satellite: Home Assistant's pipeline failed"
                        );
                        if !self.error {
                            self.error = true;
                            speaker.say("Sorry, Home Assistant couldn't do that.");
                            self.played = true;
                        }
                    }
                    Some(Ev::VoiceAssistantRunEnd) => self.run_end = Some(Instant::now()),
                    other => tracing::debug!(?other, "esphome satellite: event"),
                }
            }
        }
    }

    /// Hand the streamed audio so far to the speaker.
    fn flush(&mut self, speaker: &Speaker) {
        if self.stream.is_empty() {
            return;
        }
        self.streamed += self.stream.len();
        let samples = crate::audio::to_f32(&std::mem::take(&mut self.stream));
        speaker.play("home assistant", Clip::new(samples, SAMPLE_RATE));
        self.played = true;
    }

    /// Whether HA is done: the run ended and its answer, streamed or at a
    /// URL, is with the speaker.
    fn finished(&self) -> bool {
        if self.lost {
            return true;
        }
        if self.run_end.is_none() || (self.streaming && !self.stream_done) {
            return false;
        }
        self.url.is_none() || self.url_played || self.streamed > 0
    }

    /// Past `RUN_END` with a URL and no streamed answer (none came, or HA
    /// could not stream it): time to fetch the URL.
    fn url_due(&self) -> bool {
        let no_stream = !self.streaming || (self.stream_done && self.streamed == 0);
        no_stream
            && !self.url_played
            && self.url.is_some()
            && self.run_end.is_some_and(|t| t.elapsed() >= STREAM_GRACE)
    }
}

impl Satellite {
    /// Send a message on the request's connection; false when it failed
    /// (logged).
    fn send<M: Message>(link: &Link, kind: u32, msg: &M) -> bool {
        match link.send(kind, msg) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("esphome satellite: cannot reach Home Assistant: {e}");
                false
            }
        }
    }

    /// Tell HA to abort the request (what firmware sends when stopped),
    /// and give it a moment to leave: this may be the last word before
    /// the process exits (SIGTERM).
    fn abort(link: &Link) {
        let stop = pb::VoiceAssistantRequest {
            start: false,
            ..Default::default()
        };
        if link.try_send(ids::VOICE_ASSISTANT_REQUEST, &stop).is_ok() {
            link.wait_written(ABORT_FLUSH);
        }
    }

    fn drive(
        &self,
        link: &Link,
        rx: &Receiver<RunEvent>,
        request: RemoteRequest<'_>,
        conversation_id: String,
        speaker: &Speaker,
        cancel: &CancelToken,
    ) -> RemoteOutcome {
        let start = pb::VoiceAssistantRequest {
            start: true,
            conversation_id,
            flags: 0,
            audio_settings: Some(pb::VoiceAssistantAudioSettings {
                noise_suppression_level: 0,
                auto_gain: 0,
                volume_multiplier: 1.0,
            }),
            wake_word_phrase: request.wake_word.unwrap_or_default().to_string(),
        };
        if !Self::send(link, ids::VOICE_ASSISTANT_REQUEST, &start) {
            return RemoteOutcome::Declined("Home Assistant's connection failed".into());
        }
        // HA's answer (events that come first are kept for later).
        let asked = Instant::now();
        let mut early = Vec::new();
        loop {
            if cancel.is_cancelled() {
                Self::abort(link);
                return RemoteOutcome::Declined("cancelled".into());
            }
            match rx.recv_timeout(POLL) {
                Ok(RunEvent::Response { error: false }) => break,
                Ok(RunEvent::Response { error: true }) => {
                    return RemoteOutcome::Declined(
                        "Home Assistant could not start its pipeline".into(),
                    )
                }
                Ok(RunEvent::Lost) => {
                    return RemoteOutcome::Declined("Home Assistant disconnected".into())
                }
                Ok(other) => early.push(other),
                Err(_) if asked.elapsed() >= RESPONSE_TIMEOUT => {
                    Self::abort(link);
                    return RemoteOutcome::Declined(format!(
                        "Home Assistant did not answer the request in {} s",
                        RESPONSE_TIMEOUT.as_secs()
                    ));
                }
                Err(_) => {}
            }
        }
        tracing::info!(
            ms = asked.elapsed().as_millis() as u64,
            "esphome satellite: Home Assistant took the request"
        );
        let mut run = Run::default();
        for event in early {
            run.take(self, event, speaker);
        }
        // The utterance, cut short when HA's own VAD has heard the end.
        let mut sent = 0usize;
        for chunk in request.samples.chunks(CHUNK) {
            while let Ok(event) = rx.try_recv() {
                run.take(self, event, speaker);
            }
            if cancel.is_cancelled() {
                Self::abort(link);
                return self.outcome(run);
            }
            if run.vad_end || run.error || run.lost || run.run_end.is_some() {
                break;
            }
            let data: Vec<u8> = chunk.iter().flat_map(|s| s.to_le_bytes()).collect();
            if !Self::send(
                link,
                ids::VOICE_ASSISTANT_AUDIO,
                &pb::VoiceAssistantAudio {
                    data,
                    end: false,
                    ..Default::default()
                },
            ) {
                return self.outcome(run);
            }
            sent += chunk.len();
        }
        if !run.lost && !run.error && run.run_end.is_none() {
            Self::send(
                link,
                ids::VOICE_ASSISTANT_AUDIO,
                &pb::VoiceAssistantAudio {
                    end: true,
                    ..Default::default()
                },
            );
        }
        tracing::info!(
            ms = sent as u64 * 1000 / u64::from(SAMPLE_RATE),
            "esphome satellite: utterance sent"
        );
        // HA's events until its run ends and the answer is playing.
        let mut last = Instant::now();
        while !run.finished() {
            if cancel.is_cancelled() {
                Self::abort(link);
                return self.outcome(run);
            }
            if run.url_due() {
                let url = run.url.clone().unwrap_or_default();
                run.url_played = true;
                match self.fetch(&url) {
                    Ok(clip) => {
                        speaker.play("home assistant", clip);
                        run.played = true;
                    }
                    Err(e) => tracing::warn!(
                        "esphome satellite: cannot play the answer from {}: {e}",
                        origin(&url)
                    ),
                }
                continue;
            }
            match rx.recv_timeout(POLL) {
                Ok(event) => {
                    last = Instant::now();
                    run.take(self, event, speaker);
                }
                Err(_) if last.elapsed() >= EVENT_TIMEOUT => {
                    tracing::warn!(
                        "esphome satellite: Home Assistant went silent for {} s mid-request; giving up",
                        EVENT_TIMEOUT.as_secs()
                    );
                    Self::abort(link);
                    speaker.say("Sorry, Home Assistant stopped answering.");
                    run.played = true;
                    break;
                }
                Err(_) => {}
            }
        }
        if run.lost && run.run_end.is_none() {
            tracing::warn!("esphome satellite: Home Assistant disconnected mid-request");
        }
        // The answer plays to its end (or until the loop cancels).
        while speaker.is_speaking() && !cancel.is_cancelled() {
            std::thread::sleep(POLL);
        }
        if run.played && !cancel.is_cancelled() && !run.lost {
            let _ = link.try_send(
                ids::VOICE_ASSISTANT_ANNOUNCE_FINISHED,
                &pb::VoiceAssistantAnnounceFinished { success: true },
            );
        }
        self.outcome(run)
    }

    fn outcome(&self, run: Run) -> RemoteOutcome {
        RemoteOutcome::Handled {
            heard: run.heard,
            answer: run.answer,
            follow_up: run.continue_conversation && !run.error && !run.lost,
        }
    }
}

impl RemotePipeline for Satellite {
    fn ready(&self) -> bool {
        let state = self.state();
        state.run.is_none() && state.subscriber.as_ref().is_some_and(|l| !l.is_closed())
    }

    fn run(
        &self,
        request: RemoteRequest<'_>,
        speaker: &Speaker,
        cancel: &CancelToken,
    ) -> RemoteOutcome {
        let (link, rx, conversation_id) = {
            let mut state = self.state();
            let Some(link) = state.subscriber.clone().filter(|l| !l.is_closed()) else {
                return RemoteOutcome::Declined("Home Assistant is not connected".into());
            };
            if state.run.is_some() {
                return RemoteOutcome::Declined("a request is already with Home Assistant".into());
            }
            let (tx, rx) = crossbeam_channel::bounded(4096);
            state.run = Some((link.id(), tx));
            let conversation = state
                .conversation
                .as_ref()
                .filter(|(_, at)| at.elapsed() < CONVERSATION_TIMEOUT)
                .map(|(id, _)| id.clone())
                .unwrap_or_default();
            (link, rx, conversation)
        };
        let _guard = RunGuard(self);
        self.drive(&link, &rx, request, conversation_id, speaker, cancel)
    }

    fn take_pending(&self) -> Option<Pending> {
        self.state().pending.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_sees_only_the_origin_of_a_media_url() {
        assert_eq!(
            origin("http://ha.local:8123/api/tts_proxy/SECRETTOKEN.wav?x=1"),
            "http://ha.local:8123"
        );
        assert_eq!(origin("https://u:p@host/x"), "https://host");
        assert_eq!(origin("media-source://tts/x"), "media-source://tts");
        assert_eq!(origin("nonsense"), "a URL that is not http(s)");
    }

    #[test]
    fn a_url_that_is_not_http_is_refused_before_any_request() {
        let agent = crate::http::HttpSettings::with_deadline(Duration::from_secs(1)).agent();
        assert!(matches!(
            fetch_wav(&agent, "media-source://tts/abc"),
            Err(MediaError::Url)
        ));
    }

    #[test]
    fn an_answer_waits_for_its_stream_or_its_url() {
        let mut run = Run::default();
        assert!(!run.finished());
        run.run_end = Some(Instant::now());
        assert!(run.finished(), "no answer at all: done at RUN_END");
        run.url = Some("http://x/a.wav".into());
        assert!(
            !run.finished() && !run.url_due(),
            "the stream may still come"
        );
        run.run_end = Some(Instant::now() - STREAM_GRACE);
        assert!(run.url_due());
        run.streaming = true;
        assert!(
            !run.url_due() && !run.finished(),
            "streaming: the URL waits"
        );
        run.stream_done = true;
        assert!(run.url_due(), "an empty stream: the URL is played");
        run.streamed = 100;
        assert!(
            !run.url_due() && run.finished(),
            "streamed: the URL is not fetched"
        );
    }
}
