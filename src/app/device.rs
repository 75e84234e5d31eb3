//! The device's life: `earshot run` from loaded config to a clean stop.
//!
//! Start-up order matters and lives here, not in the CLI: with `[esphome]
//! serve`, the ESPHome server binds and answers Home Assistant before
//! anything loads (a taken port or a missing key fails at once); then the
//! speaker (every later failure can then be said out loud), the VAD,
//! STT (warmed in the background), the microphone, the button, the
//! services, the timers (the local ringer subscribes, then the scheduler
//! starts and finds what was missed), the memory worker, the HTTP API
//! and the satellites beside the loop; systemd hears `READY=1` only once models are loaded, and the loop
//! feeds the watchdog every iteration. Shutdown reverses it: the loop
//! stops, satellites and the API drain, in-flight turns finish.

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::audio::playback::{self, AudioSink, NullSink};
use crate::audio::vad::Endpointer;
use crate::cancel::CancelToken;
use crate::config::Config;
use crate::device::button;
use crate::device::notify::{Heartbeat, Notifier};
use crate::tts::speaker::Speaker;
use crate::voice_loop::VoiceLoop;

/// Run the device until `shutdown` (SIGTERM/SIGINT) or the end of a WAV
/// input. `json`: print each turn's events as JSON lines. Returns whether
/// it stopped cleanly.
pub fn run(
    mut config: Config,
    shutdown: CancelToken,
    notifier: &Notifier,
    json: bool,
) -> Result<bool> {
    // `audio.input = "none"`: a host whose only microphones are satellites.
    let no_mic = crate::wyoming::satellite::is_no_input(&config.audio.input);
    if no_mic
        && config.wyoming.satellites.is_empty()
        // Issue 22: ESPHome devices listen too.
        && config.esphome.devices.is_empty()
        && !config.esphome.discover
    {
        anyhow::bail!(
            "audio.input is \"none\" and wyoming.satellites is empty: nothing would listen; set audio.input to a microphone or list a satellite"
        );
    }
    // Issue 22: `[esphome] serve`: bound before anything loads (a taken
    // port or a missing key is one line at once), Home Assistant served
    // from here on; its pipeline takes requests once the loop runs.
    let esphome_serve = if config.esphome.serve {
        Some(EsphomeServe::start(&config.esphome, &shutdown)?)
    } else {
        None
    };
    // The services (database, embedder, classifiers, tree) load on their
    // own thread while the voice, whisper and the microphone open here:
    // on two cores that takes the longer of the two, not their sum, off
    // the time to listening (issue 21's cold start).
    let services_loading = {
        let config = config.clone();
        std::thread::Builder::new()
            .name("services-load".into())
            .spawn(move || crate::app::build(&config))?
    };
    // Speaking first: every later failure can then be said out loud.
    let sink: Arc<dyn AudioSink> = match playback::open_output(&config.audio.output) {
        Ok(sink) => sink,
        Err(e) => {
            tracing::error!("cannot speak: {e:#}; answers will only be logged");
            Arc::new(NullSink::new(format!("{e:#}")))
        }
    };
    // What the speaker plays is kept for a moment, so a stop word or wake
    // word heard during playback can be told from its own voice (only
    // needed without an echo-cancelled input).
    let echo = (!config.audio.echo_cancelled).then(|| crate::audio::echo::EchoReference::new(20));
    let sink: Arc<dyn AudioSink> = match &echo {
        Some(reference) => Arc::new(crate::audio::echo::EchoTap::new(sink, reference.clone())),
        None => sink,
    };
    let voices = config.clone();
    let speaker = Arc::new(Speaker::start_loading(
        Box::new(move || crate::app::tts(&voices)),
        sink,
    )?);

    let endpointer = Endpointer::new(&config.audio.vad)
        .map_err(|e| anyhow::anyhow!("audio.vad settings: {e}"))?;
    let stt = match crate::app::stt(&config) {
        Ok(stt) => stt,
        Err(e) => {
            speaker.say(e.user_sentence());
            let _ = speaker.wait_done(&shutdown, std::time::Duration::from_secs(10));
            return Err(anyhow::anyhow!("{e}")).context("speech-to-text is unavailable");
        }
    };
    let warm = stt.warm_up_in_background();
    let input_name = config.audio.input.clone();
    let opened = if no_mic {
        Ok(None)
    } else {
        crate::audio::open_input(&input_name, &config.audio).map(Some)
    };
    let source = match opened {
        Ok(source) => source,
        Err(e) => {
            speaker.say(e.user_sentence());
            let _ = speaker.wait_done(&shutdown, std::time::Duration::from_secs(10));
            return Err(anyhow::anyhow!("{e}")).context("cannot listen");
        }
    };
    let reopen: Option<crate::voice_loop::Reopen> = if crate::audio::is_file_name(&input_name) {
        None
    } else {
        let audio = config.audio.clone();
        Some(Box::new(move || {
            crate::audio::open_input(&input_name, &audio)
        }))
    };
    let button = match button::open(&config.device.button) {
        Ok(Some(b)) => {
            tracing::info!(button = %b.describe(), "button ready");
            // A long press mutes (not with push-to-talk: holding is talking).
            let long = (config.device.long_press_ms > 0 && !config.audio.push_to_talk).then(|| {
                button::LongPress {
                    after: std::time::Duration::from_millis(config.device.long_press_ms),
                    socket: crate::device::control::socket_path(&config.state_dir),
                }
            });
            Some(button::spawn_with_long_press(b, long)?)
        }
        Ok(None) => None,
        Err(e) => {
            // The loop still works by voice; say why the button doesn't.
            tracing::error!("button unavailable: {e:#}");
            None
        }
    };
    if config.audio.push_to_talk && button.is_none() {
        tracing::error!(
            "audio.push_to_talk is on but no button works (device.button = {:?}); listening by voice instead",
            config.device.button.to_string()
        );
        config.audio.push_to_talk = false;
    }
    let services = services_loading
        .join()
        .map_err(|_| anyhow::anyhow!("loading the services crashed"))??;
    let lights = open_lights(&config.device.leds, &services);
    // Timers: the local speaker's ringer subscribes before the scheduler
    // starts, so it hears the ones missed while earshot was off.
    let ringers = crate::voice_loop::ring::Ringers::new(&services.timers);
    let mut ringer = ringers.ringer();
    let _scheduler = start_timers(&services);
    if source.is_some() {
        // The local speaker claims what came due while earshot was off
        // before any satellite connects; with no microphone here, the
        // first satellite to connect announces it.
        ringer.poll(speaker.as_ref());
    }
    // Summaries, memory extraction and index upserts run beside the loop,
    // never in it.
    let _background = crate::memory::start_background(&services);
    // CalDAV sync on its own thread every `[calendar] sync_interval_secs`.
    let _calendar = services.calendar.start_background(shutdown.clone());
    // Calendar reminders ring through the timers (handed over shortly
    // before they are due, on their own thread).
    let _reminders = services
        .calendar
        .start_reminders(services.timers.clone(), shutdown.clone());
    // The HTTP API beside the loop when enabled (`[api] enabled`); the voice
    // loop keeps the main thread and the watchdog.
    let api = if config.api.enabled {
        // Shares the loaded whisper model; the API's TTS is its own.
        let speech = Arc::new(crate::api::speech::Speech::new(
            Ok(stt.clone()),
            crate::app::tts(&config),
        ));
        let server =
            crate::api::ApiServer::start_with_speech(services.clone(), speech, &config.api)?;
        let stop = shutdown.clone();
        Some(
            std::thread::Builder::new()
                .name("api".into())
                .spawn(move || server.run_until(|| stop.is_cancelled()))?,
        )
    } else {
        None
    };
    // Not joined: the warm-up finishes beside the loop (a first request
    // waits for it on the model's lock), so listening starts ~0.7–4 s
    // sooner on this machine (issue 21's cold start).
    drop(warm);
    // Satellites (`wyoming.satellites`), each on its own thread beside the
    // local loop.
    let satellites = crate::wyoming::satellite::SatelliteHosts::start(
        &services,
        &stt,
        &|| crate::app::tts(&config),
        &config.wyoming,
        &config.audio.vad,
        &shutdown,
        json,
        Some(ringers.factory()),
    )?;
    // Issue 22: ESPHome voice devices (`[[esphome.devices]]`), each on its
    // own thread; joined when the process exits.
    let _esphome = crate::esphome::host::EsphomeHosts::start(
        &services,
        &stt,
        &|| crate::app::tts(&config),
        &config.esphome,
        &config.audio.vad,
        &shutdown,
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    let Some(source) = source else {
        notifier.ready();
        notifier.status("listening to satellites");
        let mut heartbeat = Heartbeat::new(notifier);
        let summary = crate::wyoming::satellite::run_without_microphone(&shutdown, &mut || {
            heartbeat.beat();
        });
        notifier.stopping();
        shutdown.cancel();
        satellites.join();
        if let Some(api) = api {
            let _ = api.join();
        }
        tracing::info!("stopped ({})", summary.reason);
        return Ok(true);
    };

    let mut voice = VoiceLoop {
        services,
        stt,
        speaker,
        source,
        reopen,
        endpointer,
        button,
        shutdown: shutdown.clone(),
        push_to_talk: config.audio.push_to_talk,
        barge_in: config.audio.barge_in,
        json,
        wake: crate::voice_loop::wake::WakeGate::from_config(
            &config.wake,
            &config.wyoming,
            &config.paths(),
        ),
        vad: config.audio.vad.clone(),
        volume: config.tts.volume,
        ring: Some(ringer),
        lights,
        interrupter: interrupter(&config, echo),
        speech_check: crate::voice_loop::speech_check::SpeechCheck::from_config(
            &config.audio.vad,
            &config.paths(),
        ),
    };
    notifier.ready();
    notifier.status("listening");
    let mut heartbeat = Heartbeat::new(notifier);
    let remote = esphome_serve
        .as_ref()
        .map(|s| s.satellite.as_ref() as &dyn crate::voice_loop::remote::RemotePipeline);
    let summary = voice.run_with_remote(
        &mut || {
            heartbeat.beat();
        },
        remote,
    )?;
    notifier.stopping();
    shutdown.cancel();
    satellites.join();
    if let Some(api) = api {
        // In-flight API turns finish before the process exits.
        let _ = api.join();
    }
    tracing::info!(
        turns = summary.turns,
        barge_ins = summary.barge_ins,
        "stopped ({})",
        summary.reason
    );
    Ok(true)
}

/// `[esphome] serve` inside `earshot run`: the bound server on its own
/// thread (one more per Home Assistant connection), the mDNS announcement
/// (only on the bound interfaces; none on loopback) and the satellite the
/// voice loop hands requests to.
struct EsphomeServe {
    satellite: Arc<crate::esphome::satellite::Satellite>,
    _mdns: Option<crate::esphome::mdns::Announcer>,
}

impl EsphomeServe {
    fn start(
        config: &crate::esphome::EsphomeConfig,
        shutdown: &CancelToken,
    ) -> Result<EsphomeServe> {
        use crate::esphome::satellite::{Satellite, SatelliteVoice};
        let satellite = Satellite::new();
        let server = crate::esphome::server::Server::bind(&config.bind, config)?
            .with_voice(Arc::new(SatelliteVoice(satellite.clone())));
        let mdns = server.announce_listening();
        let stop = shutdown.clone();
        std::thread::Builder::new()
            .name("esphome-serve".into())
            .spawn(move || {
                if let Err(e) = server.run(&stop, &mut || {}) {
                    tracing::error!("esphome: the server stopped: {e}");
                }
            })?;
        Ok(EsphomeServe {
            satellite,
            _mdns: mdns,
        })
    }
}

/// The stop word and the wake word during playback (`[wake] stop_word`);
/// none with voice barge-in (any speech interrupts then) or push-to-talk.
fn interrupter(
    config: &Config,
    echo: Option<Arc<crate::audio::echo::EchoReference>>,
) -> Option<crate::voice_loop::interrupt::Interrupter> {
    if !config.wake.stop_word || config.audio.barge_in || config.audio.push_to_talk {
        return None;
    }
    match crate::voice_loop::interrupt::Interrupter::new(&config.audio.vad, echo) {
        Ok(i) => Some(i),
        Err(e) => {
            tracing::error!("the stop word is off: audio.vad settings: {e}");
            None
        }
    }
}

/// The lights of `[device] leds`, told of the tree's `publish_event`s too.
/// Lights that can't be opened are logged (one line with the fix): the
/// device works without them.
fn open_lights(
    spec: &str,
    services: &crate::agent::Services,
) -> Option<Arc<crate::device::leds::Lights>> {
    let leds = match crate::device::leds::open(spec) {
        Ok(Some(leds)) => leds,
        Ok(None) => return None,
        Err(e) => {
            tracing::error!("{e}");
            return None;
        }
    };
    let lights = Arc::new(crate::device::leds::Lights::new(leds));
    tracing::info!(leds = %lights.describe(), "lights ready");
    lights.set(crate::device::leds::LedState::Idle);
    if let Some(tree) = &services.tree {
        tree.add_feedback(Arc::new(EventLights(lights.clone())));
    }
    Some(lights)
}

/// The lights as the tree's feedback layer: each `publish_event` reaches
/// them as it happens.
struct EventLights(Arc<crate::device::leds::Lights>);

impl crate::tree::engine::Feedback for EventLights {
    fn published(&self, event: &crate::tree::engine::Published) {
        self.0.event(&event.event);
    }
}

/// Start the timers' scheduler (it announces what came due while earshot
/// was off, then rings on time), and stop the ringing whenever the tree's
/// `stop` intent runs on any front door (a satellite, the API). A
/// scheduler that cannot start (another earshot holds the state dir) is
/// logged: the device still answers, timers just do not ring here.
fn start_timers(services: &crate::agent::Services) -> Option<crate::timers::SchedulerHandle> {
    let scheduler = match services.timers.start_scheduler() {
        Ok(handle) => handle,
        Err(e) => {
            tracing::error!("timers will not ring on this device: {e}");
            return None;
        }
    };
    if let Some(tree) = &services.tree {
        let events = tree.subscribe();
        let timers = services.timers.clone();
        let spawned = std::thread::Builder::new()
            .name("ring-stop".into())
            .spawn(move || {
                for event in events {
                    if event.event == "stop" {
                        match timers.stop_ringing(None) {
                            Ok(0) => {}
                            Ok(n) => tracing::info!(stopped = n, "\"stop\": ringing stopped"),
                            Err(e) => tracing::warn!("could not stop the ringing timers: {e}"),
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("\"stop\" will not stop ringing from satellites: {e}");
        }
    }
    tracing::info!("timers ready");
    Some(scheduler)
}
