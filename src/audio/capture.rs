//! Live capture with cpal: a named or default input, one channel kept,
//! converted to 16 kHz mono.
//!
//! The audio callback does the minimum a real-time thread may do: pick the
//! configured channel out of each interleaved frame and push it into a
//! lock-free SPSC ring (`rtrb`). It never allocates or locks; when the
//! ring is full it waits up to a second for room (a file read faster than
//! real time is held back, not cut), then drops and counts overruns. The
//! reader ([`CpalSource::read`], on the voice loop's thread) drains the ring
//! and resamples with rubato.
//!
//! cpal's `Stream` is kept on a small thread of its own, so the source
//! itself is `Send` on every platform.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use cpal::{SampleFormat, SizedSample};

use super::resample::Stream16k;
use super::{AudioConfig, AudioError, AudioSource, SAMPLE_RATE};

/// No sample at all for this long while the stream runs = the device is gone.
const STALL: Duration = Duration::from_secs(5);

/// State shared with the callbacks: atomics only (plus a mutex the *error*
/// callback, which is not real-time, may take).
struct Shared {
    overruns: AtomicU64,
    captured: AtomicU64,
    failed: AtomicBool,
    error: Mutex<Option<String>>,
    stop: AtomicBool,
}

/// A cpal input as an [`AudioSource`].
pub struct CpalSource {
    name: String,
    consumer: rtrb::Consumer<f32>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    resampler: Stream16k,
    scratch: Vec<f32>,
    converted: Vec<f32>,
    /// Converted samples not yet handed out.
    ready: std::collections::VecDeque<i16>,
    last_data: Instant,
    /// What was opened (for `describe`).
    opened: String,
}

/// Resolve a config name to a cpal device.
pub fn find_input_device(name: &str) -> Result<cpal::Device, AudioError> {
    let host = cpal::default_host();
    if name.is_empty() || name == "default" {
        return host
            .default_input_device()
            .ok_or_else(|| AudioError::NoDevice("default".into()));
    }
    let id = parse_device_id(name)?;
    host.device_by_id(&id)
        .ok_or_else(|| AudioError::NoDevice(name.to_string()))
}

/// `alsa:hw:1,0` as given; a bare ALSA name (`hw:1,0`, `plughw:…`,
/// `default`) gets the `alsa:` host prefix.
pub fn parse_device_id(name: &str) -> Result<cpal::DeviceId, AudioError> {
    let host_prefixed = cpal::ALL_HOSTS
        .iter()
        .any(|h| name.starts_with(&format!("{}:", h.name().to_ascii_lowercase())));
    let full = if host_prefixed {
        name.to_string()
    } else {
        format!("alsa:{name}")
    };
    cpal::DeviceId::from_str(&full).map_err(|_| AudioError::NoDevice(name.to_string()))
}

/// Pick the stream config: the requested rate/channels if given (else the
/// default, preferring 16 kHz when the device offers it, to skip
/// resampling).
fn choose_config(
    device: &cpal::Device,
    name: &str,
    cfg: &AudioConfig,
) -> Result<cpal::SupportedStreamConfig, AudioError> {
    let default = device
        .default_input_config()
        .map_err(|e| map_open_error(name, e))?;
    let want_rate = if cfg.input_rate > 0 {
        cfg.input_rate
    } else {
        default.sample_rate()
    };
    let want_channels = if cfg.input_channels > 0 {
        cfg.input_channels
    } else {
        default.channels()
    };
    let ranges: Vec<_> = device
        .supported_input_configs()
        .map_err(|e| map_open_error(name, e))?
        .collect();
    let fits = |r: &cpal::SupportedStreamConfigRange, rate: u32| {
        r.channels() == want_channels
            && r.min_sample_rate() <= rate
            && rate <= r.max_sample_rate()
            && matches!(
                r.sample_format(),
                SampleFormat::F32 | SampleFormat::I16 | SampleFormat::I32
            )
    };
    // Nothing asked for: mono 16 kHz when the device offers it (ALSA's
    // `plug`/`default` does; a bare reSpeaker `hw:` device does not, and
    // keeps its own channel count so `channel` picks the beam).
    if cfg.input_rate == 0 && cfg.input_channels == 0 && cfg.channel == 0 {
        let mono = |r: &&cpal::SupportedStreamConfigRange| {
            r.channels() == 1
                && r.min_sample_rate() <= SAMPLE_RATE
                && SAMPLE_RATE <= r.max_sample_rate()
                && r.sample_format() == SampleFormat::I16
        };
        if let Some(r) = ranges.iter().find(mono) {
            return Ok((*r).with_sample_rate(SAMPLE_RATE));
        }
    }
    // Prefer 16 kHz when no rate was asked for and the device can do it.
    if cfg.input_rate == 0 {
        if let Some(r) = ranges.iter().find(|r| fits(r, SAMPLE_RATE)) {
            return Ok((*r).with_sample_rate(SAMPLE_RATE));
        }
    }
    if let Some(r) = ranges
        .iter()
        .filter(|r| fits(r, want_rate))
        .max_by_key(|r| r.sample_format() == default.sample_format())
    {
        return Ok((*r).with_sample_rate(want_rate));
    }
    Err(AudioError::Unsupported {
        device: name.to_string(),
        what: format!("{want_rate} Hz with {want_channels} channel(s)"),
    })
}

fn map_open_error(name: &str, e: cpal::Error) -> AudioError {
    match e.kind() {
        cpal::ErrorKind::DeviceNotAvailable => AudioError::NoDevice(name.to_string()),
        cpal::ErrorKind::UnsupportedConfig => AudioError::Unsupported {
            device: name.to_string(),
            what: "the requested stream configuration".into(),
        },
        _ => AudioError::Backend(format!("{name}: {}", e.to_string().replace('\n', " "))),
    }
}

/// How long the callback waits for room in a full ring before it drops
/// (issue 17). A real microphone's reader is never this far behind
/// unless it is stalled, and then the samples are lost either way; a
/// device that is not paced (ALSA's file plugin reading a plain file)
/// is held back instead, so the wake-word detector and the endpointer
/// see every sample however fast the file is read.
const FULL_RING_WAIT: Duration = Duration::from_millis(1000);

/// The real-time callback body: keep `channel` of each frame, push into
/// the ring, count what does not fit. No allocation, no lock; it waits
/// (up to [`FULL_RING_WAIT`]) only when the ring is full.
fn on_input<T: SizedSample + cpal::Sample>(
    data: &[T],
    channels: usize,
    channel: usize,
    producer: &mut rtrb::Producer<f32>,
    shared: &Shared,
) where
    f32: cpal::FromSample<T>,
{
    let frames = data.len() / channels;
    let mut done = 0;
    let mut waited = Duration::ZERO;
    loop {
        let n = (frames - done).min(producer.slots());
        if let Ok(mut chunk) = producer.write_chunk_uninit(n) {
            let (a, b) = chunk.as_mut_slices();
            for (i, slot) in a.iter_mut().chain(b.iter_mut()).enumerate() {
                let s: f32 = cpal::Sample::from_sample(data[(done + i) * channels + channel]);
                slot.write(s);
            }
            // SAFETY: every one of the `n` slots was written just above.
            unsafe { chunk.commit_all() };
            done += n;
        }
        if done >= frames
            || waited >= FULL_RING_WAIT
            || shared.stop.load(Ordering::Relaxed)
            || producer.is_abandoned()
        {
            break;
        }
        let step = Duration::from_millis(2);
        std::thread::sleep(step);
        waited += step;
    }
    let n = done;
    if frames > n {
        shared
            .overruns
            .fetch_add((frames - n) as u64, Ordering::Relaxed);
    }
    shared.captured.fetch_add(frames as u64, Ordering::Relaxed);
}

impl CpalSource {
    /// Open `name` (see [`find_input_device`]) and start capturing.
    pub fn open(name: &str, cfg: &AudioConfig) -> Result<Self, AudioError> {
        let device = find_input_device(name)?;
        let config = choose_config(&device, name, cfg)?;
        let channels = usize::from(config.channels());
        if cfg.channel >= channels {
            return Err(AudioError::NoSuchChannel {
                device: name.to_string(),
                channel: cfg.channel,
                channels: config.channels(),
            });
        }
        let rate = config.sample_rate();
        let ring_len = (rate as usize * cfg.ring_ms.max(100) as usize / 1000).max(4096);
        let (producer, consumer) = rtrb::RingBuffer::<f32>::new(ring_len);
        let shared = Arc::new(Shared {
            overruns: AtomicU64::new(0),
            captured: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let opened = format!(
            "{name} ({} Hz, {} ch, {:?}, channel {})",
            rate,
            channels,
            config.sample_format(),
            cfg.channel
        );
        let (ready_tx, ready_rx) = crossbeam_channel::bounded::<Result<u32, AudioError>>(1);
        let thread_shared = shared.clone();
        let channel = cfg.channel;
        let period_ms = cfg.period_ms;
        let dev_name = name.to_string();
        let thread = std::thread::Builder::new()
            .name("capture".into())
            .spawn(move || {
                let stream = build_stream(
                    &device,
                    &config,
                    (channels, channel),
                    producer,
                    &thread_shared,
                    &dev_name,
                    period_ms,
                )
                .and_then(|s| {
                    s.play().map_err(|e| {
                        AudioError::Backend(format!("{dev_name}: cannot start capture: {e}"))
                    })?;
                    Ok(s)
                });
                match stream {
                    Ok(stream) => {
                        let period = stream.buffer_size().unwrap_or(0);
                        let _ = ready_tx.send(Ok(period));
                        while !thread_shared.stop.load(Ordering::Acquire) {
                            std::thread::park_timeout(Duration::from_millis(200));
                        }
                        drop(stream);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| AudioError::Backend(format!("cannot start the capture thread: {e}")))?;
        let period_frames = match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(period)) => period,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                shared.stop.store(true, Ordering::Release);
                return Err(AudioError::Backend(format!(
                    "{name}: the device did not start within 10 s"
                )));
            }
        };
        let resampler = Stream16k::new(rate).map_err(|e| AudioError::Unsupported {
            device: name.to_string(),
            what: e,
        })?;
        tracing::info!(
            device = %opened,
            period_ms = period_frames as u64 * 1000 / u64::from(rate.max(1)),
            "capture started"
        );
        Ok(Self {
            name: name.to_string(),
            consumer,
            shared,
            thread: Some(thread),
            resampler,
            scratch: vec![0.0; ring_len],
            converted: Vec::with_capacity(ring_len),
            ready: std::collections::VecDeque::with_capacity(ring_len),
            last_data: Instant::now(),
            opened,
        })
    }

    /// Samples the device has delivered so far (at its own rate).
    pub fn captured(&self) -> u64 {
        self.shared.captured.load(Ordering::Relaxed)
    }

    /// Move whatever the ring holds into `ready` (converted). Returns
    /// whether anything arrived.
    fn drain_ring(&mut self) -> Result<bool, AudioError> {
        let avail = self.consumer.slots().min(self.scratch.len());
        if avail == 0 {
            return Ok(false);
        }
        if let Ok(chunk) = self.consumer.read_chunk(avail) {
            let (a, b) = chunk.as_slices();
            self.scratch[..a.len()].copy_from_slice(a);
            self.scratch[a.len()..a.len() + b.len()].copy_from_slice(b);
            chunk.commit_all();
        }
        self.converted.clear();
        self.resampler
            .push(&self.scratch[..avail], &mut self.converted)
            .map_err(AudioError::Backend)?;
        self.ready
            .extend(self.converted.iter().map(|&s| super::f32_to_i16(s)));
        Ok(true)
    }
}

/// The period to ask for: `period_ms` of device frames inside the range
/// the device reports (the driver's default when it reports none or 0 ms
/// is asked for).
fn period_frames(config: &cpal::SupportedStreamConfig, period_ms: u32) -> cpal::BufferSize {
    if period_ms == 0 {
        return cpal::BufferSize::Default;
    }
    let want = (config.sample_rate() as u64 * period_ms as u64 / 1000).max(1);
    match config.buffer_size() {
        cpal::SupportedBufferSize::Range { min, max } if min <= max && *max > 0 => {
            let frames = want.clamp(*min as u64, *max as u64);
            cpal::BufferSize::Fixed(u32::try_from(frames).unwrap_or(*max))
        }
        _ => cpal::BufferSize::Default,
    }
}

/// `(channels, channel)`: the frame width and the channel kept.
fn build_stream(
    device: &cpal::Device,
    config: &cpal::SupportedStreamConfig,
    (channels, channel): (usize, usize),
    mut producer: rtrb::Producer<f32>,
    shared: &Arc<Shared>,
    name: &str,
    period_ms: u32,
) -> Result<cpal::Stream, AudioError> {
    let err_shared = shared.clone();
    let on_error = move |e: cpal::Error| {
        // Not the real-time callback: a lock here is fine.
        match e.kind() {
            cpal::ErrorKind::Xrun => {
                err_shared.overruns.fetch_add(1, Ordering::Relaxed);
            }
            cpal::ErrorKind::DeviceChanged => {}
            _ => {
                if let Ok(mut slot) = err_shared.error.lock() {
                    *slot = Some(e.to_string().replace('\n', " "));
                }
                err_shared.failed.store(true, Ordering::Release);
            }
        }
    };
    let mut stream_config = config.config();
    stream_config.buffer_size = period_frames(config, period_ms);
    let s = shared.clone();
    let result = match config.sample_format() {
        SampleFormat::F32 => device.build_input_stream(
            stream_config,
            move |data: &[f32], _: &_| on_input(data, channels, channel, &mut producer, &s),
            on_error,
            None,
        ),
        SampleFormat::I16 => device.build_input_stream(
            stream_config,
            move |data: &[i16], _: &_| on_input(data, channels, channel, &mut producer, &s),
            on_error,
            None,
        ),
        SampleFormat::I32 => device.build_input_stream(
            stream_config,
            move |data: &[i32], _: &_| on_input(data, channels, channel, &mut producer, &s),
            on_error,
            None,
        ),
        other => {
            return Err(AudioError::Unsupported {
                device: name.to_string(),
                what: format!("sample format {other:?}"),
            })
        }
    };
    result.map_err(|e| map_open_error(name, e))
}

impl AudioSource for CpalSource {
    fn read(&mut self, out: &mut [i16], timeout: Duration) -> Result<usize, AudioError> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.shared.failed.load(Ordering::Acquire) {
                let detail = self
                    .shared
                    .error
                    .lock()
                    .ok()
                    .and_then(|g| g.clone())
                    .unwrap_or_default();
                tracing::warn!(device = %self.name, error = %detail, "capture failed");
                return Err(AudioError::DeviceGone(self.name.clone()));
            }
            // Only take from the ring what this read needs: audio left in
            // the ring holds a faster-than-real-time source (ALSA's file
            // plugin on a plain file) back, where moving all of it into
            // `ready` on every read grew without bound (7 GB in 12 minutes
            // of an idle `earshot run` on a file).
            if self.ready.len() < out.len() && self.drain_ring()? {
                self.last_data = Instant::now();
            }
            if !self.ready.is_empty() {
                let n = self.ready.len().min(out.len());
                for (slot, s) in out.iter_mut().zip(self.ready.drain(..n)) {
                    *slot = s;
                }
                return Ok(n);
            }
            if self.last_data.elapsed() > STALL {
                return Err(AudioError::DeviceGone(self.name.clone()));
            }
            if Instant::now() >= deadline {
                return Ok(0);
            }
            // The callback cannot signal without locking; poll briefly.
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn flush(&mut self) {
        let n = self.consumer.slots();
        if let Ok(chunk) = self.consumer.read_chunk(n) {
            chunk.commit_all();
        }
        self.ready.clear();
        self.resampler.reset();
        self.last_data = Instant::now();
    }

    fn overruns(&self) -> u64 {
        self.shared.overruns.load(Ordering::Relaxed)
    }

    fn describe(&self) -> String {
        self.opened.clone()
    }
}

impl Drop for CpalSource {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
