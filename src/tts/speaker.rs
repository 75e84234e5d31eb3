//! The speaking half of the loop: sentences in, sound out, stoppable at
//! any moment.
//!
//! [`Speaker`] owns a thread with the [`Tts`] chain. Each sentence handed
//! to [`Speaker::say`] is synthesised there and queued to the
//! [`AudioSink`] while the previous one is still playing, so synthesis and
//! playback overlap. [`Speaker::stop`] (barge-in, "stop") drops whatever is
//! queued or sounding at once: a generation counter makes sentences queued
//! before the stop vanish without being synthesised.
//!
//! [`TurnSpeech`] is the [`EventSink`] a voice turn runs with: it cuts the
//! turn's `content` tokens into sentences as they stream and speaks each
//! one as soon as it is complete.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Sender};

use super::sentences::{self, SentenceSplitter};
use super::{Tts, TtsError};
use crate::audio::playback::{AudioSink, Clip, PlaybackError};
use crate::cancel::CancelToken;
use crate::events::{Event, EventSink};

/// What one spoken sentence cost.
#[derive(Debug, Clone)]
pub struct SentenceStat {
    pub text: String,
    pub engine: &'static str,
    /// Synthesis time.
    pub synth_ms: f64,
    /// Audio length.
    pub audio_ms: f64,
    /// From `say()` to the clip being queued on the output.
    pub ready_to_audio_ms: f64,
    /// When the clip was queued on the output.
    pub queued_at: Instant,
}

/// A sentence that was not heard: its synthesis or its playback failed.
/// Collected by the speaker thread for [`Speaker::take_errors`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpeakError {
    #[error(transparent)]
    Synthesis(#[from] TtsError),
    #[error(transparent)]
    Playback(#[from] PlaybackError),
}

/// What a preparation that turned into speech did, for the stats.
struct SpokenAhead {
    engine: &'static str,
    synth_ms: f64,
    audio_ms: f64,
    queued_at: Instant,
}

/// What a job plays besides (or instead of) speech.
enum Sound {
    /// Only `text`, spoken.
    Speech,
    /// This clip as it is; `text` only names it in logs and stats.
    Clip(Clip),
    /// This clip, then `text` spoken, as one clip: no gap between them,
    /// and one stream on the output (a chime and its label).
    Before(Clip),
}

/// What the speaker thread does with a job's text.
enum Work {
    /// Say it, with this sound.
    Say(Sound),
    /// Synthesise it now and keep it, without playing it, for a sentence
    /// that is likely to be said next ([`Speaker::prepare`]). Skipped when
    /// any sentence was said after it was asked for (the number of
    /// sentences said then).
    Prepare { said_before: u64 },
}

struct Job {
    text: String,
    work: Work,
    generation: u64,
    said_at: Instant,
}

/// A preparation under way ([`Shared::preparing`]).
struct Preparing {
    text: String,
    /// The `said` count when it was asked for.
    said_before: u64,
    generation: u64,
    /// Pieces made and not yet played.
    made: Vec<Clip>,
    /// Set once its sentence was said: the volume then, and when the
    /// first piece was queued. From then on each piece plays as it comes.
    playing: Option<(f32, Instant)>,
    /// Audio queued so far.
    audio_ms: f64,
}

impl Preparing {
    /// Its sentence was said first after it was asked for: play what was
    /// made, and every piece from now on. False when a piece could not
    /// be queued (a stop came, or the output failed).
    fn start_playing(&mut self, sink: &dyn AudioSink, shared: &Shared) -> bool {
        let volume = f32::from_bits(shared.volume.load(Ordering::SeqCst));
        self.playing = Some((volume, Instant::now()));
        tracing::debug!(
            "the prepared \"{}\" was said while being made: playing it",
            self.text
        );
        for earlier in std::mem::take(&mut self.made) {
            self.audio_ms += earlier.seconds() * 1000.0;
            if !play_piece(sink, shared, self.generation, &earlier.with_volume(volume)) {
                return false;
            }
        }
        true
    }
}

#[derive(Default)]
struct Shared {
    generation: AtomicU64,
    /// Sentences said and not yet queued on the output (or dropped).
    pending: AtomicUsize,
    /// Sentences and sounds said so far (a prepared sentence is only
    /// made while nothing else was said since it was asked for).
    said: AtomicU64,
    /// The sentence last prepared and its audio, taken by the first
    /// [`Speaker::say`] of the same text.
    prepared: Mutex<Option<(String, super::Spoken)>>,
    /// The last few sentences said, each with the `said` count it made:
    /// a preparation of the very sentence said first after it was asked
    /// for, still being synthesised, starts playing it (its pieces so far,
    /// then each as it is made) instead of finishing first — also when
    /// the rest of the answer was queued behind it at once.
    recent_said: Mutex<std::collections::VecDeque<(u64, String)>>,
    /// A sentence a preparation already played when it was said (so its
    /// own job only records it).
    spoken_ahead: Mutex<Option<(String, SpokenAhead)>>,
    /// The preparation being synthesised now, with its pieces so far: a
    /// [`Speaker::say`] of its text plays them at once, from the caller's
    /// thread, rather than when the next piece is made (for a sentence of
    /// two pieces, that was its whole synthesis).
    preparing: Mutex<Option<Preparing>>,
    /// f32 bits of the volume in [0, 1].
    volume: AtomicU32,
    stats: Mutex<Vec<SentenceStat>>,
    errors: Mutex<Vec<SpeakError>>,
    /// Held while checking the generation and queueing a clip, and while
    /// stopping, so a clip can't slip onto the output just after a stop.
    play_lock: Mutex<()>,
}

/// Speaks sentences in order on one output; see the module docs.
pub struct Speaker {
    tx: Sender<Job>,
    shared: Arc<Shared>,
    sink: Arc<dyn AudioSink>,
}

impl Speaker {
    /// Start the speaking thread with these engines and this output.
    pub fn start(tts: Tts, sink: Arc<dyn AudioSink>) -> Result<Speaker, TtsError> {
        Self::start_loading(Box::new(move || tts), sink)
    }

    /// Like [`Speaker::start`], but the voices load on the speaker's own
    /// thread: the caller goes on at once (a voice model takes a second or
    /// more to load, off the path to listening), and what is queued
    /// meanwhile is spoken once they are ready.
    pub fn start_loading(
        load: Box<dyn FnOnce() -> Tts + Send>,
        sink: Arc<dyn AudioSink>,
    ) -> Result<Speaker, TtsError> {
        let (tx, rx) = unbounded::<Job>();
        let shared = Arc::new(Shared::default());
        shared.volume.store(1.0f32.to_bits(), Ordering::SeqCst);
        let worker_shared = shared.clone();
        let worker_sink = sink.clone();
        std::thread::Builder::new()
            .name("speaker".into())
            .spawn(move || {
                let mut tts = load();
                for job in rx {
                    match &job.work {
                        Work::Prepare { said_before } => {
                            prepare_one(
                                &mut tts,
                                worker_sink.as_ref(),
                                &worker_shared,
                                &job,
                                *said_before,
                            );
                        }
                        Work::Say(sound) => {
                            speak_one(&mut tts, worker_sink.as_ref(), &worker_shared, &job, sound);
                            worker_shared.pending.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                }
            })
            .map_err(|e| TtsError::SpeakerThread(e.to_string()))?;
        Ok(Speaker { tx, shared, sink })
    }

    /// Queue one sentence (already cleaned for speech).
    pub fn say(&self, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        self.queue(text.to_string(), Sound::Speech);
    }

    /// Queue `sound` followed by `text` spoken, played as one clip (a
    /// timer's chime and its label). When the voice fails the sound still
    /// plays.
    pub fn say_after(&self, sound: Clip, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            self.play("sound", sound);
            return;
        }
        self.queue(text.to_string(), Sound::Before(sound));
    }

    /// Queue a sound (a timer's chime) in line with the sentences, so it
    /// plays after what is already queued and is stopped like speech.
    /// `label` names it in logs and stats.
    pub fn play(&self, label: &str, clip: Clip) {
        if clip.samples.is_empty() {
            return;
        }
        self.queue(label.to_string(), Sound::Clip(clip));
    }

    /// How many sentences and sounds were said so far: taken when a
    /// prediction begins, for [`Speaker::prepare`].
    pub fn said_count(&self) -> u64 {
        self.shared.said.load(Ordering::SeqCst)
    }

    /// Synthesise `text` now, in the background of this speaker, without
    /// playing it: a sentence likely to be said next (the answer a
    /// command reads out, predicted while its pause completes). When
    /// [`Speaker::say`] then gets the same text, it plays that audio
    /// instead of synthesising again. Preparing never counts as speaking,
    /// and it is skipped when anything was said since `said_before` (the
    /// [`Speaker::said_count`] when the prediction began): the turn got
    /// there first, and the prediction may already be stale.
    pub fn prepare(&self, text: &str, said_before: u64) {
        let text = text.trim();
        if text.is_empty() || self.said_count() != said_before {
            return;
        }
        let job = Job {
            text: text.to_string(),
            work: Work::Prepare { said_before },
            generation: self.shared.generation.load(Ordering::SeqCst),
            said_at: Instant::now(),
        };
        let _ = self.tx.send(job);
    }

    fn queue(&self, text: String, sound: Sound) {
        if let (Sound::Speech, Ok(mut recent)) = (&sound, self.shared.recent_said.lock()) {
            // Set before the count moves, so a preparation that sees the
            // new count finds its text.
            if recent.len() >= RECENT_SAID {
                recent.pop_front();
            }
            recent.push_back((self.shared.said.load(Ordering::SeqCst) + 1, text.clone()));
        }
        self.shared.said.fetch_add(1, Ordering::SeqCst);
        self.shared.pending.fetch_add(1, Ordering::SeqCst);
        if let Sound::Speech = sound {
            self.play_preparation_now(&text);
        }
        let job = Job {
            text,
            work: Work::Say(sound),
            generation: self.shared.generation.load(Ordering::SeqCst),
            said_at: Instant::now(),
        };
        if self.tx.send(job).is_err() {
            self.shared.pending.fetch_sub(1, Ordering::SeqCst);
            tracing::error!("the speaker thread has stopped; cannot speak");
        }
    }

    /// `text` was just said: when it is the sentence being prepared and
    /// the first said since, the pieces made so far play now, and the
    /// rest as the speaker thread makes them.
    fn play_preparation_now(&self, text: &str) {
        let Ok(mut preparing) = self.shared.preparing.lock() else {
            return;
        };
        let Some(p) = preparing.as_mut() else {
            return;
        };
        if p.playing.is_some()
            || p.made.is_empty()
            || p.text != text
            || p.generation != self.shared.generation.load(Ordering::SeqCst)
            || !said_first(&self.shared, p.said_before, text)
        {
            return;
        }
        if !p.start_playing(self.sink.as_ref(), &self.shared) {
            // The speaker thread sees the generation or the error at its
            // next piece; nothing more plays.
            tracing::debug!("the prepared \"{text}\" could not start playing");
        }
    }

    /// Queue a whole text, sentence by sentence.
    pub fn say_all(&self, text: &str) {
        for sentence in sentences::split(text) {
            self.say(&sentence);
        }
    }

    /// Stop speaking now: drop queued sentences and silence the output.
    pub fn stop(&self) {
        let _guard = self.shared.play_lock.lock();
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        self.sink.stop();
    }

    /// Anything still to be synthesised or sounding.
    pub fn is_speaking(&self) -> bool {
        self.shared.pending.load(Ordering::SeqCst) > 0 || self.sink.is_playing()
    }

    /// Wait until everything said has played, `cancel` fires, or `limit`
    /// passes. Returns true when speech finished.
    pub fn wait_done(&self, cancel: &CancelToken, limit: Duration) -> bool {
        let started = Instant::now();
        while self.is_speaking() {
            if cancel.is_cancelled() || started.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Volume in [0, 1] for sentences synthesised from now on.
    pub fn set_volume(&self, volume: f32) {
        let v = if volume.is_finite() {
            volume.clamp(0.0, 1.0)
        } else {
            1.0
        };
        self.shared.volume.store(v.to_bits(), Ordering::SeqCst);
    }

    pub fn volume(&self) -> f32 {
        f32::from_bits(self.shared.volume.load(Ordering::SeqCst))
    }

    /// The output, for its description and played-seconds counter.
    pub fn sink(&self) -> &Arc<dyn AudioSink> {
        &self.sink
    }

    /// Per-sentence figures since the last call (and clears them).
    pub fn take_stats(&self) -> Vec<SentenceStat> {
        self.shared
            .stats
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }

    /// Synthesis/playback errors since the last call (and clears them).
    pub fn take_errors(&self) -> Vec<SpeakError> {
        self.shared
            .errors
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }
}

fn speak_one(tts: &mut Tts, sink: &dyn AudioSink, shared: &Shared, job: &Job, sound: &Sound) {
    let stale = |shared: &Shared| shared.generation.load(Ordering::SeqCst) != job.generation;
    if stale(shared) {
        return;
    }
    // Background jobs wait while an answer is synthesised and played.
    let _live = crate::cpu::LiveWork::begin();
    let as_is = |clip: &Clip| super::Spoken {
        clip: clip.clone(),
        engine: "clip",
        ms: 0.0,
        failures: Vec::new(),
    };
    if let Sound::Speech = sound {
        if let Some(ahead) = take_spoken_ahead(shared, &job.text) {
            record(shared, job, ahead);
            return;
        }
        if take_prepared_is_none(shared, &job.text) {
            stream_one(tts, sink, shared, job);
            return;
        }
    }
    let synthesized = match sound {
        Sound::Clip(clip) => Ok(as_is(clip)),
        Sound::Speech => match take_prepared(shared, &job.text) {
            Some(spoken) => Ok(spoken),
            None => tts.synthesize(&job.text),
        },
        Sound::Before(_) => tts.synthesize(&job.text),
    };
    let spoken = match (synthesized, sound) {
        (Ok(mut spoken), Sound::Before(sound)) => {
            let mut samples = sound.resampled(spoken.clip.sample_rate).samples;
            samples.append(&mut spoken.clip.samples);
            spoken.clip.samples = samples;
            spoken
        }
        (Ok(spoken), _) => spoken,
        (Err(e), sound) => {
            tracing::error!("cannot speak \"{}\": {e:#}", job.text);
            if let Ok(mut errors) = shared.errors.lock() {
                errors.push(e.into());
            }
            match sound {
                // The chime still rings without its words.
                Sound::Before(sound) => as_is(sound),
                _ => return,
            }
        }
    };
    let volume = f32::from_bits(shared.volume.load(Ordering::SeqCst));
    let audio_ms = spoken.clip.seconds() * 1000.0;
    let clip = spoken.clip.with_volume(volume);
    let guard = shared.play_lock.lock();
    // A stop may have come while synthesising.
    if stale(shared) {
        return;
    }
    let played = sink.play(&clip);
    drop(guard);
    if let Err(e) = played {
        tracing::error!("cannot play speech on {}: {e:#}", sink.describe());
        if let Ok(mut errors) = shared.errors.lock() {
            errors.push(e.into());
        }
        return;
    }
    let queued_at = Instant::now();
    tracing::debug!(
        engine = spoken.engine,
        synth_ms = spoken.ms,
        audio_ms,
        "spoke \"{}\"",
        job.text
    );
    if let Ok(mut stats) = shared.stats.lock() {
        stats.push(SentenceStat {
            text: job.text.clone(),
            engine: spoken.engine,
            synth_ms: spoken.ms,
            audio_ms,
            ready_to_audio_ms: (queued_at - job.said_at).as_secs_f64() * 1000.0,
            queued_at,
        });
    }
}

/// Make a prepared sentence (see [`Speaker::prepare`]) unless something
/// was said or stopped since it was asked for: then it would only delay
/// what is being said.
fn prepare_one(tts: &mut Tts, sink: &dyn AudioSink, shared: &Shared, job: &Job, said_before: u64) {
    let moved_on = |shared: &Shared| {
        shared.said.load(Ordering::SeqCst) != said_before
            || shared.generation.load(Ordering::SeqCst) != job.generation
    };
    // The same text asked for twice (two looks at one pause): once.
    let made = |shared: &Shared| {
        shared
            .prepared
            .lock()
            .is_ok_and(|slot| slot.as_ref().is_some_and(|(t, _)| *t == job.text))
    };
    if moved_on(shared) || made(shared) {
        return;
    }
    let _live = crate::cpu::LiveWork::begin();
    let slot = || shared.preparing.lock().unwrap_or_else(|e| e.into_inner());
    *slot() = Some(Preparing {
        text: job.text.clone(),
        said_before,
        generation: job.generation,
        made: Vec::new(),
        playing: None,
        audio_ms: 0.0,
    });
    let result = tts.synthesize_pieces(&job.text, &mut |clip: Clip| {
        let mut guard = slot();
        let Some(p) = guard.as_mut() else {
            return false;
        };
        if p.playing.is_none() {
            let said = shared.said.load(Ordering::SeqCst);
            if said != said_before {
                if !said_first(shared, said_before, &job.text) {
                    // Something else was said: this would only delay it.
                    return false;
                }
                if !p.start_playing(sink, shared) {
                    return false;
                }
            }
        }
        match p.playing {
            Some((volume, _)) => {
                p.audio_ms += clip.seconds() * 1000.0;
                play_piece(sink, shared, job.generation, &clip.with_volume(volume))
            }
            None => {
                p.made.push(clip);
                true
            }
        }
    });
    let Some(Preparing {
        made,
        playing,
        audio_ms,
        ..
    }) = slot().take()
    else {
        return;
    };
    if playing.is_some() {
        sink.end_pieces();
    }
    match (result, playing) {
        (Ok((engine, synth_ms)), Some((_, queued_at))) => {
            if let Ok(mut ahead) = shared.spoken_ahead.lock() {
                *ahead = Some((
                    job.text.clone(),
                    SpokenAhead {
                        engine,
                        synth_ms,
                        audio_ms,
                        queued_at,
                    },
                ));
            }
        }
        // Kept also when its sentence was said just after the last piece
        // was made: that sentence's own job, queued behind this one,
        // takes it.
        (Ok((engine, synth_ms)), None)
            if !made.is_empty()
                && (!moved_on(shared)
                    || (shared.generation.load(Ordering::SeqCst) == job.generation
                        && said_first(shared, said_before, &job.text))) =>
        {
            tracing::debug!(synth_ms, "prepared \"{}\"", job.text);
            let rate = made[0].sample_rate;
            let samples: Vec<f32> = made.into_iter().flat_map(|c| c.samples).collect();
            if let Ok(mut slot) = shared.prepared.lock() {
                *slot = Some((
                    job.text.clone(),
                    super::Spoken {
                        clip: Clip::new(samples, rate),
                        engine,
                        ms: synth_ms,
                        failures: Vec::new(),
                    },
                ));
            }
        }
        (Ok(_), None) => {}
        // Heard in part: the sentence's own job must not say it again.
        (Err(e), Some((_, queued_at))) => {
            tracing::error!("cannot speak \"{}\": {e:#}", job.text);
            if let Ok(mut errors) = shared.errors.lock() {
                errors.push(e.into());
            }
            if let Ok(mut ahead) = shared.spoken_ahead.lock() {
                *ahead = Some((
                    job.text.clone(),
                    SpokenAhead {
                        engine: "none",
                        synth_ms: 0.0,
                        audio_ms,
                        queued_at,
                    },
                ));
            }
        }
        // The sentence, if said, is synthesised again and fails there.
        (Err(e), None) => tracing::debug!("could not prepare \"{}\": {e:#}", job.text),
    }
}

/// Queue one piece of a sentence on the output unless a stop came first;
/// false when it was not queued (stopped, or the output failed).
fn play_piece(sink: &dyn AudioSink, shared: &Shared, generation: u64, clip: &Clip) -> bool {
    let stale = || shared.generation.load(Ordering::SeqCst) != generation;
    let guard = shared.play_lock.lock();
    if stale() {
        return false;
    }
    let played = sink.play_piece(clip);
    drop(guard);
    match played {
        Ok(()) => true,
        Err(e) => {
            tracing::error!("cannot play speech on {}: {e:#}", sink.describe());
            if let Ok(mut errors) = shared.errors.lock() {
                errors.push(e.into());
            }
            false
        }
    }
}

/// Say a sentence piece by piece: its first sound plays while the rest is
/// still being synthesised.
fn stream_one(tts: &mut Tts, sink: &dyn AudioSink, shared: &Shared, job: &Job) {
    let volume = f32::from_bits(shared.volume.load(Ordering::SeqCst));
    let mut first_at = None;
    let mut audio_ms = 0.0;
    let result = tts.synthesize_pieces(&job.text, &mut |clip: Clip| {
        audio_ms += clip.seconds() * 1000.0;
        let queued = play_piece(sink, shared, job.generation, &clip.with_volume(volume));
        if queued && first_at.is_none() {
            first_at = Some(Instant::now());
        }
        queued
    });
    sink.end_pieces();
    match (result, first_at) {
        (Ok((engine, synth_ms)), Some(queued_at)) => record(
            shared,
            job,
            SpokenAhead {
                engine,
                synth_ms,
                audio_ms,
                queued_at,
            },
        ),
        (Ok(_), None) => {}
        (Err(e), _) => {
            tracing::error!("cannot speak \"{}\": {e:#}", job.text);
            if let Ok(mut errors) = shared.errors.lock() {
                errors.push(e.into());
            }
        }
    }
}

/// The log line and stats of a sentence spoken piece by piece.
fn record(shared: &Shared, job: &Job, spoken: SpokenAhead) {
    tracing::debug!(
        engine = spoken.engine,
        synth_ms = spoken.synth_ms,
        audio_ms = spoken.audio_ms,
        "spoke \"{}\"",
        job.text
    );
    if let Ok(mut stats) = shared.stats.lock() {
        stats.push(SentenceStat {
            text: job.text.clone(),
            engine: spoken.engine,
            synth_ms: spoken.synth_ms,
            audio_ms: spoken.audio_ms,
            ready_to_audio_ms: spoken
                .queued_at
                .saturating_duration_since(job.said_at)
                .as_secs_f64()
                * 1000.0,
            queued_at: spoken.queued_at,
        });
    }
}

/// How many sentences said are remembered for [`said_first`]: more than
/// an answer queues at once.
const RECENT_SAID: usize = 16;

/// Whether the first sentence said after the `said` count was
/// `said_before` is `text` (a sound in between is something else said).
fn said_first(shared: &Shared, said_before: u64, text: &str) -> bool {
    shared.recent_said.lock().is_ok_and(|recent| {
        recent
            .iter()
            .any(|(n, t)| *n == said_before + 1 && t == text)
    })
}

/// The sentence a preparation already played, when it is `text`.
fn take_spoken_ahead(shared: &Shared, text: &str) -> Option<SpokenAhead> {
    let mut slot = shared.spoken_ahead.lock().ok()?;
    if slot.as_ref().is_some_and(|(t, _)| t == text) {
        return slot.take().map(|(_, s)| s);
    }
    None
}

/// Whether no prepared audio waits for `text` (then it is streamed).
fn take_prepared_is_none(shared: &Shared, text: &str) -> bool {
    !shared
        .prepared
        .lock()
        .is_ok_and(|slot| slot.as_ref().is_some_and(|(t, _)| t == text))
}

/// The prepared audio of `text`, once.
fn take_prepared(shared: &Shared, text: &str) -> Option<super::Spoken> {
    let mut slot = shared.prepared.lock().ok()?;
    if slot.as_ref().is_some_and(|(t, _)| t == text) {
        let (_, spoken) = slot.take()?;
        tracing::debug!("speaking the prepared \"{text}\"");
        return Some(super::Spoken { ms: 0.0, ..spoken });
    }
    None
}

/// The event sink of a voice turn: speaks `content` sentence by sentence
/// as it streams; speaks the stored answer when nothing streamed (tree
/// answers), and the error sentence when the turn failed.
pub struct TurnSpeech<'a> {
    speaker: &'a Speaker,
    splitter: SentenceSplitter,
    spoke_any: bool,
    /// When the first complete sentence was handed to the speaker.
    pub first_sentence_at: Option<Instant>,
    /// Everything spoken, in order (what "repeat" says again).
    pub spoken: Vec<String>,
    /// The final `done` or `error` event, for the caller.
    pub last: Option<Event>,
    /// Forwarded every event (logs, an API stream…).
    forward: Option<&'a mut dyn EventSink>,
}

impl<'a> TurnSpeech<'a> {
    pub fn new(speaker: &'a Speaker) -> Self {
        Self {
            speaker,
            splitter: SentenceSplitter::new(),
            spoke_any: false,
            first_sentence_at: None,
            spoken: Vec::new(),
            last: None,
            forward: None,
        }
    }

    /// The first piece of `answer` a turn speaks (its first sentence, or
    /// that sentence's first clause): what [`Speaker::prepare`] makes
    /// ready for an answer known before the turn.
    pub fn first_piece(answer: &str) -> Option<String> {
        let first = sentences::split(answer).into_iter().next()?;
        Some(sentences::first_clause(&first).0)
    }

    /// Also pass every event on to `sink`.
    pub fn forward_to(mut self, sink: &'a mut dyn EventSink) -> Self {
        self.forward = Some(sink);
        self
    }

    fn say(&mut self, sentence: String) {
        if self.first_sentence_at.is_none() {
            self.first_sentence_at = Some(Instant::now());
            // The first audio waits only for the first clause.
            let (head, rest) = sentences::first_clause(&sentence);
            self.speaker.say(&head);
            if let Some(rest) = rest {
                self.speaker.say(&rest);
            }
        } else {
            self.speaker.say(&sentence);
        }
        self.spoke_any = true;
        self.spoken.push(sentence);
    }

    fn say_text(&mut self, text: &str) {
        for sentence in sentences::split(text) {
            self.say(sentence);
        }
    }
}

impl EventSink for TurnSpeech<'_> {
    fn emit(&mut self, event: &Event) {
        match event {
            Event::Content { data } => {
                for sentence in self.splitter.push(data) {
                    self.say(sentence);
                }
            }
            Event::Done(done) => {
                if let Some(rest) = self.splitter.finish() {
                    self.say(rest);
                }
                if !self.spoke_any {
                    self.say_text(&done.response.clone());
                }
                self.last = Some(event.clone());
            }
            Event::Error { message } => {
                // Whatever streamed before the failure was already said;
                // the error sentence explains why it stopped.
                let _ = self.splitter.finish();
                self.say_text(&message.clone());
                self.last = Some(event.clone());
            }
            _ => {}
        }
        if let Some(forward) = self.forward.as_mut() {
            forward.emit(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::playback::{Clip, PacedWavSink};
    use crate::events::Done;
    use crate::tts::Synthesizer;

    /// 0.2 s of tone per word, after a fixed synthesis delay.
    struct Slow(Duration);
    impl Synthesizer for Slow {
        fn name(&self) -> &'static str {
            "slow"
        }
        fn synthesize(&mut self, text: &str) -> Result<Clip, TtsError> {
            std::thread::sleep(self.0);
            let words = text.split_whitespace().count();
            Ok(Clip::new(vec![0.25; 3200 * words], 16_000))
        }
    }

    fn speaker(dir: &std::path::Path, delay_ms: u64) -> Speaker {
        let sink = Arc::new(PacedWavSink::create(&dir.join("out.wav")).unwrap());
        Speaker::start(
            Tts::with_engines(vec![Box::new(Slow(Duration::from_millis(delay_ms)))]),
            sink,
        )
        .unwrap()
    }

    #[test]
    fn start_loading_returns_at_once_and_speaks_what_was_queued_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Arc::new(PacedWavSink::create(&dir.path().join("out.wav")).unwrap());
        let (loaded_tx, loaded_rx) = crossbeam_channel::bounded::<()>(1);
        let started = std::time::Instant::now();
        let speaker = Speaker::start_loading(
            Box::new(move || {
                // The voice is ready only when the test says so.
                let _ = loaded_rx.recv();
                Tts::with_engines(vec![Box::new(Slow(Duration::from_millis(1)))])
            }),
            sink,
        )
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(1));
        speaker.say("queued while loading");
        assert!(
            speaker.is_speaking(),
            "a queued sentence counts as speaking"
        );
        assert!(!speaker.wait_done(&CancelToken::new(), Duration::from_millis(100)));
        loaded_tx.send(()).unwrap();
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        let stats = speaker.take_stats();
        assert_eq!(stats.len(), 1);
        assert_eq!(stats[0].text, "queued while loading");
        assert_eq!(stats[0].engine, "slow");
    }

    #[test]
    fn a_clip_plays_in_line_with_the_sentences() {
        let dir = tempfile::tempdir().unwrap();
        let speaker = speaker(dir.path(), 5);
        speaker.say("one two");
        speaker.play("chime", Clip::new(vec![0.5; 1600], 16_000));
        speaker.say("three");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        let stats = speaker.take_stats();
        let order: Vec<_> = stats.iter().map(|s| (s.text.as_str(), s.engine)).collect();
        assert_eq!(
            order,
            [("one two", "slow"), ("chime", "clip"), ("three", "slow")]
        );
        assert!((stats[1].audio_ms - 100.0).abs() < 1.0);
        // A stop drops a queued clip like a sentence.
        speaker.say("four five six seven");
        speaker.play("chime", Clip::new(vec![0.5; 1600], 16_000));
        speaker.stop();
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        assert!(speaker.take_stats().iter().all(|s| s.engine != "clip"));
        // A sound before a sentence is one clip: sound, then the voice.
        speaker.say_after(Clip::new(vec![0.5; 1600], 16_000), "eight nine");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        let stats = speaker.take_stats();
        assert_eq!(stats.len(), 1);
        assert!(
            (stats[0].audio_ms - (100.0 + 400.0)).abs() < 1.0,
            "{stats:?}"
        );
    }

    #[test]
    fn first_sentence_plays_before_the_stream_ends() {
        let dir = tempfile::tempdir().unwrap();
        let speaker = speaker(dir.path(), 20);
        let mut turn = TurnSpeech::new(&speaker);
        turn.emit(&Event::Content {
            data: "Hello there.".into(),
        });
        turn.emit(&Event::Content {
            data: " More".into(),
        });
        // The first sentence is out while the LLM is still "streaming".
        let t = Instant::now();
        while speaker.sink().played_seconds() == 0.0 {
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "no audio for the first sentence"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        turn.emit(&Event::Content {
            data: " words follow".into(),
        });
        turn.emit(&Event::Done(Done {
            response: "ignored".into(),
            ..Default::default()
        }));
        assert_eq!(turn.spoken, vec!["Hello there.", "More words follow"]);
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        let stats = speaker.take_stats();
        assert_eq!(stats.len(), 2);
        assert!(stats[0].ready_to_audio_ms < 300.0, "{:?}", stats[0]);
    }

    #[test]
    fn stop_silences_at_once_and_drops_queued_sentences() {
        let dir = tempfile::tempdir().unwrap();
        let speaker = speaker(dir.path(), 5);
        for _ in 0..5 {
            speaker.say("one two three four five");
        }
        let t = Instant::now();
        while speaker.sink().played_seconds() < 0.1 {
            assert!(t.elapsed() < Duration::from_secs(2));
            std::thread::sleep(Duration::from_millis(2));
        }
        speaker.stop();
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_millis(500)));
        let at_stop = speaker.sink().played_seconds();
        std::thread::sleep(Duration::from_millis(150));
        assert!(speaker.sink().played_seconds() - at_stop < 0.02);
        assert!(at_stop < 1.0, "played {at_stop} s of 5 s");
    }

    #[test]
    fn tree_answers_and_errors_are_spoken_whole() {
        let dir = tempfile::tempdir().unwrap();
        let speaker = speaker(dir.path(), 1);
        let mut turn = TurnSpeech::new(&speaker);
        turn.emit(&Event::Done(Done {
            response: "It is noon. Enjoy.".into(),
            ..Default::default()
        }));
        assert_eq!(turn.spoken, vec!["It is noon.", "Enjoy."]);
        let mut turn = TurnSpeech::new(&speaker);
        turn.emit(&Event::Error {
            message: "I can't reach the language model.".into(),
        });
        assert_eq!(turn.spoken, vec!["I can't reach the language model."]);
    }

    #[test]
    fn volume_scales_what_is_played() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.wav");
        let sink = Arc::new(crate::audio::playback::WavFileSink::create(&path).unwrap());
        let speaker = Speaker::start(
            Tts::with_engines(vec![Box::new(Slow(Duration::ZERO))]),
            sink.clone(),
        )
        .unwrap();
        speaker.set_volume(0.5);
        speaker.say("one");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(2)));
        sink.finish().unwrap();
        let max = hound::WavReader::open(&path)
            .unwrap()
            .samples::<i16>()
            .map(|s| s.unwrap().abs())
            .max()
            .unwrap();
        assert!((4000..=4200).contains(&max), "{max}");
    }

    /// Counts its syntheses; each takes `delay`.
    struct Counted {
        delay: Duration,
        made: Arc<AtomicUsize>,
    }
    impl Synthesizer for Counted {
        fn name(&self) -> &'static str {
            "counted"
        }
        fn synthesize(&mut self, text: &str) -> Result<Clip, TtsError> {
            std::thread::sleep(self.delay);
            self.made.fetch_add(1, Ordering::SeqCst);
            let words = text.split_whitespace().count();
            Ok(Clip::new(vec![0.25; 1600 * words], 16_000))
        }
    }

    fn counted(dir: &std::path::Path, delay_ms: u64) -> (Speaker, Arc<AtomicUsize>) {
        let made = Arc::new(AtomicUsize::new(0));
        let sink = Arc::new(PacedWavSink::create(&dir.join("out.wav")).unwrap());
        let tts = Tts::with_engines(vec![Box::new(Counted {
            delay: Duration::from_millis(delay_ms),
            made: made.clone(),
        })]);
        (Speaker::start(tts, sink).unwrap(), made)
    }

    fn wait_for(made: &AtomicUsize, n: usize) {
        let started = Instant::now();
        while made.load(Ordering::SeqCst) < n {
            assert!(started.elapsed() < Duration::from_secs(5), "never made {n}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Wait until `text`'s prepared audio is kept for its sentence.
    fn wait_prepared(speaker: &Speaker, text: &str) {
        let started = Instant::now();
        while take_prepared_is_none(&speaker.shared, text) {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "never kept {text}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_prepared_sentence_plays_without_being_synthesised_again() {
        let dir = tempfile::tempdir().unwrap();
        let (speaker, made) = counted(dir.path(), 300);
        speaker.prepare("It is noon.", speaker.said_count());
        assert!(!speaker.is_speaking(), "preparing is not speaking");
        // Asked again (a second look at the same pause): made once.
        speaker.prepare("It is noon.", speaker.said_count());
        // Made and kept (not only made: said between the two, it would
        // play as it is made, with its synthesis time).
        wait_prepared(&speaker, "It is noon.");
        assert_eq!(made.load(Ordering::SeqCst), 1);
        speaker.say("It is noon.");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        let stats = speaker.take_stats();
        assert_eq!(stats.len(), 1);
        assert_eq!(stats[0].synth_ms, 0.0);
        assert!(
            stats[0].ready_to_audio_ms < 150.0,
            "{}",
            stats[0].ready_to_audio_ms
        );
        assert_eq!(made.load(Ordering::SeqCst), 1);
        // Taken once: the same sentence again is synthesised.
        speaker.say("It is noon.");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        assert_eq!(made.load(Ordering::SeqCst), 2);
    }

    /// Three pieces of 0.1 s, `gap` apart; counts whole sentences made.
    struct Pieces {
        gap: Duration,
        made: Arc<AtomicUsize>,
    }
    impl Synthesizer for Pieces {
        fn name(&self) -> &'static str {
            "pieces"
        }
        fn synthesize(&mut self, _text: &str) -> Result<Clip, TtsError> {
            unreachable!("speech is made piece by piece")
        }
        fn synthesize_pieces(
            &mut self,
            _text: &str,
            piece: &mut dyn FnMut(Clip) -> bool,
        ) -> Result<(), TtsError> {
            for _ in 0..3 {
                std::thread::sleep(self.gap);
                if !piece(Clip::new(vec![0.25; 1600], 16_000)) {
                    break;
                }
            }
            self.made.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn a_sentence_said_while_it_is_prepared_plays_from_its_first_piece() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Arc::new(PacedWavSink::create(&dir.path().join("out.wav")).unwrap());
        let made = Arc::new(AtomicUsize::new(0));
        let tts = Tts::with_engines(vec![Box::new(Pieces {
            gap: Duration::from_millis(150),
            made: made.clone(),
        })]);
        let speaker = Speaker::start(tts, sink.clone()).unwrap();
        speaker.prepare("It is noon.", speaker.said_count());
        // Said during the first piece: it plays when that piece is made,
        // not when the whole sentence is.
        std::thread::sleep(Duration::from_millis(50));
        let said = Instant::now();
        speaker.say("It is noon.");
        let started = Instant::now();
        while sink.played_seconds() == 0.0 {
            assert!(started.elapsed() < Duration::from_secs(5), "nothing played");
            std::thread::sleep(Duration::from_millis(2));
        }
        let first = said.elapsed();
        assert!(first < Duration::from_millis(300), "{first:?}");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        // Made once, all of it heard once.
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert!(
            (sink.played_seconds() - 0.3).abs() < 0.02,
            "{}",
            sink.played_seconds()
        );
        let stats = speaker.take_stats();
        assert_eq!(stats.len(), 1);
        assert!(
            (stats[0].audio_ms - 300.0).abs() < 1.0,
            "{}",
            stats[0].audio_ms
        );
        // Not prepared: streamed as it is made, the first piece at once.
        let said = Instant::now();
        let before = sink.played_seconds();
        speaker.say("Something else.");
        while sink.played_seconds() == before {
            assert!(said.elapsed() < Duration::from_secs(5), "nothing played");
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(
            said.elapsed() < Duration::from_millis(400),
            "{:?}",
            said.elapsed()
        );
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        assert_eq!(made.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_sentence_said_between_its_prepared_pieces_plays_what_was_made_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Arc::new(PacedWavSink::create(&dir.path().join("out.wav")).unwrap());
        let made = Arc::new(AtomicUsize::new(0));
        let tts = Tts::with_engines(vec![Box::new(Pieces {
            gap: Duration::from_millis(300),
            made: made.clone(),
        })]);
        let speaker = Speaker::start(tts, sink.clone()).unwrap();
        speaker.prepare("It is noon.", speaker.said_count());
        // Said after its first piece was made and long before the second
        // is: that piece plays now, not when the next one comes.
        std::thread::sleep(Duration::from_millis(400));
        let said = Instant::now();
        speaker.say("It is noon.");
        while sink.played_seconds() == 0.0 {
            assert!(said.elapsed() < Duration::from_secs(5), "nothing played");
            std::thread::sleep(Duration::from_millis(2));
        }
        let first = said.elapsed();
        assert!(first < Duration::from_millis(100), "{first:?}");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        // Made once, every piece heard once, in one sentence's figures.
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert!(
            (sink.played_seconds() - 0.3).abs() < 0.02,
            "{}",
            sink.played_seconds()
        );
        let stats = speaker.take_stats();
        assert_eq!(stats.len(), 1);
        assert!(
            (stats[0].audio_ms - 300.0).abs() < 1.0,
            "{}",
            stats[0].audio_ms
        );
        // A stop while it plays silences the rest.
        speaker.prepare("It is one.", speaker.said_count());
        std::thread::sleep(Duration::from_millis(400));
        speaker.say("It is one.");
        speaker.stop();
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        assert!(
            sink.played_seconds() < 0.3 + 0.1 + 0.02,
            "{}",
            sink.played_seconds()
        );
    }

    #[test]
    fn a_prepared_first_sentence_plays_when_the_whole_answer_is_said_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Arc::new(PacedWavSink::create(&dir.path().join("out.wav")).unwrap());
        let made = Arc::new(AtomicUsize::new(0));
        let tts = Tts::with_engines(vec![Box::new(Pieces {
            gap: Duration::from_millis(150),
            made: made.clone(),
        })]);
        let speaker = Speaker::start(tts, sink.clone()).unwrap();
        speaker.prepare("Here is a short answer.", speaker.said_count());
        std::thread::sleep(Duration::from_millis(50));
        // A language model's answer: its sentences queued one after the
        // other while the first is still being prepared.
        let said = Instant::now();
        speaker.say("Here is a short answer.");
        speaker.say("It has two sentences.");
        let started = Instant::now();
        while sink.played_seconds() == 0.0 {
            assert!(started.elapsed() < Duration::from_secs(5), "nothing played");
            std::thread::sleep(Duration::from_millis(2));
        }
        let first = said.elapsed();
        assert!(first < Duration::from_millis(300), "{first:?}");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        // The first made once, the second once: two sentences heard.
        assert_eq!(made.load(Ordering::SeqCst), 2);
        assert!(
            (sink.played_seconds() - 0.6).abs() < 0.02,
            "{}",
            sink.played_seconds()
        );
        let texts: Vec<String> = speaker.take_stats().into_iter().map(|s| s.text).collect();
        assert_eq!(texts, ["Here is a short answer.", "It has two sentences."]);
    }

    #[test]
    fn a_prepared_sentence_said_as_its_last_piece_is_made_is_not_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let (speaker, made) = counted(dir.path(), 200);
        let begun = speaker.said_count();
        speaker.prepare("It is noon.", begun);
        // Said while the one piece is being made, with more behind it.
        std::thread::sleep(Duration::from_millis(50));
        speaker.say("It is noon.");
        speaker.say("Lunch is ready.");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        assert_eq!(made.load(Ordering::SeqCst), 2, "the first was made twice");
        let stats = speaker.take_stats();
        assert_eq!(stats.len(), 2);
        assert_eq!(stats[0].text, "It is noon.");
    }

    #[test]
    fn a_preparation_of_another_sentence_stops_when_something_else_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Arc::new(PacedWavSink::create(&dir.path().join("out.wav")).unwrap());
        let made = Arc::new(AtomicUsize::new(0));
        let tts = Tts::with_engines(vec![Box::new(Pieces {
            gap: Duration::from_millis(100),
            made: made.clone(),
        })]);
        let speaker = Speaker::start(tts, sink.clone()).unwrap();
        speaker.prepare("It is noon.", speaker.said_count());
        std::thread::sleep(Duration::from_millis(30));
        speaker.say("Timer set.");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        // Only what was said is heard: three pieces of "Timer set.".
        assert!(
            (sink.played_seconds() - 0.3).abs() < 0.02,
            "{}",
            sink.played_seconds()
        );
        let stats = speaker.take_stats();
        assert_eq!(stats.len(), 1);
        assert_eq!(stats[0].text, "Timer set.");
    }

    #[test]
    fn a_preparation_overtaken_by_speech_is_skipped_and_another_text_is_synthesised() {
        let dir = tempfile::tempdir().unwrap();
        let (speaker, made) = counted(dir.path(), 100);
        // Said before the preparation started: it would only delay it.
        speaker.say("Hello there.");
        speaker.prepare("It is noon.", speaker.said_count());
        speaker.say("Something else.");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(
            made.load(Ordering::SeqCst),
            2,
            "the overtaken preparation was synthesised"
        );
        // A prediction begun before something was said comes too late.
        let begun = speaker.said_count();
        speaker.say("Meanwhile.");
        speaker.prepare("It is noon.", begun);
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(made.load(Ordering::SeqCst), 3, "a late prediction was made");
        // A prepared sentence that is not the one said plays nothing.
        speaker.prepare("It is noon.", speaker.said_count());
        wait_for(&made, 4);
        speaker.say("It is one.");
        assert!(speaker.wait_done(&CancelToken::new(), Duration::from_secs(5)));
        let stats = speaker.take_stats();
        let texts: Vec<&str> = stats.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "Hello there.",
                "Something else.",
                "Meanwhile.",
                "It is one."
            ]
        );
        assert!(stats[3].synth_ms > 0.0);
        assert_eq!(made.load(Ordering::SeqCst), 5);
    }

    #[test]
    fn the_first_piece_is_what_a_turn_says_first() {
        assert_eq!(
            TurnSpeech::first_piece("It's 9:05 PM. Anything else?").as_deref(),
            Some("It's 9:05 PM.")
        );
        assert_eq!(
            TurnSpeech::first_piece("Your shopping list has batteries, milk, eggs and bread.")
                .as_deref(),
            Some("Your shopping list has batteries,")
        );
        assert_eq!(TurnSpeech::first_piece("   "), None);
    }
}
