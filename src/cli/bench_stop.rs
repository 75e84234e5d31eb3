//! `earshot bench stop [--rounds N] [--minutes M] [--json]`: the stop word
//! and the wake word during playback (issue 17 point 5), on the device's
//! own parts (its Piper voice, whisper, webrtc-vad, the wake model and
//! `voice_loop::interrupt`), in process.
//!
//! **Latency**: an answer plays (its echo in the microphone, 20–100 ms
//! late, attenuated, with noise — or, `echo_cancelled`, none) and a
//! spoken "stop" comes in over it, fed in 20 ms reads paced at real time;
//! measured from the last voiced sample of "stop" having been read to the
//! interrupter's answer (the loop stops the speaker in the same step).
//! The sound card's own buffers are not in it.
//!
//! **False triggers**: `--minutes` of the device's own answers (a set of
//! typical answers, some saying "stop", "enough" or "Jarvis"), each fed
//! back into the microphone with a random delay of 20–100 ms, a random
//! gain and noise, not paced; every stop or wake word the interrupter
//! reports is a false trigger. The interrupter is told the text of each
//! answer while it plays and is quiet after it (`set_playing_text`, as the
//! loop does), so a wake word in an answer's own text is dropped. The same
//! audio is run a second time with the echo check off, to show what it
//! buys.
//!
//! **The user's wake word over answers**: the user's "Hey Jarvis" (the
//! same Piper voice 10 % higher and faster, so it is not the device's
//! exact voice) said over an answer's echo, not paced: heard over the
//! answers that don't say the name, dropped over those that do.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use serde_json::{json, Value};

use crate::audio::echo::EchoReference;
use crate::audio::playback::Clip;
use crate::audio::SAMPLE_RATE;
use crate::voice_loop::interrupt::{Interrupter, Interruption};
use crate::voice_loop::wake::WakeGate;

/// Answers the device gives (some with the words it listens for).
const ANSWERS: &[&str] = &[
    "It's twenty past three in the afternoon.",
    "Your rice timer has four minutes and ten seconds left.",
    "Okay, I set a timer for twelve minutes.",
    "Say stop when you want the alarm to stop.",
    "I stopped the music.",
    "Enough about me; what would you like to do?",
    "Hey Jarvis is the wake word I listen for.",
    "Jarvis here. I added milk to your shopping list.",
    "Tomorrow you have a dentist appointment at nine thirty and lunch with Sam at one.",
    "The capital of Australia is Canberra, not Sydney.",
    "I couldn't find anything about that in your documents.",
    "The bus stop is two hundred metres down the road.",
    "Please be quiet, the baby is sleeping, was the note you left yesterday.",
    "Your alarm for six thirty tomorrow morning is set.",
    "I'm sorry, I can't reach the internet right now, so I can't check the weather.",
    "A full stop ends a sentence; a comma only pauses it.",
    "There are three timers running: pasta, rice and tea.",
    "Water boils at one hundred degrees Celsius at sea level.",
    "Shut down the oven in ten minutes, you said.",
    "Okay. Stop. That's all I have.",
];

/// What the user says to stop it.
const STOPS: &[&str] = &["Stop.", "Stop!", "Okay, stop.", "Enough.", "Stop it."];

#[derive(Debug, Clone, clap::Args)]
pub struct BenchStopArgs {
    /// Timed "stop"s over playback, for each input kind.
    #[arg(long, default_value_t = 20)]
    pub rounds: usize,
    /// Minutes of the device's own answers fed back into the microphone.
    #[arg(long, default_value_t = 30.0)]
    pub minutes: f64,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(config_path: Option<&Path>, args: BenchStopArgs) -> Result<bool> {
    let config = super::load_config(config_path)?.config;
    let stt = crate::app::stt(&config).map_err(|e| anyhow!("{e}"))?;
    let mut tts = crate::app::tts(&config);
    let mut say = |text: &str| -> Result<Vec<f32>> {
        let spoken = tts.synthesize(text).map_err(|e| anyhow!("{e}"))?;
        Ok(spoken.clip.resampled(SAMPLE_RATE).samples)
    };
    let answers: Vec<Vec<f32>> = ANSWERS.iter().map(|t| say(t)).collect::<Result<_>>()?;
    let stops: Vec<Vec<f32>> = STOPS.iter().map(|t| say(t)).collect::<Result<_>>()?;
    let users_wake =
        crate::audio::resample::to_16k(&say("Hey Jarvis.")?, 17_600).map_err(|e| anyhow!("{e}"))?;
    let mut wake_config = config.wake.clone();
    wake_config.mode = crate::wake::WakeMode::Wake;
    let gate = || -> Option<WakeGate> {
        crate::wake::open(&wake_config, &config.wyoming, &config.paths())
            .ok()
            .flatten()
            .map(|d| WakeGate::with_detector(d, wake_config.words.clone()))
    };
    if gate().is_none() {
        eprintln!("note: no wake model; only the stop word is measured");
    }
    let mut rng = Lcg(0x5eed);
    let word_pass = word_pass_ms(&stt, &stops, &mut rng);
    let mut latency = serde_json::Map::new();
    for (kind, echo_cancelled) in [("echo_cancelled_input", true), ("raw_input", false)] {
        let mut took = Vec::new();
        let mut missed = 0usize;
        for round in 0..args.rounds {
            let answer = &answers[round % answers.len()];
            let stop = &stops[round % stops.len()];
            tracing::debug!(round, stop = STOPS[round % STOPS.len()], "a timed round");
            match timed_stop(
                &stt,
                &config.audio.vad,
                answer,
                stop,
                echo_cancelled,
                &mut rng,
            )? {
                Some(ms) => took.push(ms),
                None => missed += 1,
            }
        }
        latency.insert(kind.into(), summary(&mut took, missed));
    }
    let wake_over = if gate().is_some() {
        wake_over_answers(&config.audio.vad, &answers, &users_wake, args.rounds, &gate)?
    } else {
        Value::Null
    };
    let with_check = feedback(
        &stt,
        &config.audio.vad,
        &answers,
        args.minutes,
        true,
        gate(),
        &mut Lcg(7),
    )?;
    let without_check = feedback(
        &stt,
        &config.audio.vad,
        &answers,
        args.minutes,
        false,
        gate(),
        &mut Lcg(7),
    )?;
    let report = json!({
        "word_pass_ms": word_pass,
        "latency_ms": latency,
        "feedback": with_check,
        "feedback_without_echo_check": without_check,
        "users_wake_word_over_answers": wake_over,
    });
    if args.json {
        println!("{report}");
    } else {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(true)
}

/// How long one `transcribe_word` pass takes on each stop word (with a
/// little noise around it, as the endpointer cuts it): the floor under the
/// latency, since a stop can only be believed once a pass has heard it.
fn word_pass_ms(stt: &crate::stt::Stt, stops: &[Vec<f32>], rng: &mut Lcg) -> Value {
    let mut took = Vec::new();
    // The first pass pays for loading pages; a running device has paid.
    let _ = stt.transcribe_word(&noise(SAMPLE_RATE as usize, 0.003, rng));
    for _ in 0..4 {
        for stop in stops {
            let lead = SAMPLE_RATE as usize / 5;
            let mut audio = noise(lead + stop.len() + SAMPLE_RATE as usize / 10, 0.003, rng);
            for (i, s) in stop.iter().enumerate() {
                audio[lead + i] += s;
            }
            let began = Instant::now();
            let _ = stt.transcribe_word(&audio);
            took.push(began.elapsed().as_secs_f64() * 1000.0);
        }
    }
    summary(&mut took, 0)
}

/// p50/p95/max of the measured rounds, and how many were missed.
fn summary(took: &mut [f64], missed: usize) -> Value {
    took.sort_by(f64::total_cmp);
    let at = |q: f64| -> Value {
        if took.is_empty() {
            return Value::Null;
        }
        let i = ((took.len() as f64 - 1.0) * q).round() as usize;
        json!((took[i] * 10.0).round() / 10.0)
    };
    json!({"n": took.len(), "missed": missed, "p50": at(0.5), "p95": at(0.95), "max": at(1.0)})
}

/// One timed round: the answer's echo (or silence, echo-cancelled), the
/// user's "stop" over it 1.5 s in, paced 20 ms reads; ms from the last
/// voiced sample of "stop" to the interruption (negative when it came
/// before that), `None` if never heard.
fn timed_stop(
    stt: &crate::stt::Stt,
    vad: &crate::audio::VadConfig,
    answer: &[f32],
    stop: &[f32],
    echo_cancelled: bool,
    rng: &mut Lcg,
) -> Result<Option<f64>> {
    let reference = EchoReference::new(20);
    reference.record(&Clip::new(answer.to_vec(), SAMPLE_RATE));
    let echo = (!echo_cancelled).then_some(reference);
    let mut interrupter = Interrupter::new(vad, echo).map_err(|e| anyhow!(e))?;
    let delay = 320 + rng.below(1280);
    let gain = 0.2 + 0.3 * rng.unit();
    let start = SAMPLE_RATE as usize * 3 / 2;
    let total = start + stop.len() + SAMPLE_RATE as usize * 2;
    let mut mic = noise(total, 0.003, rng);
    if !echo_cancelled {
        for (i, s) in answer.iter().enumerate() {
            if let Some(m) = mic.get_mut(i + delay) {
                *m += gain * s;
            }
        }
    }
    for (i, s) in stop.iter().enumerate() {
        mic[start + i] += s;
    }
    let last_voiced = start + last_voiced(stop);
    let pcm = crate::audio::to_i16(&mic);
    let chunk = SAMPLE_RATE as usize / 50;
    // The read that brings the last voiced sample is due at this many ms.
    let voiced_due_ms = 20.0 * (last_voiced / chunk) as f64;
    let began = Instant::now();
    for (k, piece) in pcm.chunks(chunk).enumerate() {
        // Real time: chunk k is available at k × 20 ms.
        let due = began + Duration::from_millis(20 * k as u64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if let Some(Interruption::Stop(_)) = interrupter.hear(piece, stt, None) {
            // Negative: it fired before the word's quietest last sound
            // (30 dB under its peak) was read.
            return Ok(Some(began.elapsed().as_secs_f64() * 1000.0 - voiced_due_ms));
        }
    }
    Ok(None)
}

/// Minutes of its own answers fed back; counts of what came out.
fn feedback(
    stt: &crate::stt::Stt,
    vad: &crate::audio::VadConfig,
    answers: &[Vec<f32>],
    minutes: f64,
    check: bool,
    mut gate: Option<WakeGate>,
    rng: &mut Lcg,
) -> Result<Value> {
    let reference = EchoReference::new(20);
    let echo = check.then(|| reference.clone());
    let mut interrupter = Interrupter::new(vad, echo).map_err(|e| anyhow!(e))?;
    let target = (minutes * 60.0 * f64::from(SAMPLE_RATE)) as usize;
    let (mut fed, mut played, mut stops, mut wakes) = (0usize, 0usize, Vec::new(), 0usize);
    let started = Instant::now();
    while fed < target {
        let which = rng.below(answers.len());
        let answer = &answers[which];
        reference.record(&Clip::new(answer.clone(), SAMPLE_RATE));
        // The speaker starts the answer now (its echo comes `delay` later)
        // and is quiet once its last sample has played.
        interrupter.set_playing_text(ANSWERS[which]);
        let delay = 320 + rng.below(1280);
        let gain = 0.2 + 0.4 * rng.unit();
        let pause = SAMPLE_RATE as usize * (3 + rng.below(10)) / 10;
        let mut mic = noise(delay + answer.len() + pause, 0.003, rng);
        for (i, s) in answer.iter().enumerate() {
            mic[delay + i] += gain * s;
        }
        let chunk = SAMPLE_RATE as usize / 50;
        for (k, piece) in crate::audio::to_i16(&mic).chunks(chunk).enumerate() {
            if k * chunk >= answer.len() {
                interrupter.set_playing_text("");
            }
            match interrupter.hear(piece, stt, gate.as_mut()) {
                Some(Interruption::Stop(t)) => stops.push(t),
                Some(Interruption::WakeWord(_)) => wakes += 1,
                None => {}
            }
        }
        fed += mic.len();
        played += 1;
    }
    let stats = interrupter.stats();
    Ok(json!({
        "echo_check": check,
        "audio_minutes": (fed as f64 / f64::from(SAMPLE_RATE) / 60.0 * 10.0).round() / 10.0,
        "answers": played,
        "false_stops": stops.len(),
        "false_stop_texts": stops,
        "false_wakes": wakes,
        "wakes_dropped_by_text": stats.wakes_in_own_text,
        "wakes_dropped_by_echo_check": stats.wakes_in_own_voice,
        "short_words": stats.words,
        "dropped_as_own_voice": stats.own_voice,
        "transcribed": stats.transcribed,
        "whisper_passes": stats.passes,
        "wake_word_model": gate.is_some(),
        "wall_s": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
    }))
}

/// The user's wake word said 1.5 s into an answer's echo (20–100 ms late,
/// gain 0.2–0.5, noise), each answer in turn for `rounds` rounds, not
/// paced; the interrupter is told the answer's text. Counts of the rounds
/// where it interrupted, over answers without and with the name.
fn wake_over_answers(
    vad: &crate::audio::VadConfig,
    answers: &[Vec<f32>],
    users_wake: &[f32],
    rounds: usize,
    gate: &dyn Fn() -> Option<WakeGate>,
) -> Result<Value> {
    let mut rng = Lcg(11);
    // Only the wake word is looked at here: no speech-to-text.
    let no_stt = crate::stt::Stt::with_engines(Vec::new(), 0);
    let (mut heard, mut missed, mut named, mut named_heard) = (0usize, 0usize, 0usize, 0usize);
    let mut dropped_by_echo_check = 0usize;
    for round in 0..rounds.max(answers.len()) {
        let which = round % answers.len();
        let Some(mut gate) = gate() else {
            return Ok(Value::Null);
        };
        let reference = EchoReference::new(20);
        let answer = &answers[which];
        reference.record(&Clip::new(answer.clone(), SAMPLE_RATE));
        let mut interrupter = Interrupter::new(vad, Some(reference)).map_err(|e| anyhow!(e))?;
        interrupter.set_playing_text(ANSWERS[which]);
        let delay = 320 + rng.below(1280);
        let gain = 0.2 + 0.3 * rng.unit();
        let start = SAMPLE_RATE as usize * 3 / 2;
        let total = (delay + answer.len()).max(start + users_wake.len()) + SAMPLE_RATE as usize;
        let mut mic = noise(total, 0.003, &mut rng);
        for (i, s) in answer.iter().enumerate() {
            mic[delay + i] += gain * s;
        }
        for (i, s) in users_wake.iter().enumerate() {
            mic[start + i] += s;
        }
        let woke = crate::audio::to_i16(&mic)
            .chunks(SAMPLE_RATE as usize / 50)
            .any(|piece| {
                matches!(
                    interrupter.hear(piece, &no_stt, Some(&mut gate)),
                    Some(Interruption::WakeWord(_))
                )
            });
        let says_name = crate::wake::strip::mentions(ANSWERS[which], "hey_jarvis");
        dropped_by_echo_check += interrupter.stats().wakes_in_own_voice;
        match (says_name, woke) {
            (true, w) => {
                named += 1;
                named_heard += usize::from(w);
            }
            (false, true) => heard += 1,
            (false, false) => missed += 1,
        }
    }
    Ok(json!({
        "over_other_answers": {"rounds": heard + missed, "heard": heard, "missed": missed},
        "detections_dropped_by_echo_check": dropped_by_echo_check,
        "over_answers_saying_the_name": {"rounds": named, "heard": named_heard},
    }))
}

/// Index just past the last 10 ms frame within 30 dB of the loudest.
fn last_voiced(x: &[f32]) -> usize {
    let frames: Vec<f32> = x
        .chunks(160)
        .map(|f| f.iter().map(|s| s * s).sum::<f32>() / f.len().max(1) as f32)
        .collect();
    let peak = frames.iter().copied().fold(0.0f32, f32::max);
    frames
        .iter()
        .rposition(|&e| e > peak * 1e-3)
        .map_or(x.len(), |i| ((i + 1) * 160).min(x.len()))
}

fn noise(n: usize, level: f32, rng: &mut Lcg) -> Vec<f32> {
    (0..n).map(|_| level * (2.0 * rng.unit() - 1.0)).collect()
}

/// A small deterministic generator (the runs are repeatable).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn unit(&mut self) -> f32 {
        self.next() as f32 / (1u64 << 31) as f32
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() as usize) % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_voiced_sample_ignores_the_quiet_tail() {
        let mut x = vec![0.5f32; 1600];
        x.extend(vec![0.0001f32; 3200]);
        assert_eq!(last_voiced(&x), 1600);
        assert_eq!(last_voiced(&[]), 0);
    }

    #[test]
    fn the_summary_has_quantiles_and_misses() {
        let mut took = vec![300.0, 100.0, 200.0];
        let s = summary(&mut took, 2);
        assert_eq!(s["p50"], 200.0);
        assert_eq!(s["max"], 300.0);
        assert_eq!(s["missed"], 2);
        assert_eq!(summary(&mut [], 1)["p50"], Value::Null);
    }
}
