//! The stop word before the hang-over: whisper passes on a short
//! utterance while it is still going, so the pass that decides is already
//! running when the word ends.
//!
//! A pass (the echo check, then `Stt::transcribe_word`) takes ~150–250 ms
//! on two busy cores, and whisper runs one pass at a time, so when it
//! starts matters more than anything else: [`Word::wants_pass`] starts one
//! at the first quiet 10 ms frame after loud speech ([`QUIET_DB`] below
//! the utterance's loudest so far) — the end of a word, usually — on a
//! worker thread ([`Passes`]). Its answer is believed once it has heard
//! everything loud ([`Word::covers`]: no more than [`UNHEARD_MS`] of loud
//! audio after the pass's end, a plosive's burst) and [`QUIET_MS`] of
//! quiet have followed ([`Word::stop_said`]). Speech after the pass's end
//! makes it stale and the next quiet frame starts another, so "stop the
//! music" is judged whole, as before.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, Sender};

use crate::audio::echo::{EchoReference, ECHO_SHARE};
use crate::audio::SAMPLE_RATE;
use crate::stt::Stt;

/// Samples per loudness frame (10 ms).
pub const FRAME: usize = 160;
/// A 10 ms frame this far below the utterance's loudest so far is quiet
/// (dB): the end of a word has fallen this far within a frame or two.
pub const QUIET_DB: f32 = 25.0;
/// Quiet after the last loud frame before a stop word is believed (ms):
/// "stop" followed within this by more speech is not one.
pub const QUIET_MS: u64 = 90;
/// Loud audio after a pass's end it may leave unheard and still count as
/// having heard the word (ms): a final plosive's burst, not a word.
pub const UNHEARD_MS: u64 = 30;
/// Speech shorter than this (ms) is not transcribed (the endpointer's
/// blips).
pub const MIN_SPEECH_MS: u64 = 150;

/// An utterance the echo canceller took this much (dB) out of was the
/// device's own voice: the user's word over an echo twice as loud still
/// keeps it within ~7 dB.
pub const ECHO_GONE_DB: f32 = 10.0;

/// Samples (16 kHz) as ms.
pub fn ms(samples: u64) -> u64 {
    samples * 1000 / u64::from(SAMPLE_RATE)
}

fn samples(ms: u64) -> u64 {
    ms * u64::from(SAMPLE_RATE) / 1000
}

/// The microphone's last seconds with absolute sample indices (samples
/// since the interrupter was made), and the loudness of each 10 ms frame.
#[derive(Debug)]
pub struct Heard {
    samples: VecDeque<i16>,
    /// Absolute index of `samples[0]`.
    first: u64,
    cap: usize,
    /// (absolute end index, mean square) of each complete frame kept.
    frames: VecDeque<(u64, f32)>,
    /// The frame being filled: sum of squares, samples in it.
    partial: (f64, usize),
}

impl Heard {
    /// Keeps the last `keep_ms`.
    pub fn new(keep_ms: u64) -> Heard {
        Heard {
            samples: VecDeque::new(),
            first: 0,
            cap: samples(keep_ms) as usize,
            frames: VecDeque::new(),
            partial: (0.0, 0),
        }
    }

    /// Absolute index just past the last sample heard.
    pub fn end(&self) -> u64 {
        self.first + self.samples.len() as u64
    }

    /// Take in `chunk`; returns how many frames it completed (the last
    /// ones of [`Heard::frames_since`]).
    pub fn push(&mut self, chunk: &[i16]) -> usize {
        let mut completed = 0;
        for &s in chunk {
            self.samples.push_back(s);
            let (sum, n) = &mut self.partial;
            *sum += f64::from(s) * f64::from(s);
            *n += 1;
            if *n == FRAME {
                let energy = (*sum / FRAME as f64) as f32;
                self.partial = (0.0, 0);
                let end = self.end();
                self.frames.push_back((end, energy));
                completed += 1;
            }
        }
        let extra = self.samples.len().saturating_sub(self.cap);
        self.samples.drain(..extra);
        self.first += extra as u64;
        while self
            .frames
            .front()
            .is_some_and(|&(end, _)| end <= self.first)
        {
            self.frames.pop_front();
        }
        completed
    }

    /// The audio from absolute index `from` (or the oldest kept) on.
    pub fn since(&self, from: u64) -> Vec<i16> {
        let skip = from.saturating_sub(self.first) as usize;
        self.samples.iter().skip(skip).copied().collect()
    }

    /// The audio from absolute index `from` (or the oldest kept) up to
    /// `to` (or the newest heard).
    pub fn between(&self, from: u64, to: u64) -> Vec<i16> {
        let skip = from.saturating_sub(self.first) as usize;
        let take = to.saturating_sub(from.max(self.first)) as usize;
        self.samples.iter().skip(skip).take(take).copied().collect()
    }

    /// The last `n` samples (fewer if not yet heard).
    pub fn last(&self, n: usize) -> Vec<i16> {
        let skip = self.samples.len().saturating_sub(n);
        self.samples.iter().skip(skip).copied().collect()
    }

    /// The frames ending after absolute index `from`, oldest first.
    pub fn frames_since(&self, from: u64) -> impl Iterator<Item = (u64, f32)> + '_ {
        self.frames
            .iter()
            .copied()
            .filter(move |&(end, _)| end > from)
    }

    /// The last `n` frames, oldest first.
    pub fn last_frames(&self, n: usize) -> impl Iterator<Item = (u64, f32)> + '_ {
        self.frames
            .iter()
            .copied()
            .skip(self.frames.len().saturating_sub(n))
    }

    /// Forget the audio (the clock keeps running).
    pub fn clear(&mut self) {
        self.first = self.end();
        self.samples.clear();
        self.frames.clear();
        self.partial = (0.0, 0);
    }
}

/// What a pass made of some audio.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Mostly the device's own playback (the echo share): not transcribed.
    OwnVoice(f32),
    /// Transcribed: the words (empty for no speech).
    Said(String),
    /// Speech to text failed.
    Failed(String),
}

impl Verdict {
    /// The stop word, when this is one.
    pub fn stop_word(&self) -> Option<&str> {
        match self {
            Verdict::Said(text) if super::super::ring::is_stop_word(text) => Some(text.trim()),
            _ => None,
        }
    }
}

/// The echo check, then one word pass: what `audio` says, unless it is
/// the device's own voice (`echo`: `None` for an echo-cancelled input).
///
/// `raw`: the microphone's own samples of the same stretch when `audio`
/// has had the echo cancelled (`crate::audio::aec`). The check then looks
/// at both: mostly the playback as heard (the echo share of `raw`), or
/// mostly gone once the echo was taken out ([`ECHO_GONE_DB`]) — what the
/// canceller leaves of the device's own words is not a word of the user's.
pub fn judge(
    stt: &Stt,
    echo: Option<&EchoReference>,
    audio: &[i16],
    raw: Option<&[i16]>,
) -> Verdict {
    if let Some(reference) = echo {
        let heard = raw.unwrap_or(audio);
        let share = reference.share_of(heard);
        if share >= ECHO_SHARE {
            return Verdict::OwnVoice(share);
        }
        if let Some(raw) = raw {
            let gone = crate::audio::level_db(raw) - crate::audio::level_db(audio);
            if gone >= ECHO_GONE_DB {
                return Verdict::OwnVoice(1.0 - 10f32.powf(-gone / 10.0));
            }
        }
    }
    match stt.transcribe_word(&crate::audio::to_f32(audio)) {
        Ok(t) if t.no_speech => Verdict::Said(String::new()),
        Ok(t) => Verdict::Said(t.text),
        Err(e) => Verdict::Failed(e.to_string()),
    }
}

/// An utterance in progress (between the endpointer's start and end).
#[derive(Debug)]
pub struct Word {
    /// Which utterance (a pass's answer names it; a stale one is dropped).
    pub id: u64,
    /// Absolute index where its audio starts (pre-roll included).
    pub start: u64,
    /// Absolute index of its first voiced frame.
    speech_start: u64,
    /// Loudest frame so far (mean square).
    peak: f32,
    /// Absolute index just past the last loud frame.
    loud_end: u64,
    /// Absolute index just past the last frame looked at.
    seen_to: u64,
    /// End of the audio the latest pass was started on.
    passed_to: Option<u64>,
    /// End of the audio of the pass still running, if one is.
    pub in_flight: Option<u64>,
    /// The latest answer: the end of the audio it heard, and what it said.
    pub verdict: Option<(u64, Verdict)>,
}

impl Word {
    /// The utterance whose audio starts at `start` and speech at
    /// `speech_start` (absolute), with the frames already heard.
    pub fn new(id: u64, start: u64, speech_start: u64, heard: &Heard) -> Word {
        let mut word = Word {
            id,
            start,
            speech_start,
            peak: 0.0,
            loud_end: speech_start,
            seen_to: start,
            passed_to: None,
            in_flight: None,
            verdict: None,
        };
        for (end, energy) in heard.frames_since(start) {
            word.take_frame(end, energy);
        }
        word
    }

    /// One 10 ms frame ending at absolute index `end`.
    pub fn take_frame(&mut self, end: u64, energy: f32) {
        self.peak = self.peak.max(energy);
        if energy >= self.peak * 10f32.powf(-QUIET_DB / 10.0) {
            self.loud_end = end;
        }
        self.seen_to = end;
    }

    /// Quiet since the last loud frame (ms).
    pub fn quiet_ms(&self) -> u64 {
        ms(self.seen_to.saturating_sub(self.loud_end))
    }

    /// From the first voiced frame to the last loud one (ms).
    pub fn speech_ms(&self) -> u64 {
        ms(self.loud_end.saturating_sub(self.speech_start))
    }

    fn word_sized(&self) -> bool {
        (MIN_SPEECH_MS..=super::MAX_WORD_MS).contains(&self.speech_ms())
    }

    /// Where a pass that heard the whole word ends (absolute index): just
    /// past its last loud frame, a plosive's burst included.
    pub fn heard_to(&self) -> u64 {
        self.loud_end + samples(UNHEARD_MS)
    }

    /// Whether a pass on the audio up to `to` heard everything loud.
    pub fn covers(&self, to: u64) -> bool {
        self.loud_end <= to + samples(UNHEARD_MS)
    }

    /// Start a pass now: the audio has just gone quiet after loud speech
    /// no pass has heard, the speech is word-sized, none is running.
    pub fn wants_pass(&self) -> bool {
        self.in_flight.is_none()
            && self.quiet_ms() > 0
            && self.passed_to.is_none_or(|to| to < self.loud_end)
            && self.word_sized()
    }

    /// A pass on the audio up to `to` has been started.
    pub fn passing(&mut self, to: u64) {
        self.passed_to = Some(to);
        self.in_flight = Some(to);
    }

    /// Take in a pass's answer on the audio up to `to`.
    pub fn answered(&mut self, to: u64, verdict: Verdict) {
        if self.in_flight == Some(to) {
            self.in_flight = None;
        }
        if self.verdict.as_ref().is_none_or(|(seen, _)| *seen <= to) {
            self.verdict = Some((to, verdict));
        }
    }

    /// The stop word, when a pass that heard all of it said one and the
    /// quiet after it has lasted [`QUIET_MS`].
    pub fn stop_said(&self) -> Option<&str> {
        let (to, verdict) = self.verdict.as_ref()?;
        if !self.covers(*to) || self.quiet_ms() < QUIET_MS || !self.word_sized() {
            return None;
        }
        verdict.stop_word()
    }

    /// Whether the running pass would decide now if it answered: it heard
    /// everything loud and the quiet has lasted.
    pub fn awaits(&self) -> bool {
        self.in_flight.is_some_and(|to| self.covers(to))
            && self.quiet_ms() >= QUIET_MS
            && self.word_sized()
    }

    /// The latest answer, when it heard everything loud of the utterance.
    pub fn covering_verdict(&self) -> Option<&Verdict> {
        let (to, verdict) = self.verdict.as_ref()?;
        self.covers(*to).then_some(verdict)
    }
}

/// A pass to run: which utterance, the end of its audio, the audio.
struct Job {
    word: u64,
    to: u64,
    audio: Vec<i16>,
    raw: Option<Vec<i16>>,
}

/// A pass's answer.
#[derive(Debug)]
pub struct Done {
    pub word: u64,
    pub to: u64,
    pub verdict: Verdict,
}

/// The worker thread that runs passes (one at a time, in order) with its
/// own clone of the speech-to-text engines. It ends when this is dropped.
pub struct Passes {
    jobs: Sender<Job>,
    done: Receiver<Done>,
}

impl Passes {
    /// Start the worker; `None` when the thread can't be made (the
    /// interrupter then judges each utterance at its end, inline).
    pub fn start(stt: Stt, echo: Option<Arc<EchoReference>>) -> Option<Passes> {
        let (jobs, rx) = unbounded::<Job>();
        let (tx, done) = unbounded::<Done>();
        let spawned = std::thread::Builder::new()
            .name("stop-word".into())
            .spawn(move || {
                for job in rx {
                    let verdict = judge(&stt, echo.as_deref(), &job.audio, job.raw.as_deref());
                    let answer = Done {
                        word: job.word,
                        to: job.to,
                        verdict,
                    };
                    if tx.send(answer).is_err() {
                        return;
                    }
                }
            });
        match spawned {
            Ok(_) => Some(Passes { jobs, done }),
            Err(e) => {
                tracing::warn!("no stop-word worker ({e}); judging words at their end");
                None
            }
        }
    }

    /// Queue a pass on `audio` (utterance `word`, ending at `to`).
    /// `raw`: the microphone's own samples when `audio` is echo-cancelled.
    pub fn send(&self, word: u64, to: u64, audio: Vec<i16>, raw: Option<Vec<i16>>) -> bool {
        self.jobs
            .send(Job {
                word,
                to,
                audio,
                raw,
            })
            .is_ok()
    }

    /// An answer, if one is waiting.
    pub fn try_next(&self) -> Option<Done> {
        self.done.try_recv().ok()
    }

    /// An answer, waiting at most `limit` for one.
    pub fn next_within(&self, limit: Duration) -> Option<Done> {
        self.done.recv_timeout(limit).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loud (a tone at 0.3) for `loud_ms`, then quiet noise for `quiet_ms`.
    fn word_then_quiet(loud_ms: u64, quiet_ms: u64) -> Vec<i16> {
        let loud = (0..samples(loud_ms)).map(|i| ((i as f32 * 0.2).sin() * 9000.0) as i16);
        let quiet = (0..samples(quiet_ms)).map(|i| if i % 2 == 0 { 60 } else { -60 });
        loud.chain(quiet).collect()
    }

    fn word_over(audio: &[i16]) -> (Word, Heard) {
        let mut heard = Heard::new(3000);
        heard.push(audio);
        (Word::new(1, 0, 0, &heard), heard)
    }

    #[test]
    fn heard_keeps_its_clock_and_its_last_seconds() {
        let mut heard = Heard::new(100);
        assert_eq!(heard.push(&vec![1i16; 1000]), 6);
        assert_eq!(heard.end(), 1000);
        assert_eq!(heard.push(&vec![2i16; 1000]), 6);
        assert_eq!(heard.end(), 2000);
        // 100 ms kept: indices 400.. of 2000.
        assert_eq!(heard.since(0).len(), 1600);
        assert_eq!(heard.since(1990), vec![2i16; 10]);
        assert_eq!(heard.last(3), vec![2i16; 3]);
        assert_eq!(
            heard.between(990, 1010),
            [vec![1i16; 10], vec![2i16; 10]].concat()
        );
        assert_eq!(heard.between(0, 410).len(), 10, "from the oldest kept");
        assert_eq!(
            heard.between(1995, 9999),
            vec![2i16; 5],
            "to the newest heard"
        );
        assert!(heard.frames_since(0).all(|(end, _)| end > 400));
        heard.clear();
        assert_eq!(heard.end(), 2000);
        assert!(heard.since(0).is_empty());
    }

    #[test]
    fn a_word_is_judged_up_to_its_last_loud_frame_not_the_quiet_after_it() {
        let (word, heard) = word_over(&word_then_quiet(400, 500));
        let to = word.heard_to();
        assert!(
            ms(to) >= 400 && ms(to) <= 400 + UNHEARD_MS + 10,
            "{}",
            ms(to)
        );
        assert!(word.covers(to));
        assert_eq!(heard.between(word.start, to).len() as u64, to);
    }

    #[test]
    fn a_pass_starts_at_the_first_quiet_frame_and_not_again_without_new_speech() {
        let (mut word, _) = word_over(&word_then_quiet(400, 0));
        assert_eq!(word.quiet_ms(), 0);
        assert!(!word.wants_pass(), "still loud");
        let (word_q, _) = word_over(&word_then_quiet(400, 10));
        assert!(word_q.wants_pass());
        word.take_frame(samples(410), 1.0);
        assert!(word.wants_pass());
        word.passing(samples(410));
        assert!(!word.wants_pass(), "one runs");
        word.answered(samples(410), Verdict::Said("Stop.".into()));
        assert!(!word.wants_pass(), "nothing new to hear");
        // A blip too short to be a word is not passed.
        let (blip, _) = word_over(&word_then_quiet(60, 30));
        assert!(!blip.wants_pass());
        // Speech too long to be a stop word is not passed.
        let (long, _) = word_over(&word_then_quiet(1700, 30));
        assert!(!long.wants_pass());
    }

    #[test]
    fn a_stop_is_believed_only_after_the_quiet_and_when_the_pass_heard_it_all() {
        let (mut word, _) = word_over(&word_then_quiet(400, 10));
        word.passing(samples(410));
        assert!(!word.awaits(), "not quiet long enough yet");
        let mut at = 410;
        while at < 410 + QUIET_MS {
            at += 10;
            word.take_frame(samples(at), 1.0);
        }
        assert!(word.awaits());
        assert_eq!(word.stop_said(), None, "no answer yet");
        word.answered(samples(410), Verdict::Said("Stop.".into()));
        assert_eq!(word.stop_said(), Some("Stop."));
        // More speech after the pass's end: the answer is stale.
        word.take_frame(samples(at + 10), 1e9);
        assert_eq!(word.stop_said(), None);
        assert!(word.covering_verdict().is_none());
        assert!(word.wants_pass() || word.quiet_ms() == 0);
    }

    #[test]
    fn a_short_burst_after_the_pass_still_counts_as_heard() {
        let (mut word, _) = word_over(&word_then_quiet(400, 20));
        word.passing(samples(410));
        word.answered(samples(410), Verdict::Said("Stop!".into()));
        // A plosive's burst 20 ms after the pass's end, then quiet.
        word.take_frame(samples(430), 1e9);
        assert!(word.covers(samples(410)));
        for k in 1..=(QUIET_MS / 10) {
            word.take_frame(samples(430 + 10 * k), 1.0);
        }
        assert_eq!(word.stop_said(), Some("Stop!"));
        // Not a stop word, or the device's own: nothing.
        word.answered(samples(440), Verdict::Said("Don't stop.".into()));
        assert_eq!(word.stop_said(), None);
        word.answered(samples(450), Verdict::OwnVoice(0.9));
        assert_eq!(word.stop_said(), None);
    }

    #[test]
    fn an_older_answer_never_replaces_a_newer_one() {
        let (mut word, _) = word_over(&word_then_quiet(400, 100));
        word.answered(samples(500), Verdict::Said("Okay, stop.".into()));
        word.answered(samples(300), Verdict::Said("Okay".into()));
        assert_eq!(word.stop_said(), Some("Okay, stop."));
    }

    /// A word-like tone at `amp` (16 kHz, `ms` long).
    fn tone(amp: f32, ms: u64) -> Vec<i16> {
        (0..samples(ms))
            .map(|i| (amp * 32767.0 * (i as f32 * 0.07).sin()) as i16)
            .collect()
    }

    #[test]
    fn what_the_canceller_took_away_was_its_own_voice() {
        let stt = Stt::with_engines(Vec::new(), 0);
        // The playback is something else entirely: the share says nothing.
        let reference = EchoReference::new(2);
        let other: Vec<f32> = (0..16_000)
            .map(|i| 0.3 * (i as f32 * 0.013).cos())
            .collect();
        reference.record(&crate::audio::playback::Clip::new(other, SAMPLE_RATE));
        let heard = tone(0.3, 400);
        // 20 dB taken out by the canceller: its own voice, not transcribed.
        let left = tone(0.03, 400);
        assert!(matches!(
            judge(&stt, Some(&reference), &left, Some(&heard)),
            Verdict::OwnVoice(share) if share > 0.9
        ));
        // A word the canceller left alone (3 dB) goes to the pass (no
        // engine here, so it fails: it was not dropped).
        let kept = tone(0.21, 400);
        assert!(matches!(
            judge(&stt, Some(&reference), &kept, Some(&heard)),
            Verdict::Failed(_)
        ));
        // Without the raw audio (an echo-cancelled input), no such check.
        assert!(matches!(
            judge(&stt, Some(&reference), &left, None),
            Verdict::Failed(_)
        ));
    }

    #[test]
    fn the_worker_answers_in_order_and_judges_without_an_engine() {
        let passes = Passes::start(Stt::with_engines(Vec::new(), 0), None).expect("thread");
        assert!(passes.send(7, 100, vec![0; 1600], None));
        assert!(passes.send(7, 200, vec![0; 1600], None));
        let first = passes
            .next_within(Duration::from_secs(5))
            .expect("an answer");
        let second = passes
            .next_within(Duration::from_secs(5))
            .expect("an answer");
        assert_eq!((first.word, first.to, second.to), (7, 100, 200));
        assert!(
            matches!(first.verdict, Verdict::Failed(_)),
            "{:?}",
            first.verdict
        );
        assert!(passes.try_next().is_none());
    }
}
