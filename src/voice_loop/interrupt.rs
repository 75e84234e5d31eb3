//! The stop word and the wake word while the device talks or rings
//! (`[wake] stop_word`, on by default): either cuts the sound off.
//!
//! No registry ships a "stop" model, so "stop" is heard the way a request
//! is, only smaller: a second endpointer cuts short utterances out of what
//! the microphone hears during playback; one short enough to be a word or
//! two ([`MAX_WORD_MS`]) goes through the fast speech-to-text path and is
//! matched against a small vocabulary (`ring::is_stop_word`: "stop",
//! "enough", "be quiet", "shut up", …). Longer speech is never a stop word
//! (it is the user talking over the answer, or the answer itself).
//!
//! Within 200 ms of the end of the word: a pass takes ~100–250 ms, so it
//! can't wait for a hang-over. A pass starts on a worker thread at the
//! first quiet 10 ms frame after loud speech — usually the end of the
//! word — and its "stop" is believed once it has heard everything loud
//! and a short quiet has followed (`word.rs`: [`QUIET_DB`], [`QUIET_MS`]).
//! Speech after the pass's end makes it stale and the next quiet starts
//! another, so "don't stop" and "stop the music" are judged whole. When no
//! pass decided (a pass running long, loud echo that never goes quiet),
//! the endpointer's hang-over ([`HANGOVER_MS`]) ends the utterance and it
//! is judged whole, as before.
//!
//! Its own voice: with an echo-cancelled input (`audio.echo_cancelled`,
//! the USB Mic Array's channel 0) whatever is heard is the user's. Without
//! one, the speaker's echo is cancelled from everything heard here first
//! ([`crate::audio::aec`]): before, "stop" said over a sentence merged with
//! the echo into one long utterance and was missed (18–19 times in 20).
//! Then a short utterance or a wake-word detection is checked: one that
//! the microphone heard as mostly what the speaker was handed
//! ([`crate::audio::echo`]), or that the canceller took ≥ 10 dB out of
//! (`word::ECHO_GONE_DB`), is the device's own voice and is dropped before
//! any transcription.
//!
//! The wake word in its own voice: the device knows what it is saying. An
//! answer that says the wake word's name ("Jarvis here.", "Hey Jarvis is
//! the wake word") fires the detector on its echo often enough that the
//! echo check alone lets a few through (2–6 in 30 minutes), so a
//! detection while the text being played — or played within the last
//! [`PLAYED_GRACE_MS`] of heard audio, the echo's delay — mentions the
//! word's name (`wake::strip::mentions`) is dropped too
//! ([`Interrupter::set_playing_text`], [`PlayingText`]). The user's wake
//! word during any other answer still interrupts.

mod word;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::audio::aec::EchoCanceller;
use crate::audio::echo::{EchoReference, ECHO_SHARE};
use crate::audio::vad::{EndReason, Endpointer, Utterance, VadConfig, VadEvent};
use crate::audio::SAMPLE_RATE;
use crate::stt::Stt;

use super::wake::WakeGate;
use word::{judge, Done, Heard, Passes, Verdict, Word};

pub use word::{QUIET_DB, QUIET_MS};

/// Silence that ends a word heard during playback (ms) when no pass on
/// it decided earlier: the utterance is then judged whole.
pub const HANGOVER_MS: u32 = 150;
/// Speech longer than this (ms) is not a stop word and is not transcribed.
pub const MAX_WORD_MS: u64 = 1500;
/// Audio kept for checking a wake-word detection against the playback.
const RECENT_MS: usize = 1500;
/// Audio kept: the wake word's check, or a whole word-sized utterance
/// with its pre-roll (ms).
const HEARD_MS: u64 = 2500;
/// The longest wait for a running pass at an utterance's end (a pass is
/// bounded by the engine's wall cap well below this).
const PASS_WAIT: Duration = Duration::from_secs(3);
/// After a text stops sounding, a wake word detection still counts as
/// its echo for this much heard audio (ms): the echo comes 20–100 ms late
/// and the detector fires up to a few frames (80 ms each) after the word.
pub const PLAYED_GRACE_MS: u64 = 1000;

/// What cut the sound off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interruption {
    /// A stop word, as transcribed.
    Stop(String),
    /// The wake word (its name): the user has a new request.
    WakeWord(String),
}

/// Counts since the interrupter was made (`earshot bench stop`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InterruptStats {
    /// Short utterances heard (a word or two).
    pub words: usize,
    /// Of those, dropped as the device's own voice before transcription.
    pub own_voice: usize,
    /// Of those, decided by a transcription.
    pub transcribed: usize,
    /// Whisper passes run (several may look at one utterance as it grows).
    pub passes: usize,
    /// Wake-word detections dropped because what was playing says the
    /// word's name.
    pub wakes_in_own_text: usize,
    /// Wake-word detections dropped by the echo check.
    pub wakes_in_own_voice: usize,
}

/// What the speaker is saying now, settable from any thread (the turn's
/// worker sees the answer's text as it streams; the loop holds the
/// [`Interrupter`]). Cheap to clone; all clones are one value.
#[derive(Debug, Clone, Default)]
pub struct PlayingText(Arc<Mutex<Said>>);

#[derive(Debug, Default)]
struct Said {
    /// Bumped on every change, so the interrupter sees each one.
    version: u64,
    text: String,
}

impl PlayingText {
    /// The text sounding from now on (a sentence, a whole answer, a
    /// ring's label); `""` when the speaker has gone quiet.
    pub fn set(&self, text: &str) {
        if let Ok(mut said) = self.0.lock() {
            said.version += 1;
            said.text = text.to_string();
        }
    }

    /// Add a streamed piece of the answer being spoken (an `Event::Content`
    /// token): the answer so far counts as playing.
    pub fn push(&self, piece: &str) {
        if let Ok(mut said) = self.0.lock() {
            said.version += 1;
            said.text.push_str(piece);
        }
    }

    fn read(&self) -> Option<(u64, String)> {
        self.0.lock().ok().map(|s| (s.version, s.text.clone()))
    }

    fn version(&self) -> u64 {
        self.0.lock().map(|s| s.version).unwrap_or(0)
    }
}

/// The texts that count as the device's own words: the one playing and
/// the ones that stopped within the grace (by heard audio, so it holds
/// when the microphone is read faster than real time).
#[derive(Debug, Default)]
struct OwnWords {
    handle: PlayingText,
    seen: u64,
    current: String,
    /// Texts that stopped playing, each with the heard-sample count at
    /// which it stops counting.
    played: Vec<(String, u64)>,
}

impl OwnWords {
    /// Take in a change of the playing text; `heard`: samples heard so far.
    fn follow(&mut self, heard: u64) {
        self.played.retain(|(_, until)| *until > heard);
        if self.handle.version() == self.seen {
            return;
        }
        let Some((version, text)) = self.handle.read() else {
            return;
        };
        self.seen = version;
        // A streamed answer growing is the same answer still playing.
        if !self.current.is_empty() && !text.starts_with(&self.current) {
            let grace = PLAYED_GRACE_MS * u64::from(SAMPLE_RATE) / 1000;
            let old = std::mem::take(&mut self.current);
            self.played.push((old, heard + grace));
        }
        self.current = text;
    }

    /// Whether what is (or just was) playing says wake word `word`'s name.
    fn mention(&self, word: &str) -> bool {
        std::iter::once(&self.current)
            .chain(self.played.iter().map(|(t, _)| t))
            .any(|t| crate::wake::strip::mentions(t, word))
    }
}

/// Listens during playback for the stop word and the wake word.
pub struct Interrupter {
    stats: InterruptStats,
    vad: VadConfig,
    endpointer: Endpointer,
    /// Absolute index (in `heard`) where the endpointer's clock starts.
    origin: u64,
    /// `None`: the input is echo-cancelled, nothing is checked.
    echo: Option<Arc<EchoReference>>,
    /// Takes the speaker's echo out of what is heard (with `echo`).
    canceller: Option<EchoCanceller>,
    /// The microphone as heard, before the canceller (same indices as
    /// `heard`), for the echo check; only with `canceller`.
    heard_raw: Option<Heard>,
    heard: Heard,
    /// The utterance in progress, if any.
    word: Option<Word>,
    next_word: u64,
    /// The worker running passes (started at the first word).
    passes: Option<Passes>,
    own_words: OwnWords,
}

/// The endpointer settings for a word said over the device's sound.
pub fn word_vad(base: &VadConfig) -> VadConfig {
    VadConfig {
        hangover_ms: HANGOVER_MS,
        min_utterance_ms: 150,
        max_utterance_ms: 2000,
        tail_ms: 100,
        preroll_ms: 200,
        early_ms: 0,
        ..base.clone()
    }
}

impl Interrupter {
    /// `echo`: the speaker's recent playback, or `None` when the input is
    /// echo-cancelled. Fails only on invalid `audio.vad` settings.
    pub fn new(base: &VadConfig, echo: Option<Arc<EchoReference>>) -> Result<Self, String> {
        let vad = word_vad(base);
        let canceller = match &echo {
            Some(_) => match EchoCanceller::new() {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!("{e}; a stop word said over an answer may go unheard");
                    None
                }
            },
            None => None,
        };
        Ok(Self {
            endpointer: Endpointer::new(&vad)?,
            origin: 0,
            vad,
            echo,
            heard_raw: canceller.as_ref().map(|_| Heard::new(HEARD_MS)),
            canceller,
            heard: Heard::new(HEARD_MS),
            word: None,
            next_word: 0,
            passes: None,
            stats: InterruptStats::default(),
            own_words: OwnWords::default(),
        })
    }

    /// The text the speaker is playing from now on (`""`: quiet). A wake
    /// word detection while it — or a text that stopped within
    /// [`PLAYED_GRACE_MS`] — mentions the word's name is the device's own.
    /// Call it when a sentence, an answer or a ring's label starts to
    /// sound, and with `""` when playback ends; from another thread, use
    /// [`Interrupter::playing_text`].
    pub fn set_playing_text(&mut self, text: &str) {
        self.own_words.handle.set(text);
        self.own_words.follow(self.heard.end());
    }

    /// A handle on the playing text for another thread (the turn's worker
    /// pushes the answer's pieces as they stream).
    pub fn playing_text(&self) -> PlayingText {
        self.own_words.handle.clone()
    }

    /// What it has heard so far.
    pub fn stats(&self) -> InterruptStats {
        self.stats
    }

    /// Forget what was heard (a new answer or round starts).
    pub fn reset(&mut self) {
        self.restart_endpointer();
        self.heard.clear();
        if let Some(raw) = self.heard_raw.as_mut() {
            raw.clear();
        }
    }

    /// A fresh endpointer from here on, and no utterance in progress (a
    /// pass still running for it is answered to no one).
    fn restart_endpointer(&mut self) {
        if let Ok(fresh) = Endpointer::new(&self.vad) {
            self.endpointer = fresh;
            self.origin = self.heard.end();
        }
        self.word = None;
    }

    /// Microphone audio heard while the device talks or rings; returns an
    /// interruption when the stop word or the wake word was said (by the
    /// user, not by the speaker). Passes on a short utterance run on a
    /// worker thread; a call may wait for one, at most as long as
    /// `samples` lasts while a decision hangs on it (which keeps a file
    /// read faster than real time paced like a microphone), and up to a
    /// pass's length at an utterance's end.
    pub fn hear(
        &mut self,
        samples: &[i16],
        stt: &Stt,
        gate: Option<&mut WakeGate>,
    ) -> Option<Interruption> {
        let chunk = Duration::from_millis(samples.len() as u64 * 1000 / u64::from(SAMPLE_RATE));
        // Without an echo-cancelled input, the speaker's echo is taken out
        // first: everything below hears the room, not the answer.
        let cleaned = match (self.canceller.as_mut(), self.echo.as_deref()) {
            (Some(canceller), Some(echo)) => {
                let (cleaned, raw) = canceller.process_both(samples, echo);
                if let Some(heard_raw) = self.heard_raw.as_mut() {
                    heard_raw.push(&raw);
                }
                Some(cleaned)
            }
            _ => None,
        };
        let samples = cleaned.as_deref().unwrap_or(samples);
        let completed = self.heard.push(samples);
        if let Some(word) = self.word.as_mut() {
            for (end, energy) in self.heard.last_frames(completed) {
                word.take_frame(end, energy);
            }
        }
        self.own_words.follow(self.heard.end());
        if let Some(gate) = gate {
            gate.feed(samples);
            if let Some(detection) = gate.poll() {
                if !self.own_wake_word(&detection.name) {
                    return Some(Interruption::WakeWord(detection.name));
                }
            }
        }
        self.take_answers();
        for event in self.endpointer.push(samples) {
            match event {
                VadEvent::SpeechStart { at_ms } => self.begin_word(at_ms),
                VadEvent::Discarded { .. } => self.word = None,
                VadEvent::Utterance(u) => {
                    if let Some(stop) = self.end_word(&u, stt) {
                        return Some(stop);
                    }
                }
                VadEvent::Pause(_) => {}
            }
        }
        self.speculate(stt, chunk)
    }

    /// The endpointer's start trigger: a new utterance, from its pre-roll.
    fn begin_word(&mut self, at_ms: u64) {
        let speech_start = self.origin + at_ms * u64::from(SAMPLE_RATE) / 1000;
        let preroll = u64::from(self.vad.preroll_ms) * u64::from(SAMPLE_RATE) / 1000;
        let start = speech_start.saturating_sub(preroll).max(self.origin);
        self.next_word += 1;
        self.word = Some(Word::new(self.next_word, start, speech_start, &self.heard));
    }

    /// During an utterance: believe a stop word a pass heard whole, wait
    /// for a pass that would decide, start one at the first quiet frame.
    fn speculate(&mut self, stt: &Stt, chunk: Duration) -> Option<Interruption> {
        let word = self.word.as_ref()?;
        if let Some(text) = word.stop_said() {
            return Some(self.fire(text.to_string()));
        }
        if word.awaits() {
            if let Some(done) = self.passes.as_ref().and_then(|p| p.next_within(chunk)) {
                self.take_answer(done);
                if let Some(text) = self.word.as_ref().and_then(|w| w.stop_said()) {
                    return Some(self.fire(text.to_string()));
                }
            }
        }
        if self.word.as_ref().is_some_and(Word::wants_pass) {
            self.start_pass(stt);
        }
        None
    }

    /// A pass on the utterance's audio so far, on the worker thread.
    fn start_pass(&mut self, stt: &Stt) {
        if self.passes.is_none() {
            self.passes = Passes::start(stt.clone(), self.echo.clone());
        }
        let (Some(passes), Some(word)) = (self.passes.as_ref(), self.word.as_mut()) else {
            return;
        };
        let to = self.heard.end();
        tracing::debug!(
            word = word.id,
            from_ms = word::ms(word.start),
            to_ms = word::ms(to),
            "a pass starts"
        );
        let raw = self.heard_raw.as_ref().map(|h| h.since(word.start));
        if passes.send(word.id, to, self.heard.since(word.start), raw) {
            word.passing(to);
        }
    }

    /// Answers the worker has ready, given to the utterance they are for.
    fn take_answers(&mut self) {
        while let Some(done) = self.passes.as_ref().and_then(Passes::try_next) {
            self.take_answer(done);
        }
    }

    fn take_answer(&mut self, done: Done) {
        tracing::debug!(word = done.word, to_ms = word::ms(done.to), verdict = ?done.verdict, "a pass answered");
        if !matches!(done.verdict, Verdict::OwnVoice(_)) {
            self.stats.passes += 1;
        }
        match self.word.as_mut() {
            Some(word) if word.id == done.word => word.answered(done.to, done.verdict),
            _ => {}
        }
    }

    /// A stop word believed before the hang-over: the utterance is done.
    fn fire(&mut self, text: String) -> Interruption {
        self.stats.words += 1;
        self.stats.transcribed += 1;
        self.restart_endpointer();
        Interruption::Stop(text)
    }

    /// The hang-over ended an utterance no pass decided: a word-sized one
    /// is judged by the pass that heard it all (waited for if running),
    /// else as a whole now — the echo check, then one word pass.
    fn end_word(&mut self, u: &Utterance, stt: &Stt) -> Option<Interruption> {
        let word = self.word.take();
        tracing::debug!(
            speech_ms = u.speech_end_ms.saturating_sub(u.speech_start_ms),
            end_ms = word::ms(self.origin) + u.speech_end_ms,
            "the hang-over ended an utterance"
        );
        let speech_ms = u.speech_end_ms.saturating_sub(u.speech_start_ms);
        if u.reason == EndReason::MaxLength || speech_ms > MAX_WORD_MS {
            return None;
        }
        self.stats.words += 1;
        // Judged on what a pass that heard the whole word would have
        // heard: its start to just past its last loud frame. Not the
        // hang-over's tail: whisper hears words in that noise ("Please
        // stop me."), so the verdict would depend on whether a pass
        // happened to finish before the hang-over did.
        let span = word.as_ref().map(|w| (w.start, w.heard_to()));
        let audio = match span {
            Some((from, to)) => self.heard.between(from, to),
            None => u.samples.clone(),
        };
        // The same stretch as the microphone heard it, when echo-cancelled.
        let raw = self.heard_raw.as_ref().map(|h| match span {
            Some((from, to)) => h.between(from, to),
            None => h.since(h.end().saturating_sub(u.samples.len() as u64)),
        });
        let verdict = match word.and_then(|w| self.settled(w)) {
            Some(verdict) => verdict,
            None => {
                let verdict = judge(stt, self.echo.as_deref(), &audio, raw.as_deref());
                if !matches!(verdict, Verdict::OwnVoice(_)) {
                    self.stats.passes += 1;
                }
                verdict
            }
        };
        match &verdict {
            Verdict::OwnVoice(share) => {
                tracing::debug!(echo_share = share, "a word in my own voice; ignored");
                self.stats.own_voice += 1;
                None
            }
            Verdict::Said(text) => {
                self.stats.transcribed += 1;
                match verdict.stop_word() {
                    Some(stop) => Some(Interruption::Stop(stop.to_string())),
                    None => {
                        tracing::debug!("heard {text:?} during playback; not a stop word");
                        None
                    }
                }
            }
            Verdict::Failed(e) => {
                tracing::debug!("a word during playback: {e}");
                None
            }
        }
    }

    /// The answer of the pass that heard all of `word` (waiting for the
    /// one running), if there is one.
    fn settled(&mut self, mut word: Word) -> Option<Verdict> {
        if word.in_flight.is_some() {
            while let Some(done) = self.passes.as_ref().and_then(|p| p.next_within(PASS_WAIT)) {
                let mine = done.word == word.id;
                if !matches!(done.verdict, Verdict::OwnVoice(_)) {
                    self.stats.passes += 1;
                }
                if mine {
                    word.answered(done.to, done.verdict);
                }
                if word.in_flight.is_none() {
                    break;
                }
            }
        }
        word.covering_verdict().cloned()
    }

    /// Whether a detection of `word` is the device's own: what it is
    /// playing says the word, or the last moments heard are mostly its
    /// playback.
    fn own_wake_word(&mut self, word: &str) -> bool {
        if self.own_words.mention(word) {
            tracing::info!(%word, "the wake word is in what I am saying; ignored");
            self.stats.wakes_in_own_text += 1;
            return true;
        }
        let Some(reference) = self.echo.as_ref() else {
            return false;
        };
        let heard = self.heard_raw.as_ref().unwrap_or(&self.heard);
        let recent = heard.last(RECENT_MS * SAMPLE_RATE as usize / 1000);
        let share = reference.share_of(&recent);
        if share < ECHO_SHARE {
            return false;
        }
        tracing::info!(%word, echo_share = share, "the wake word in my own voice; ignored");
        self.stats.wakes_in_own_voice += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = SAMPLE_RATE as u64;

    fn own(texts: &[(&str, u64)], word: &str, at: u64) -> bool {
        let mut w = OwnWords::default();
        for (text, heard) in texts {
            w.handle.set(text);
            w.follow(*heard);
        }
        w.follow(at);
        w.mention(word)
    }

    #[test]
    fn a_wake_word_while_the_answer_says_its_name_is_its_own() {
        let jarvis = [("Jarvis here. I added milk.", 0)];
        assert!(own(&jarvis, "hey_jarvis_v0.1", 3 * SECOND));
        assert!(own(&jarvis, "hey_jarvis", 0));
        // Another word's name is not in it: the user's "Alexa" counts.
        assert!(!own(&jarvis, "alexa", 0));
        // An answer without the name: the user's "Hey Jarvis" counts.
        assert!(!own(&[("It's twenty past three.", 0)], "hey_jarvis", 0));
        assert!(!own(&[], "hey_jarvis", 0));
    }

    #[test]
    fn the_name_counts_for_the_grace_after_it_stopped_and_no_longer() {
        let ended = |quiet_at: u64, at: u64| {
            own(
                &[("Hey Jarvis is the wake word.", 0), ("", quiet_at)],
                "hey_jarvis",
                at,
            )
        };
        let grace = PLAYED_GRACE_MS * SECOND / 1000;
        assert!(ended(5 * SECOND, 5 * SECOND));
        assert!(ended(5 * SECOND, 5 * SECOND + grace - 1));
        assert!(!ended(5 * SECOND, 5 * SECOND + grace));
        // The next answer replaces it the same way.
        let next = [("Jarvis here.", 0), ("The bus is late.", SECOND)];
        assert!(own(&next, "hey_jarvis", SECOND + grace / 2));
        assert!(!own(&next, "hey_jarvis", SECOND + grace));
    }

    #[test]
    fn a_streamed_answer_is_one_text_however_it_is_cut() {
        let mut w = OwnWords::default();
        let handle = w.handle.clone();
        for piece in ["Hey Jar", "vis is the", " wake word."] {
            handle.push(piece);
            w.follow(0);
        }
        assert!(w.mention("hey_jarvis"));
        assert!(w.played.is_empty(), "{:?}", w.played);
        // Set from another thread, seen by the interrupter.
        let other = w.handle.clone();
        std::thread::spawn(move || other.set("")).join().ok();
        w.follow(SECOND);
        assert!(w.current.is_empty());
        assert!(w.mention("hey_jarvis"));
        w.follow(3 * SECOND);
        assert!(!w.mention("hey_jarvis"));
    }

    #[test]
    fn the_interrupter_follows_what_it_is_told_is_playing() {
        let mut i = Interrupter::new(&VadConfig::default(), None).expect("default vad");
        i.set_playing_text("Say Alexa to wake me.");
        assert!(i.own_wake_word("alexa"));
        assert_eq!(i.stats().wakes_in_own_text, 1);
        // No echo reference (echo-cancelled): nothing else drops it.
        i.set_playing_text("The weather is fine.");
        assert!(!i.own_wake_word("hey_jarvis"));
        i.playing_text().set("");
        assert!(!i.own_wake_word("hey_mycroft"));
    }
}
