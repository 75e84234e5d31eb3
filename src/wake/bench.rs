//! `earshot bench wake`: the in-process detector side by side with
//! wyoming-openwakeword (the peer, 1.8.2 on TFLite) on the same audio, the
//! same model release (`hey_jarvis_v0.1`: ONNX here, TFLite there) and the
//! same threshold and trigger frames as the peer's command line.
//!
//! Frames: both count 80 ms steps from the start of the audio. The peer
//! stamps a detection with the timestamp of the chunk whose arrival let it
//! run that step (step `k` needs 1760 samples from `k × 1280`, so it runs
//! when chunk `k + 1` arrives): its frame is `timestamp / 80 − 1`. The
//! audio is sent in 80 ms chunks stamped `index × 80` ms, paced (a chunk
//! every `pace`), so each step is done before the next chunk comes.
//!
//! CPU: earshot's is the bench thread's own CPU time over the pipeline
//! (models loaded before); the peer's is its process's user + system time
//! (`/proc/PID/stat`) from the first chunk until it has answered the last.
//! Memory: earshot's resident set after loading the models and running,
//! minus before.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use serde_json::json;

use super::onnx::{Decision, FRAME_SAMPLES};
use crate::paths::Paths;
use crate::wyoming_proto::audio::{audio_chunk_i16, audio_start, audio_stop, AudioFormat};
use crate::wyoming_proto::protocol::{Event, Limits};
use crate::wyoming_proto::{connect, WyomingUri};

/// What to compare.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// 16 kHz mono audio.
    pub audio: Vec<i16>,
    /// The word (`hey_jarvis`); the peer is asked for the same model.
    pub word: String,
    pub threshold: f32,
    pub trigger_frames: u32,
    /// The peer's Python (`.venv/openwakeword/bin/python`).
    pub peer_python: PathBuf,
    /// Time between two 80 ms chunks sent to the peer.
    pub pace: Duration,
}

/// The report (`--json` prints it as is).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub word: String,
    pub audio_s: f64,
    pub detections: Detections,
    pub cpu_s_per_audio_s: Cpu,
    pub rss_added_mb: f64,
    /// Every detection of each side has one of the other within ±1 frame.
    pub same_places: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Detections {
    pub earshot: Vec<u64>,
    pub peer: Vec<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Cpu {
    pub earshot: f64,
    pub peer: f64,
}

/// Run both sides.
#[cfg(feature = "onnx")]
pub fn run(opts: &BenchOptions, paths: &Paths) -> Result<BenchReport> {
    let audio_s = opts.audio.len() as f64 / 16_000.0;
    let rss_before = rss_kb();
    let mut models = super::onnx::WakeModels::load(std::slice::from_ref(&opts.word), paths)?;
    let model_name = models.model_names().first().cloned().unwrap_or_default();
    let decision = Decision {
        threshold: opts.threshold,
        trigger_frames: opts.trigger_frames.max(1),
        // The peer (1.8.2) has no refractory time.
        refractory_frames: 0,
    };
    let mut stream = super::onnx::Stream::new(1);
    let cpu_before = thread_cpu_s();
    let mut ours = Vec::new();
    for chunk in opts.audio.chunks(FRAME_SAMPLES) {
        for s in models.push(&mut stream, chunk, &decision)? {
            if s.fired {
                ours.push(s.frame);
            }
        }
    }
    let our_cpu = thread_cpu_s() - cpu_before;
    let rss_added_mb = rss_kb().saturating_sub(rss_before) as f64 / 1024.0;
    drop(models);

    let (peer, peer_cpu) = run_peer(opts, &model_name)?;
    let near = |a: &[u64], b: &[u64]| a.iter().all(|x| b.iter().any(|y| x.abs_diff(*y) <= 1));
    Ok(BenchReport {
        word: model_name,
        audio_s,
        same_places: near(&ours, &peer) && near(&peer, &ours),
        detections: Detections {
            earshot: ours,
            peer,
        },
        cpu_s_per_audio_s: Cpu {
            earshot: our_cpu / audio_s.max(1e-9),
            peer: peer_cpu / audio_s.max(1e-9),
        },
        rss_added_mb,
    })
}

/// The report as JSON.
pub fn to_json(r: &BenchReport) -> serde_json::Value {
    json!(r)
}

struct PeerProcess(Child);

impl Drop for PeerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run_peer(opts: &BenchOptions, model: &str) -> Result<(Vec<u64>, f64)> {
    if !opts.peer_python.is_file() {
        bail!(
            "wyoming-openwakeword's Python {} is missing; run scripts/venv-wyoming-services.sh (or pass --peer-python)",
            opts.peer_python.display()
        );
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let uri = format!("tcp://127.0.0.1:{port}");
    let child = Command::new(&opts.peer_python)
        .args(["-m", "wyoming_openwakeword", "--uri", &uri])
        .args(["--preload-model", model])
        .args(["--threshold", &opts.threshold.to_string()])
        .args(["--trigger-level", &opts.trigger_frames.max(1).to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", opts.peer_python.display()))?;
    let mut peer = PeerProcess(child);
    let pid = peer.0.id();
    let uri = WyomingUri::parse(&uri).map_err(|e| anyhow!(e))?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let conn = loop {
        match connect(
            &uri,
            Duration::from_secs(2),
            Duration::from_secs(10),
            Limits::default(),
        ) {
            Ok(c) => break c,
            Err(e) => {
                if let Some(status) = peer.0.try_wait()? {
                    bail!("wyoming-openwakeword exited ({status}) before listening");
                }
                if Instant::now() > deadline {
                    bail!("wyoming-openwakeword never listened on {uri}: {e}");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    let send = |e: &Event| {
        conn.send(e)
            .map_err(|e| anyhow!("to wyoming-openwakeword: {e}"))
    };
    send(&Event::with_data("detect", json!({ "names": [model] })))?;
    send(&audio_start(AudioFormat::EARSHOT, Some(0)))?;
    // Let it settle (model loaded at start; the first chunk warms it).
    std::thread::sleep(Duration::from_millis(300));
    let cpu_before = process_cpu_s(pid)?;
    let mut frames = Vec::new();
    let mut take = |e: Event| {
        if e.kind == "detection" {
            if let Some(ts) = e.u64("timestamp") {
                frames.push((ts / 80).saturating_sub(1));
            }
        }
    };
    let started = Instant::now();
    for (i, chunk) in opts.audio.chunks(FRAME_SAMPLES).enumerate() {
        send(&audio_chunk_i16(16_000, chunk, Some(i as u64 * 80)))?;
        let due = opts.pace * (i as u32 + 1);
        while let Some(left) = due.checked_sub(started.elapsed()) {
            match conn.recv_timeout(left) {
                Ok(Some(e)) => take(e),
                Ok(None) => break,
                Err(e) => bail!("wyoming-openwakeword: {e}"),
            }
        }
    }
    // Wait out the last steps.
    let until = Instant::now() + Duration::from_secs(2);
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match conn.recv_timeout(left) {
            Ok(Some(e)) => take(e),
            Ok(None) => break,
            Err(e) => bail!("wyoming-openwakeword: {e}"),
        }
    }
    let cpu = process_cpu_s(pid)? - cpu_before;
    let _ = send(&audio_stop(None));
    conn.close();
    frames.sort_unstable();
    frames.dedup();
    Ok((frames, cpu))
}

/// A process's user + system CPU seconds.
fn process_cpu_s(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("unreadable /proc/{pid}/stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 (1-based); `rest` starts at 3.
    let ticks = |i: usize| -> Result<f64> {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| anyhow!("unreadable /proc/{pid}/stat"))
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok((ticks(11)? + ticks(12)?) / hz)
}

/// This thread's CPU seconds.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// This process's resident set (kB).
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// The default audio when none is given: the real recordings in
/// `models_dir` (`oww-hey_jarvis.wav`, `oww-negative.wav`) in turn with
/// silence, `rounds` times — about 6 s a round.
pub fn default_audio(models_dir: &Path, rounds: usize) -> Result<Vec<i16>> {
    let read = |name: &str| -> Result<Vec<i16>> {
        let path = models_dir.join(name);
        let (samples, _) = crate::audio::wav::read_16k_mono(&path, None)
            .map_err(|e| anyhow!("{}: {e}; run scripts/fetch-wake.sh", path.display()))?;
        Ok(crate::audio::to_i16(&samples))
    };
    let yes = read("oww-hey_jarvis.wav")?;
    let no = read("oww-negative.wav")?;
    let silence = |s: f32| vec![0i16; (s * 16_000.0) as usize];
    let mut out = silence(2.5);
    for _ in 0..rounds.max(1) {
        out.extend(&no);
        out.extend(silence(1.3));
        out.extend(&yes);
        out.extend(silence(2.7));
    }
    Ok(out)
}

#[cfg(not(feature = "onnx"))]
pub fn run(_opts: &BenchOptions, _paths: &Paths) -> Result<BenchReport> {
    bail!("this build has no ONNX Runtime (built without the `onnx` feature)")
}
