//! earshot as the host of ESPHome voice devices (`[[esphome.devices]]`):
//! it connects to each as Home Assistant does and answers its voice
//! assistant requests with its own pipeline.
//!
//! Per device, one thread: dial (`connect_timeout_ms`), the Noise
//! handshake when the device has a key, `HelloRequest`, the password when
//! set, `DeviceInfoRequest` (the voice assistant feature flag must be
//! set), `SubscribeVoiceAssistantRequest` with API audio. Then for each
//! `VoiceAssistantRequest`: `VoiceAssistantResponse` (audio over the API),
//! the pipeline events the firmware expects — run start, STT start, VAD
//! start/end, STT end (the text), intent start/end, TTS start/end (the
//! answer audio URL from [`super::audio_url`]), run end — with `error`
//! events for what fails. The audio is endpointed with earshot's VAD
//! (`audio.vad`, its `max_utterance_ms` bounding a device that streams
//! forever), transcribed, and the turn runs in the device's own
//! conversation (kept across reconnects).
//!
//! A device that is off, stalls mid-request (`request_timeout_ms`), or
//! sends garbage gets one log line (`esphome ADDR: lost: …; retrying in N
//! ms`) and a reconnect with doubling backoff; other devices and the local
//! microphone never wait on it (each has its own thread; the STT and the
//! TTS chain are shared the same way as the Wyoming satellites').

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prost::Message;

use super::audio_url::{self, AudioUrls};
use super::frame::FrameError;
use super::messages::{self as pb, ids, VoiceAssistantEvent as Ev};
use super::noise::{self, Codec};
use super::server::{features, API_VERSION};
use super::{DeviceEntry, EsphomeConfig};
use crate::agent::turn::{run_turn, TurnInput};
use crate::agent::Services;
use crate::audio::vad::{Endpointer, VadConfig, VadEvent};
use crate::cancel::CancelToken;
use crate::events::CollectSink;
use crate::stt::Stt;
use crate::tts::{Synthesizer, Tts};
use crate::wyoming::satellite::SharedTts;

/// A request in which nobody speaks ends after this much audio.
const NO_SPEECH_MS: u32 = 15_000;
/// How long the hello and device info may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Between requests the connection is pinged after this much silence.
const PING_AFTER: Duration = Duration::from_secs(20);
/// Samples per streamed answer chunk (32 ms at 16 kHz).
const STREAM_CHUNK: usize = 512;
/// `SubscribeVoiceAssistantRequest` flags: audio over the API connection.
/// The proto's `VOICE_ASSISTANT_SUBSCRIBE_API_AUDIO` is 1, while Home
/// Assistant's client (aioesphomeapi `VoiceAssistantSubscriptionFlag`)
/// sends 1 << 2; both bits are set so firmware reading either sees it.
const SUBSCRIBE_API_AUDIO: u32 = 1 | 1 << 2;

/// Why a device's connection ended (logged once, then a reconnect).
#[derive(Debug, thiserror::Error)]
enum Lost {
    #[error("{0}")]
    Frame(#[from] FrameError),
    #[error("{0}")]
    Device(String),
    #[error("stopping")]
    Shutdown,
}

/// The running device threads. Devices can be added while it runs
/// ([`EsphomeHosts::add`]: mDNS discovery); every one shares the same
/// services, voice chain and answer-audio listener.
pub struct EsphomeHosts {
    shared: Option<Arc<Shared>>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// mDNS discovery (`[esphome] discover`); dropping it stops browsing.
    _discovery: Option<super::discover::Discovery>,
}

/// What every device thread shares.
struct Shared {
    cfg: EsphomeConfig,
    vad: VadConfig,
    services: Services,
    stt: Stt,
    tts: SharedTts,
    urls: AudioUrls,
    shutdown: CancelToken,
    /// Where each named device is dialled now (lower-cased name → the
    /// address its thread reads at every reconnect): a device discovery
    /// finds again at a new address (DHCP) moves, no second thread.
    addresses: Mutex<HashMap<String, Arc<Mutex<String>>>>,
}

impl EsphomeHosts {
    /// Start one thread per `[[esphome.devices]]` entry. With no device
    /// and no `discover`, nothing starts (no listener). `tts` builds the
    /// shared voice chain, only when a device may come.
    pub fn start(
        services: &Services,
        stt: &Stt,
        tts: &dyn Fn() -> Tts,
        cfg: &EsphomeConfig,
        vad: &VadConfig,
        shutdown: &CancelToken,
    ) -> Result<EsphomeHosts, String> {
        if cfg.devices.is_empty() && !cfg.discover {
            return Ok(EsphomeHosts {
                shared: None,
                threads: Arc::default(),
                _discovery: None,
            });
        }
        let urls = AudioUrls::start(&cfg.audio_bind, shutdown)?;
        let shared = Arc::new(Shared {
            cfg: cfg.clone(),
            vad: vad.clone(),
            services: services.clone(),
            stt: stt.clone(),
            tts: SharedTts::new(tts()),
            urls,
            shutdown: shutdown.clone(),
            addresses: Mutex::default(),
        });
        let mut hosts = EsphomeHosts {
            shared: Some(shared.clone()),
            threads: Arc::default(),
            _discovery: None,
        };
        for (i, device) in cfg.devices.iter().enumerate() {
            if device.address.trim().is_empty() {
                // A name-only entry: the key of a device discovery finds.
                continue;
            }
            hosts
                .add(device.clone())
                .map_err(|e| format!("esphome.devices[{i}]: {e}"))?;
        }
        if cfg.discover {
            let threads = hosts.threads.clone();
            let add: super::discover::AddDevice =
                Box::new(move |entry| spawn(&shared, &threads, entry));
            hosts._discovery = Some(super::discover::start(cfg, shutdown, add)?);
        }
        tracing::info!(count = hosts.len(), "esphome device hosts started");
        Ok(hosts)
    }

    /// Start driving one more device (its own reconnecting thread).
    /// Errors: a key that does not decode, no thread, or no hosts running.
    pub fn add(&self, entry: DeviceEntry) -> Result<(), String> {
        let Some(shared) = &self.shared else {
            return Err("ESPHome device hosting is not running".into());
        };
        spawn(shared, &self.threads, entry)
    }

    /// How many devices are driven.
    pub fn len(&self) -> usize {
        self.threads.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no device is driven.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether devices can be added ([`EsphomeHosts::add`]).
    pub fn running(&self) -> bool {
        self.shared.is_some()
    }

    /// Wait for every device thread (after the shutdown token was
    /// cancelled).
    pub fn join(self) {
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

/// Start one device's reconnecting thread.
fn spawn(
    shared: &Arc<Shared>,
    threads: &Mutex<Vec<JoinHandle<()>>>,
    entry: DeviceEntry,
) -> Result<(), String> {
    let key = if entry.encryption_key.trim().is_empty() {
        None
    } else {
        Some(super::decode_key(&entry.encryption_key).map_err(|e| format!("encryption_key: {e}"))?)
    };
    let address = Arc::new(Mutex::new(entry.address.clone()));
    let named = entry.name.trim().to_lowercase();
    if !named.is_empty() {
        let mut addresses = shared.addresses.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(current) = addresses.get(&named) {
            let mut current = current.lock().unwrap_or_else(|p| p.into_inner());
            if *current != entry.address {
                tracing::info!(
                    "esphome {}: {:?} moved to {}",
                    *current,
                    entry.name,
                    entry.address
                );
                *current = entry.address;
            }
            return Ok(());
        }
        addresses.insert(named, address.clone());
    }
    let name = format!("esphome {}", entry.address);
    let host = Device {
        entry,
        key,
        address,
        shared: shared.clone(),
    };
    let thread = std::thread::Builder::new()
        .name(name)
        .spawn(move || host.run())
        .map_err(|e| format!("cannot start an ESPHome device thread: {e}"))?;
    threads
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(thread);
    Ok(())
}

/// One device's reconnecting driver.
struct Device {
    entry: DeviceEntry,
    /// Where it is dialled now (moves when discovery sees it elsewhere).
    address: Arc<Mutex<String>>,
    key: Option<[u8; 32]>,
    shared: Arc<Shared>,
}

impl std::ops::Deref for Device {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.shared
    }
}

/// One live connection.
struct Link {
    stream: TcpStream,
    codec: Codec,
    /// The address of ours the device reached (the answer URL's host).
    local_ip: IpAddr,
    /// The device's voice assistant feature flags (`features::*`).
    flags: u32,
    /// The names the device reported (name, friendly name).
    names: Vec<String>,
}

impl Link {
    fn send<M: Message>(&mut self, kind: u32, msg: &M) -> Result<(), Lost> {
        let bytes = self.codec.encode(kind, &msg.encode_to_vec())?;
        // The device hanging up (mid-request, say) is said as such.
        self.stream.write_all(&bytes).map_err(FrameError::io)?;
        Ok(())
    }

    fn event(&mut self, kind: Ev, data: &[(&str, &str)]) -> Result<(), Lost> {
        let msg = pb::VoiceAssistantEventResponse {
            event_type: kind as i32,
            data: data
                .iter()
                .map(|(name, value)| pb::VoiceAssistantEventData {
                    name: (*name).into(),
                    value: (*value).into(),
                })
                .collect(),
        };
        self.send(ids::VOICE_ASSISTANT_EVENT_RESPONSE, &msg)
    }

    /// The next message, answering pings on the way; a read timeout is
    /// `Ok(None)`.
    fn next(&mut self) -> Result<Option<(u32, Vec<u8>)>, Lost> {
        loop {
            match self.codec.read(&mut self.stream) {
                Ok((ids::PING_REQUEST, _)) => {
                    self.send(ids::PING_RESPONSE, &pb::PingResponse::default())?
                }
                Ok((ids::DISCONNECT_REQUEST, _)) => {
                    let _ = self.send(ids::DISCONNECT_RESPONSE, &pb::DisconnectResponse::default());
                    return Err(Lost::Device("the device said goodbye".into()));
                }
                Ok((kind, _)) if ids::name(kind).is_none() => {
                    return Err(FrameError::Type(u64::from(kind)).into())
                }
                Ok(m) => return Ok(Some(m)),
                Err(e) if e.is_timeout() => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Wait for a message of type `want` within `limit`.
    fn expect(&mut self, want: u32, limit: Duration) -> Result<Vec<u8>, Lost> {
        let deadline = Instant::now() + limit;
        self.stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(FrameError::Io)?;
        loop {
            if let Some((kind, payload)) = self.next()? {
                if kind == want {
                    return Ok(payload);
                }
            }
            if Instant::now() >= deadline {
                return Err(Lost::Device(format!(
                    "no {} within {} s",
                    ids::name(want).unwrap_or("reply"),
                    limit.as_secs()
                )));
            }
        }
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// The firmware's timer event for one of the scheduler's (`None`: nothing
/// to tell the device). Timers, alarms and reminders all ring.
fn timer_event(event: &crate::timers::TimerEvent) -> Option<pb::VoiceAssistantTimerEventResponse> {
    use crate::timers::EventKind;
    use pb::VoiceAssistantTimerEvent as T;
    let (kind, active) = match event.event {
        EventKind::Set => (T::VoiceAssistantTimerStarted, true),
        EventKind::Ringing => (T::VoiceAssistantTimerFinished, false),
        EventKind::Stopped | EventKind::Cancelled => (T::VoiceAssistantTimerCancelled, false),
        EventKind::Missed => return None,
    };
    let left = (event.due.with_timezone(&chrono::Utc) - chrono::Utc::now())
        .num_seconds()
        .max(0);
    let total = event.duration_s.unwrap_or(left).max(0);
    Some(pb::VoiceAssistantTimerEventResponse {
        event_type: kind as i32,
        timer_id: event.id.to_string(),
        name: event.label.clone(),
        total_seconds: u32::try_from(total).unwrap_or(u32::MAX),
        seconds_left: if active {
            u32::try_from(left).unwrap_or(u32::MAX)
        } else {
            0
        },
        is_active: active,
    })
}

fn decode<M: Message + Default>(kind: u32, payload: &[u8]) -> Result<M, Lost> {
    M::decode(payload).map_err(|e| {
        Lost::Device(format!(
            "a {} that does not decode: {e}",
            ids::name(kind).unwrap_or("message")
        ))
    })
}

impl Device {
    fn label(&self) -> String {
        self.address
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn run(self) {
        let min = Duration::from_millis(self.cfg.reconnect_min_ms.max(1));
        let max = Duration::from_millis(self.cfg.reconnect_max_ms).max(min);
        let mut backoff = min;
        let mut conversation: Option<i64> = None;
        while !self.shutdown.is_cancelled() {
            let started = Instant::now();
            let mut served = false;
            let result = self
                .connect()
                .and_then(|link| self.session(link, &mut conversation, &mut served));
            match result {
                Err(Lost::Shutdown) | Ok(()) => break,
                Err(e) => {
                    if served || started.elapsed() >= max {
                        backoff = min;
                    }
                    tracing::warn!(
                        "esphome {}: lost: {e}; retrying in {} ms",
                        self.label(),
                        backoff.as_millis()
                    );
                }
            }
            let until = Instant::now() + backoff;
            while Instant::now() < until {
                if self.shutdown.is_cancelled() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            backoff = (backoff * 2).min(max);
        }
        tracing::debug!("esphome {}: stopped", self.label());
    }

    fn connect(&self) -> Result<Link, Lost> {
        let timeout = Duration::from_millis(self.cfg.connect_timeout_ms.max(1));
        let addr: SocketAddr = self
            .label()
            .to_socket_addrs()
            .map_err(|e| Lost::Device(format!("cannot resolve it: {e}")))?
            .next()
            .ok_or_else(|| Lost::Device("its name has no address".into()))?;
        let mut stream = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| Lost::Device(format!("cannot connect: {e}")))?;
        let _ = stream.set_nodelay(true);
        stream
            .set_write_timeout(Some(Duration::from_millis(
                self.cfg.request_timeout_ms.max(1),
            )))
            .map_err(FrameError::Io)?;
        stream
            .set_read_timeout(Some(SETUP_TIMEOUT))
            .map_err(FrameError::Io)?;
        let local_ip = stream.local_addr().map_err(FrameError::Io)?.ip();
        let codec = match &self.key {
            Some(key) => noise::connect(&mut stream, key)?.0,
            None => Codec::plain(),
        };
        let mut link = Link {
            stream,
            codec,
            local_ip,
            flags: 0,
            names: Vec::new(),
        };
        link.send(
            ids::HELLO_REQUEST,
            &pb::HelloRequest {
                client_info: "earshot".into(),
                api_version_major: API_VERSION.0,
                api_version_minor: API_VERSION.1,
            },
        )?;
        link.expect(ids::HELLO_RESPONSE, SETUP_TIMEOUT)?;
        if !self.entry.password.is_empty() {
            link.send(
                ids::AUTHENTICATION_REQUEST,
                &pb::AuthenticationRequest {
                    password: self.entry.password.clone(),
                },
            )?;
        }
        link.send(ids::DEVICE_INFO_REQUEST, &pb::DeviceInfoRequest::default())?;
        let info: pb::DeviceInfoResponse = decode(
            ids::DEVICE_INFO_RESPONSE,
            &link.expect(ids::DEVICE_INFO_RESPONSE, SETUP_TIMEOUT)?,
        )?;
        if info.voice_assistant_feature_flags & features::VOICE_ASSISTANT == 0 {
            return Err(Lost::Device(format!(
                "{:?} has no voice assistant (feature flags 0x{:x})",
                info.name, info.voice_assistant_feature_flags
            )));
        }
        if info.voice_assistant_feature_flags & features::API_AUDIO == 0 {
            return Err(Lost::Device(format!(
                "{:?} cannot send audio over the API (feature flags 0x{:x}); UDP audio is not supported yet",
                info.name, info.voice_assistant_feature_flags
            )));
        }
        link.flags = info.voice_assistant_feature_flags;
        link.names = [info.name.clone(), info.friendly_name.clone()]
            .into_iter()
            .filter(|n| !n.trim().is_empty())
            .collect();
        link.send(
            ids::SUBSCRIBE_VOICE_ASSISTANT_REQUEST,
            &pb::SubscribeVoiceAssistantRequest {
                subscribe: true,
                flags: SUBSCRIBE_API_AUDIO,
            },
        )?;
        tracing::info!(
            "esphome {}: connected to {:?} ({}{})",
            self.label(),
            info.name,
            info.model,
            if link.codec.encrypted() {
                ", encrypted"
            } else {
                ""
            }
        );
        Ok(link)
    }

    fn session(
        &self,
        mut link: Link,
        conversation: &mut Option<i64>,
        served: &mut bool,
    ) -> Result<(), Lost> {
        link.stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(FrameError::Io)?;
        let mut quiet_since = Instant::now();
        // Timers ring on the device: the scheduler's events become the
        // firmware's timer events (it plays its own alarm).
        let timers = self.services.timers.subscribe();
        // Announcements ("tell the kitchen …") reach a device that plays
        // them, under the name it is called by and the names it reports.
        let announcements = (link.flags & features::ANNOUNCE != 0).then(|| {
            let mut names: Vec<&str> = vec![self.entry.name.as_str()];
            names.extend(link.names.iter().map(String::as_str));
            self.services.announcements.register(&names)
        });
        loop {
            for announcement in announcements.iter().flat_map(|r| r.pending()) {
                self.announce(&mut link, &announcement.text)?;
            }
            for event in timers.try_iter() {
                // Only a device that says it has timers gets their events
                // (as Home Assistant checks the TIMERS flag).
                if link.flags & features::TIMERS == 0 {
                    continue;
                }
                if let Some(msg) = timer_event(&event) {
                    tracing::info!(
                        "esphome {}: timer {} {:?}",
                        self.label(),
                        event.id,
                        pb::VoiceAssistantTimerEvent::try_from(msg.event_type)
                            .map(|e| e.as_str_name())
                            .unwrap_or("?")
                    );
                    link.send(ids::VOICE_ASSISTANT_TIMER_EVENT_RESPONSE, &msg)?;
                }
            }
            if self.shutdown.is_cancelled() {
                let _ = link.send(ids::DISCONNECT_REQUEST, &pb::DisconnectRequest::default());
                return Err(Lost::Shutdown);
            }
            let Some((kind, payload)) = link.next()? else {
                if quiet_since.elapsed() >= PING_AFTER {
                    link.send(ids::PING_REQUEST, &pb::PingRequest::default())?;
                    quiet_since = Instant::now();
                }
                continue;
            };
            quiet_since = Instant::now();
            if kind == ids::VOICE_ASSISTANT_REQUEST {
                let request: pb::VoiceAssistantRequest = decode(kind, &payload)?;
                if request.start {
                    self.request(&mut link, conversation)?;
                    *served = true;
                    link.stream
                        .set_read_timeout(Some(Duration::from_millis(200)))
                        .map_err(FrameError::Io)?;
                }
            }
            if kind == ids::VOICE_ASSISTANT_ANNOUNCE_FINISHED {
                let done: pb::VoiceAssistantAnnounceFinished = decode(kind, &payload)?;
                tracing::info!(
                    "esphome {}: announcement {}",
                    self.label(),
                    if done.success { "played" } else { "not played" }
                );
            }
            // Anything else between requests (late audio, timer
            // acknowledgements) needs no answer.
        }
    }

    /// One voice assistant request, from `VoiceAssistantResponse` to run
    /// end. A failure inside the pipeline is an `error` event and the
    /// connection stays; a failed write or a stalled device loses it.
    fn request(&self, link: &mut Link, conversation: &mut Option<i64>) -> Result<(), Lost> {
        link.send(
            ids::VOICE_ASSISTANT_RESPONSE,
            &pb::VoiceAssistantResponse {
                port: 0,
                error: false,
            },
        )?;
        link.event(Ev::VoiceAssistantRunStart, &[])?;
        link.event(Ev::VoiceAssistantSttStart, &[])?;
        let utterance = match self.listen(link)? {
            Some(u) => u,
            None => {
                link.event(
                    Ev::VoiceAssistantError,
                    &[
                        ("code", "stt-no-text-recognized"),
                        ("message", "No speech was heard"),
                    ],
                )?;
                return link.event(Ev::VoiceAssistantRunEnd, &[]);
            }
        };
        let audio_end = utterance.decided_at;
        link.event(Ev::VoiceAssistantSttVadEnd, &[])?;
        let stt_started = Instant::now();
        let transcript = self.stt.transcribe(&utterance.to_f32());
        let stt_ms = ms(stt_started);
        let text = match transcript {
            Ok(t) if !t.no_speech && !t.text.trim().is_empty() => t.text,
            Ok(_) => {
                link.event(
                    Ev::VoiceAssistantError,
                    &[
                        ("code", "stt-no-text-recognized"),
                        ("message", "No words were heard"),
                    ],
                )?;
                return link.event(Ev::VoiceAssistantRunEnd, &[]);
            }
            Err(e) => {
                tracing::warn!("esphome {}: speech-to-text failed: {e}", self.label());
                link.event(
                    Ev::VoiceAssistantError,
                    &[
                        ("code", "stt-stream-failed"),
                        ("message", e.user_sentence()),
                    ],
                )?;
                return link.event(Ev::VoiceAssistantRunEnd, &[]);
            }
        };
        tracing::info!("esphome {}: heard: {text}", self.label());
        link.event(Ev::VoiceAssistantSttEnd, &[("text", &text)])?;
        link.event(Ev::VoiceAssistantIntentStart, &[])?;
        let mut input = TurnInput::text(text.clone());
        input.source = "esphome".into();
        input.conversation_id = *conversation;
        input
            .extra
            .insert("esphome_device".into(), serde_json::json!(self.label()));
        let mut sink = CollectSink::default();
        let turn_started = Instant::now();
        let outcome = run_turn(&self.services, input, &mut sink, &self.shutdown);
        let turn_ms = ms(turn_started);
        if outcome.ok {
            *conversation = outcome.conversation_id;
        }
        let conv = conversation.map(|c| c.to_string()).unwrap_or_default();
        link.event(Ev::VoiceAssistantIntentEnd, &[("conversation_id", &conv)])?;
        let answer = outcome.response.clone();
        link.event(Ev::VoiceAssistantTtsStart, &[("text", &answer)])?;
        let mut tts = self.tts.clone();
        let tts_started = Instant::now();
        match tts.synthesize(&answer) {
            Ok(clip) => {
                let tts_ms = ms(tts_started);
                let url = self.urls.publish(
                    link.local_ip,
                    audio_url::wav(&clip.samples, clip.sample_rate),
                );
                link.event(Ev::VoiceAssistantTtsEnd, &[("url", &url)])?;
                let total = ms(audio_end);
                // A device with its own speaker takes the answer over the
                // API as well (as Home Assistant sends it), the URL being
                // the fallback it may ignore.
                if link.flags & features::SPEAKER != 0 {
                    self.stream_answer(link, &clip.samples, clip.sample_rate)?;
                }
                // What the protocol layer added: everything but the three
                // engines (events, framing, encryption, the URL).
                let protocol = total - stt_ms - turn_ms - tts_ms;
                tracing::info!(
                    "esphome {}: answered {:?}; audio URL sent {total:.0} ms after the end of speech (stt {stt_ms:.0}, turn {turn_ms:.0}, tts {tts_ms:.0}, protocol {protocol:.1} ms)",
                    self.label(),
                    answer,
                );
            }
            Err(e) => {
                tracing::warn!("esphome {}: could not speak the answer: {e}", self.label());
                link.event(
                    Ev::VoiceAssistantError,
                    &[
                        ("code", "tts-failed"),
                        ("message", "The answer could not be spoken"),
                    ],
                )?;
            }
        }
        link.event(Ev::VoiceAssistantRunEnd, &[])
    }

    /// Play an announcement on the device: the sentence in earshot's voice
    /// at a single-use URL, in `VoiceAssistantAnnounceRequest` (the device
    /// answers `VoiceAssistantAnnounceFinished` later; the session logs
    /// it). A voice that fails is one log line; the connection stays.
    fn announce(&self, link: &mut Link, text: &str) -> Result<(), Lost> {
        let mut tts = self.tts.clone();
        match tts.synthesize(text) {
            Ok(clip) => {
                let url = self.urls.publish(
                    link.local_ip,
                    audio_url::wav(&clip.samples, clip.sample_rate),
                );
                tracing::info!("esphome {}: announcing {text:?}", self.label());
                link.send(
                    ids::VOICE_ASSISTANT_ANNOUNCE_REQUEST,
                    &pb::VoiceAssistantAnnounceRequest {
                        media_id: url,
                        text: text.to_string(),
                        preannounce_media_id: String::new(),
                        start_conversation: false,
                    },
                )
            }
            Err(e) => {
                tracing::warn!(
                    "esphome {}: could not voice the announcement: {e}",
                    self.label()
                );
                Ok(())
            }
        }
    }

    /// The answer over the API: `TTS_STREAM_START`, 16 kHz mono s16le in
    /// 32 ms chunks paced at 0.9× real time (the device's buffer is small;
    /// Home Assistant paces the same), `TTS_STREAM_END`.
    fn stream_answer(&self, link: &mut Link, samples: &[f32], rate: u32) -> Result<(), Lost> {
        let pcm = match crate::audio::resample::to_16k(samples, rate) {
            Ok(s) => crate::audio::to_i16(&s),
            Err(e) => {
                tracing::warn!("esphome {}: cannot stream the answer: {e}", self.label());
                return Ok(());
            }
        };
        link.event(Ev::VoiceAssistantTtsStreamStart, &[])?;
        let started = Instant::now();
        let mut sent = 0usize;
        for chunk in pcm.chunks(STREAM_CHUNK) {
            if self.shutdown.is_cancelled() {
                return Err(Lost::Shutdown);
            }
            link.send(
                ids::VOICE_ASSISTANT_AUDIO,
                &pb::VoiceAssistantAudio {
                    data: chunk.iter().flat_map(|s| s.to_le_bytes()).collect(),
                    end: false,
                    ..Default::default()
                },
            )?;
            sent += chunk.len();
            // Ahead of the device by at most the first chunk's worth.
            let due = Duration::from_secs_f64(0.9 * (sent - chunk.len()) as f64 / 16_000.0);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        link.event(Ev::VoiceAssistantTtsStreamEnd, &[])
    }

    /// The device's audio until the VAD ends the utterance (`None`: it
    /// ended without speech). Silence past `request_timeout_ms` loses the
    /// connection; `max_utterance_ms` bounds a device that streams forever.
    fn listen(&self, link: &mut Link) -> Result<Option<crate::audio::vad::Utterance>, Lost> {
        let limit = Duration::from_millis(self.cfg.request_timeout_ms.max(1));
        link.stream
            .set_read_timeout(Some(limit))
            .map_err(FrameError::Io)?;
        let mut vad = Endpointer::new(&self.vad).map_err(Lost::Device)?;
        let mut speaking = false;
        // No speech at all within this much audio ends the request (a
        // long sentence may run to `max_utterance_ms`; waiting that long
        // for a first word would hold a silent device for a minute and a half).
        let max_silence_samples = 16 * self.vad.max_utterance_ms.min(NO_SPEECH_MS) as usize;
        let mut silent_samples = 0usize;
        loop {
            let Some((kind, payload)) = link.next()? else {
                return Err(Lost::Device(format!(
                    "stalled: no audio for {} s in the middle of a request",
                    limit.as_secs()
                )));
            };
            match kind {
                ids::VOICE_ASSISTANT_AUDIO => {
                    let audio: pb::VoiceAssistantAudio = decode(kind, &payload)?;
                    let samples: Vec<i16> = audio
                        .data
                        .chunks_exact(2)
                        .map(|b| i16::from_le_bytes([b[0], b[1]]))
                        .collect();
                    for event in vad.push(&samples) {
                        match event {
                            VadEvent::SpeechStart { .. } if !speaking => {
                                speaking = true;
                                link.event(Ev::VoiceAssistantSttVadStart, &[])?;
                            }
                            VadEvent::Utterance(u) => return Ok(Some(u)),
                            _ => {}
                        }
                    }
                    if !speaking {
                        silent_samples += samples.len();
                        if silent_samples > max_silence_samples {
                            return Ok(None);
                        }
                    }
                    if audio.end {
                        return Ok(vad.finish());
                    }
                }
                ids::VOICE_ASSISTANT_REQUEST => {
                    let request: pb::VoiceAssistantRequest = decode(kind, &payload)?;
                    if !request.start {
                        return Ok(vad.finish());
                    }
                    // A second start while one runs: ignored (this one
                    // goes on).
                    tracing::info!(
                        "esphome {}: a request while one is running; ignored",
                        self.label()
                    );
                }
                _ => {}
            }
        }
    }
}
