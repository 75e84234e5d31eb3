//! Timers, alarms and reminders that ring through the device's speaker.
//!
//! The timers' scheduler (`timers::Timers`) decides *when* something rings
//! and when it stops (`[timers] ring_secs`, "stop", the button); a
//! [`Ringer`] turns its events into sound on one speaker: a short two-tone
//! chime plus the spoken label ("Your rice timer is done."), repeated with
//! a pause until the scheduler says `stopped`, and a one-time sentence for
//! each one that came due while earshot was off ("While I was off, your
//! 5-minute timer finished.").
//!
//! The ringer never takes the speaker from someone: it plays a round only
//! when the speaker is idle (the sentence being spoken ends first, the
//! rest of an answer queues after the round) and when the caller says no
//! utterance is under way (never on top of a request being heard or
//! transcribed). The local loop ([`super::VoiceLoop`]) and each satellite
//! session have their own ringer over their own speaker; a stop anywhere
//! (a button, the tree's `stop` intent on any front door) goes through
//! the scheduler, whose `stopped` event silences every one of them.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::f32::consts::PI;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use chrono::{DateTime, FixedOffset};

use crate::audio::playback::Clip;
use crate::timers::{EventKind, Kind, TimerEvent, Timers};
use crate::tts::speaker::Speaker;

/// The pause between the end of one round (chime + label) and the next.
pub const REPEAT_GAP: Duration = Duration::from_secs(3);

/// What kind of thing rings (mirrors `timers::Kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertKind {
    Timer,
    Alarm,
    Reminder,
}

/// One timer, alarm or reminder as the ringer needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    pub id: i64,
    pub kind: AlertKind,
    /// The user's label ("rice", "check the oven"); may be empty.
    pub label: String,
    /// When it came due, in local time.
    pub due: DateTime<FixedOffset>,
    /// A timer's length ("Your 5 minute timer"), when known.
    pub length: Option<Duration>,
}

/// What the ringer hears from the scheduler.
#[derive(Debug, Clone, PartialEq)]
pub enum Heard {
    /// Start ringing this one (until `Stopped`).
    Ringing(Alert),
    /// Stop ringing this id (ring_secs passed, stopped, cancelled).
    Stopped(i64),
    /// It came due while earshot was off: say so once.
    Missed(Alert),
    /// Every ringing one was stopped ("stop" anywhere).
    StopAll,
}

/// The speaker the ringer plays on (the real [`Speaker`]; tests record).
pub trait RingSpeaker {
    fn is_speaking(&self) -> bool;
    /// The chime, then `words` spoken, in line after what is queued.
    fn ring(&self, chime: &Clip, words: &str);
    fn stop(&self);
}

impl RingSpeaker for Speaker {
    fn is_speaking(&self) -> bool {
        Speaker::is_speaking(self)
    }
    fn ring(&self, chime: &Clip, words: &str) {
        // One clip: the label follows the chime without a gap.
        Speaker::say_after(self, chime.clone(), words)
    }
    fn stop(&self) {
        Speaker::stop(self)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// Play a round as soon as the speaker is free.
    Due,
    /// A round is queued or sounding.
    Sounding,
    /// The round ended; the next one is due at this moment.
    Gap(Instant),
}

/// Every speaker's ringer on this host (the local one, one per satellite
/// connection), sharing one [`MissedBoard`] so that what came due while
/// earshot was off is announced once, on whichever speaker is there.
#[derive(Clone)]
pub struct Ringers {
    timers: Timers,
    board: Arc<MissedBoard>,
}

impl Ringers {
    /// Make this before the scheduler starts: the board subscribes now, so
    /// it hears the `missed` events the scheduler finds at start.
    pub fn new(timers: &Timers) -> Ringers {
        Ringers {
            timers: timers.clone(),
            board: Arc::new(MissedBoard::new(timers.subscribe())),
        }
    }

    /// A ringer with its own subscription; "stop" stops every ringing one
    /// through the scheduler. It takes over the missed announcements no
    /// other speaker has claimed yet (a satellite that connects after
    /// start on a host with no microphone).
    pub fn ringer(&self) -> Ringer {
        let rx = self.timers.subscribe();
        let stopper = self.timers.clone();
        let mut ringer = Ringer::new(
            Box::new(move || rx.try_iter().filter_map(|e| heard(&e)).collect()),
            Box::new(move || {
                if let Err(e) = stopper.stop_ringing(None) {
                    tracing::warn!("could not stop the ringing timers: {e}");
                }
            }),
        );
        ringer.missed.extend(self.board.take_unclaimed());
        ringer.board = Some(self.board.clone());
        ringer
    }

    /// A ringer factory (one per satellite connection).
    pub fn factory(&self) -> RingerFactory {
        let ringers = self.clone();
        Arc::new(move || ringers.ringer())
    }
}

/// Who announces what came due while earshot was off: the first speaker
/// to hear of it claims it, and one that connects later (a satellite)
/// takes those nobody claimed. So a missed timer is said once on the host,
/// and never dropped for want of a local speaker.
pub struct MissedBoard {
    state: Mutex<BoardState>,
}

struct BoardState {
    events: Receiver<TimerEvent>,
    claimed: HashSet<i64>,
    waiting: Vec<Alert>,
}

impl MissedBoard {
    /// A board over a subscription to the timers' events.
    pub fn new(events: Receiver<TimerEvent>) -> MissedBoard {
        MissedBoard {
            state: Mutex::new(BoardState {
                events,
                claimed: HashSet::new(),
                waiting: Vec::new(),
            }),
        }
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, BoardState> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Keep the missed ones nobody claimed; drop every other event.
        let fresh: Vec<TimerEvent> = state.events.try_iter().collect();
        for event in fresh {
            if let Some(Heard::Missed(alert)) = heard(&event) {
                if !state.claimed.contains(&alert.id) {
                    state.waiting.push(alert);
                }
            }
        }
        state
    }

    /// Claim the announcement of `id`; false when a speaker already did.
    pub fn claim(&self, id: i64) -> bool {
        let mut state = self.locked();
        state.waiting.retain(|a| a.id != id);
        state.claimed.insert(id)
    }

    /// Take (and claim) every missed one nobody has announced yet.
    pub fn take_unclaimed(&self) -> Vec<Alert> {
        let mut state = self.locked();
        let waiting = std::mem::take(&mut state.waiting);
        for a in &waiting {
            state.claimed.insert(a.id);
        }
        waiting
    }

    /// Take in what the timers said (so the subscription never piles up).
    pub fn pump(&self) {
        drop(self.locked());
    }
}

/// What a timer event means for a speaker (`set` and the like: nothing).
pub fn heard(event: &TimerEvent) -> Option<Heard> {
    let alert = || Alert {
        id: event.id,
        kind: match event.kind {
            Kind::Timer => AlertKind::Timer,
            Kind::Alarm => AlertKind::Alarm,
            Kind::Reminder => AlertKind::Reminder,
        },
        label: event.label.clone(),
        due: event.due,
        length: event
            .duration_s
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs),
    };
    match event.event {
        EventKind::Ringing => Some(Heard::Ringing(alert())),
        EventKind::Missed => Some(Heard::Missed(alert())),
        EventKind::Stopped | EventKind::Cancelled => Some(Heard::Stopped(event.id)),
        EventKind::Set => None,
    }
}

/// Makes a ringer with its own subscription to the timers (one per
/// satellite connection).
pub type RingerFactory = Arc<dyn Fn() -> Ringer + Send + Sync>;

/// The ringing state of one speaker; see the module docs.
pub struct Ringer {
    /// Drains what the scheduler said since the last call.
    events: Box<dyn FnMut() -> Vec<Heard> + Send>,
    /// Asks the scheduler to stop every ringing one (its `stopped` events
    /// then reach every ringer).
    stop_all: Box<dyn Fn() + Send>,
    ringing: BTreeMap<i64, Alert>,
    round: Round,
    /// Missed ones still to announce, in order.
    missed: VecDeque<Alert>,
    announcing: bool,
    /// Shared with the host's other ringers: who announces a missed one.
    board: Option<Arc<MissedBoard>>,
    chime: Clip,
    gap: Duration,
    /// Rounds played (tests, logs).
    pub rounds: usize,
    /// The words of the last round or announcement queued.
    sounding: String,
}

impl Ringer {
    /// A ringer over an event source and the scheduler's "stop them all".
    pub fn new(
        events: Box<dyn FnMut() -> Vec<Heard> + Send>,
        stop_all: Box<dyn Fn() + Send>,
    ) -> Ringer {
        Ringer {
            events,
            stop_all,
            ringing: BTreeMap::new(),
            round: Round::Due,
            missed: VecDeque::new(),
            announcing: false,
            board: None,
            chime: chime(22_050),
            gap: REPEAT_GAP,
            rounds: 0,
            sounding: String::new(),
        }
    }

    /// The pause between rounds (tests shorten it).
    pub fn with_gap(mut self, gap: Duration) -> Ringer {
        self.gap = gap;
        self
    }

    /// Whether anything is ringing now (the button and "stop" then stop it;
    /// the wake word is not needed to say "stop").
    pub fn is_ringing(&self) -> bool {
        !self.ringing.is_empty()
    }

    /// The words of the round (or missed announcement) last queued: what
    /// the speaker says after the chime, so the stop-word listener knows
    /// the device's own words (a label may name a wake word).
    pub fn sounding_words(&self) -> &str {
        &self.sounding
    }

    /// Whether [`Ringer::play_due`] would queue something now (a missed
    /// announcement, or a round whose pause is over).
    pub fn due(&self, now: Instant) -> bool {
        if !self.missed.is_empty() {
            return true;
        }
        !self.ringing.is_empty()
            && match self.round {
                Round::Due => true,
                Round::Gap(at) => now >= at,
                Round::Sounding => false,
            }
    }

    /// Take in what the scheduler said. Returns true when ringing ended
    /// (the caller may want to listen afresh).
    pub fn poll(&mut self, speaker: &dyn RingSpeaker) -> bool {
        let was = self.is_ringing();
        for heard in (self.events)() {
            match heard {
                Heard::Ringing(alert) => {
                    tracing::info!(id = alert.id, label = %alert.label, "ringing");
                    if self.ringing.is_empty() {
                        self.round = Round::Due;
                    }
                    self.ringing.insert(alert.id, alert);
                }
                Heard::Stopped(id) => {
                    self.ringing.remove(&id);
                }
                Heard::StopAll => self.ringing.clear(),
                Heard::Missed(alert) => {
                    if self.board.as_ref().is_none_or(|b| b.claim(alert.id)) {
                        self.missed.push_back(alert);
                    }
                }
            }
        }
        if let Some(board) = &self.board {
            board.pump();
        }
        let ended = was && !self.is_ringing();
        if ended && self.round == Round::Sounding {
            // The scheduler stopped it (ring_secs, "stop" elsewhere):
            // silence the round that is sounding.
            speaker.stop();
        }
        if ended {
            self.round = Round::Due;
        }
        ended
    }

    /// Play what is due if the speaker is free and `quiet` (no request is
    /// being heard or transcribed). Returns true when something was queued.
    pub fn play_due(&mut self, speaker: &dyn RingSpeaker, quiet: bool, now: Instant) -> bool {
        let busy = speaker.is_speaking();
        if self.round == Round::Sounding && !busy {
            tracing::info!(round = self.rounds, "ring round played");
            self.round = Round::Gap(now + self.gap);
        }
        if self.announcing && !busy {
            tracing::info!("announcement played");
            self.announcing = false;
        }
        if busy || !quiet {
            return false;
        }
        if !self.missed.is_empty() {
            let sentences: Vec<String> =
                self.missed.drain(..).map(|a| missed_sentence(&a)).collect();
            let words = sentences.join(" ");
            tracing::info!("announcing: {words}");
            speaker.ring(&self.chime, &words);
            self.sounding = words;
            self.announcing = true;
            return true;
        }
        if self.ringing.is_empty() {
            return false;
        }
        let due = match self.round {
            Round::Due => true,
            Round::Gap(at) => now >= at,
            Round::Sounding => false,
        };
        if !due {
            return false;
        }
        let sentences: Vec<String> = self.ringing.values().map(ring_sentence).collect();
        let words = sentences.join(" ");
        speaker.ring(&self.chime, &words);
        self.round = Round::Sounding;
        self.rounds += 1;
        tracing::info!(round = self.rounds, "ring round: {words}");
        self.sounding = words;
        true
    }

    /// Stop ringing without silencing the speaker (an answer is being
    /// spoken after the round): no more rounds, and the scheduler is told.
    pub fn stop_quietly(&mut self) {
        if self.ringing.is_empty() {
            return;
        }
        tracing::info!("ringing stopped on the device");
        self.ringing.clear();
        self.round = Round::Due;
        (self.stop_all)();
    }

    /// Stop everything ringing now (the button, "stop"): silence the
    /// speaker and tell the scheduler, so other speakers stop too.
    pub fn stop(&mut self, speaker: &dyn RingSpeaker) {
        if self.ringing.is_empty() {
            return;
        }
        tracing::info!("ringing stopped on the device");
        self.ringing.clear();
        self.round = Round::Due;
        speaker.stop();
        (self.stop_all)();
    }
}

/// Whether an utterance heard while ringing is just a request to stop it
/// ("stop", "ok stop", "enough", "stop the timer").
pub fn is_stop_word(text: &str) -> bool {
    let cleaned: String = text
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == ' ' {
                c
            } else {
                ' '
            }
        })
        .collect();
    let words: Vec<&str> = cleaned
        .split_whitespace()
        .filter(|w| !matches!(*w, "ok" | "okay" | "please" | "now" | "it" | "that" | "the"))
        .collect();
    matches!(
        words.as_slice(),
        ["stop"]
            | ["stop", "stop"]
            | ["enough"]
            | ["quiet"]
            | ["silence"]
            | ["shut", "up"]
            | ["be", "quiet"]
            | ["stop", "timer" | "alarm" | "reminder" | "ringing" | "ring"]
            | ["turn", "off"]
            | ["turn", "alarm" | "timer", "off"]
            | ["dismiss"]
    )
}

/// "5 minute", "1 hour 30 minute", "90 second".
pub fn length_words(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, sec) = (s / 3600, s % 3600 / 60, s % 60);
    let mut parts = Vec::new();
    if h > 0 {
        parts.push(format!("{h} hour"));
    }
    if m > 0 {
        parts.push(format!("{m} minute"));
    }
    if sec > 0 || parts.is_empty() {
        parts.push(format!("{sec} second"));
    }
    parts.join(" ")
}

/// A label without a trailing "timer"/"alarm" ("rice timer" → "rice").
fn bare_label(label: &str, word: &str) -> String {
    let label = label.trim().trim_end_matches(['.', '!']);
    let lower = label.to_lowercase();
    if lower == word {
        return String::new();
    }
    match lower.strip_suffix(&format!(" {word}")) {
        Some(rest) => label[..rest.len()].trim().to_string(),
        None => label.to_string(),
    }
}

/// What a timer is called aloud: "rice timer", "5 minute timer", "timer".
fn timer_name(alert: &Alert, hyphen: bool) -> String {
    let label = bare_label(&alert.label, "timer");
    if !label.is_empty() {
        return format!("{label} timer");
    }
    match alert.length {
        Some(d) if hyphen => format!("{} timer", length_words(d).replace(' ', "-")),
        Some(d) => format!("{} timer", length_words(d)),
        None => "timer".into(),
    }
}

/// The sentence said at each round: "Your rice timer is done." /
/// "Reminder: check the oven." / "It's 6:30, your alarm."
pub fn ring_sentence(alert: &Alert) -> String {
    match alert.kind {
        AlertKind::Timer => format!("Your {} is done.", timer_name(alert, false)),
        AlertKind::Reminder => {
            let label = alert.label.trim().trim_end_matches(['.', '!']);
            if label.is_empty() {
                "Reminder.".into()
            } else {
                format!("Reminder: {label}.")
            }
        }
        AlertKind::Alarm => {
            let time = alert.due.format("%-H:%M");
            let label = bare_label(&alert.label, "alarm");
            if label.is_empty() {
                format!("It's {time}, your alarm.")
            } else {
                format!("It's {time}, your {label} alarm.")
            }
        }
    }
}

/// The one-time sentence for one that came due while earshot was off.
pub fn missed_sentence(alert: &Alert) -> String {
    match alert.kind {
        AlertKind::Timer => format!(
            "While I was off, your {} finished.",
            timer_name(alert, true)
        ),
        AlertKind::Reminder => {
            let label = alert.label.trim().trim_end_matches(['.', '!']);
            let when = alert.due.format("%-H:%M");
            if label.is_empty() {
                format!("While I was off, a reminder came due at {when}.")
            } else {
                format!("While I was off, a reminder came due at {when}: {label}.")
            }
        }
        AlertKind::Alarm => {
            let label = bare_label(&alert.label, "alarm");
            let when = alert.due.format("%-H:%M");
            if label.is_empty() {
                format!("While I was off, your {when} alarm went off.")
            } else {
                format!("While I was off, your {label} alarm went off at {when}.")
            }
        }
    }
}

/// The chime: two soft sine tones (E6 then C6, 180 ms and 320 ms) with
/// short fades so they do not click, then 150 ms of silence. Made in code
/// so no asset file has to ship.
pub fn chime(rate: u32) -> Clip {
    let rate_f = rate as f32;
    let mut samples = Vec::new();
    for (freq, secs) in [(1318.5f32, 0.18f32), (1046.5, 0.32)] {
        let n = (secs * rate_f) as usize;
        let fade = (0.012 * rate_f) as usize;
        for i in 0..n {
            let t = i as f32 / rate_f;
            let env = if i < fade {
                i as f32 / fade as f32
            } else {
                // An exponential decay, like a struck bell.
                (-(t - fade as f32 / rate_f) * 5.0).exp()
            };
            let tail = if n - i < fade {
                (n - i) as f32 / fade as f32
            } else {
                1.0
            };
            samples.push(0.45 * env * tail * (2.0 * PI * freq * t).sin());
        }
    }
    samples.extend(std::iter::repeat_n(0.0, (0.15 * rate_f) as usize));
    Clip::new(samples, rate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Recorder {
        said: Mutex<Vec<String>>,
        speaking: AtomicBool,
        stops: AtomicUsize,
    }
    impl RingSpeaker for Recorder {
        fn is_speaking(&self) -> bool {
            self.speaking.load(Ordering::SeqCst)
        }
        fn ring(&self, chime: &Clip, words: &str) {
            assert!(chime.seconds() > 0.4);
            let mut said = self.said.lock().unwrap();
            said.push("<chime>".into());
            said.push(words.into());
            self.speaking.store(true, Ordering::SeqCst);
        }
        fn stop(&self) {
            self.stops.fetch_add(1, Ordering::SeqCst);
            self.speaking.store(false, Ordering::SeqCst);
        }
    }
    impl Recorder {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.said.lock().unwrap())
        }
        fn finish(&self) {
            self.speaking.store(false, Ordering::SeqCst);
        }
    }

    fn alert(id: i64, kind: AlertKind, label: &str, length: Option<u64>) -> Alert {
        Alert {
            id,
            kind,
            label: label.into(),
            due: DateTime::parse_from_rfc3339("2026-12-02T06:30:00+01:00").unwrap(),
            length: length.map(Duration::from_secs),
        }
    }

    type Queue = Arc<Mutex<Vec<Heard>>>;

    fn ringer() -> (Ringer, Queue, Arc<AtomicUsize>) {
        let queue: Queue = Arc::default();
        let stops = Arc::new(AtomicUsize::new(0));
        let q = queue.clone();
        let s = stops.clone();
        let r = Ringer::new(
            Box::new(move || std::mem::take(&mut *q.lock().unwrap())),
            Box::new(move || {
                s.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .with_gap(Duration::from_secs(3));
        (r, queue, stops)
    }

    #[test]
    fn sentences_say_what_rang() {
        let s = |k, l: &str, len| ring_sentence(&alert(1, k, l, len));
        assert_eq!(
            s(AlertKind::Timer, "rice", Some(1080)),
            "Your rice timer is done."
        );
        assert_eq!(
            s(AlertKind::Timer, "Rice timer", None),
            "Your Rice timer is done."
        );
        assert_eq!(
            s(AlertKind::Timer, "", Some(300)),
            "Your 5 minute timer is done."
        );
        assert_eq!(
            s(AlertKind::Timer, "", Some(5400)),
            "Your 1 hour 30 minute timer is done."
        );
        assert_eq!(s(AlertKind::Timer, "", None), "Your timer is done.");
        assert_eq!(
            s(AlertKind::Reminder, "check the oven", None),
            "Reminder: check the oven."
        );
        assert_eq!(s(AlertKind::Alarm, "", None), "It's 6:30, your alarm.");
        assert_eq!(
            s(AlertKind::Alarm, "wake up alarm", None),
            "It's 6:30, your wake up alarm."
        );
        assert_eq!(
            missed_sentence(&alert(1, AlertKind::Timer, "", Some(300))),
            "While I was off, your 5-minute timer finished."
        );
        assert_eq!(
            missed_sentence(&alert(1, AlertKind::Alarm, "", None)),
            "While I was off, your 6:30 alarm went off."
        );
    }

    #[test]
    fn rounds_repeat_after_the_gap_until_stopped() {
        let (mut r, queue, _) = ringer();
        let speaker = Recorder::default();
        let t0 = Instant::now();
        assert!(!r.play_due(&speaker, true, t0), "nothing rings yet");
        queue
            .lock()
            .unwrap()
            .push(Heard::Ringing(alert(7, AlertKind::Timer, "rice", None)));
        r.poll(&speaker);
        assert!(r.is_ringing());
        // Not while a request is being heard.
        assert!(!r.play_due(&speaker, false, t0));
        assert_eq!(r.sounding_words(), "", "nothing sounded yet");
        assert!(r.play_due(&speaker, true, t0));
        assert_eq!(speaker.take(), ["<chime>", "Your rice timer is done."]);
        // The listener is told what the round says (a label may name the
        // wake word).
        assert_eq!(r.sounding_words(), "Your rice timer is done.");
        // Sounding: nothing more until it ends and the gap passes.
        assert!(!r.play_due(&speaker, true, t0 + Duration::from_secs(10)));
        speaker.finish();
        let end = t0 + Duration::from_secs(2);
        assert!(!r.play_due(&speaker, true, end));
        assert!(!r.play_due(&speaker, true, end + Duration::from_secs(2)));
        assert!(r.play_due(&speaker, true, end + Duration::from_secs(3)));
        assert_eq!(r.rounds, 2);
        // The scheduler stops it (ring_secs): the sounding round is cut.
        queue.lock().unwrap().push(Heard::Stopped(7));
        assert!(r.poll(&speaker));
        assert_eq!(speaker.stops.load(Ordering::SeqCst), 1);
        speaker.take();
        assert!(!r.play_due(&speaker, true, end + Duration::from_secs(60)));
        assert!(speaker.take().is_empty());
    }

    #[test]
    fn a_sentence_being_spoken_ends_first() {
        let (mut r, queue, _) = ringer();
        let speaker = Recorder::default();
        speaker
            .said
            .lock()
            .unwrap()
            .push("The answer so far.".into());
        speaker.speaking.store(true, Ordering::SeqCst);
        queue.lock().unwrap().push(Heard::Ringing(alert(
            1,
            AlertKind::Reminder,
            "check the oven",
            None,
        )));
        r.poll(&speaker);
        assert!(!r.play_due(&speaker, true, Instant::now()));
        speaker.finish();
        assert!(r.play_due(&speaker, true, Instant::now()));
        assert_eq!(
            speaker.take(),
            ["The answer so far.", "<chime>", "Reminder: check the oven."]
        );
    }

    #[test]
    fn the_button_stops_it_here_and_tells_the_scheduler() {
        let (mut r, queue, stops) = ringer();
        let speaker = Recorder::default();
        queue
            .lock()
            .unwrap()
            .push(Heard::Ringing(alert(1, AlertKind::Alarm, "", None)));
        r.poll(&speaker);
        r.play_due(&speaker, true, Instant::now());
        r.stop(&speaker);
        assert!(!r.is_ringing());
        assert_eq!(stops.load(Ordering::SeqCst), 1);
        assert_eq!(speaker.stops.load(Ordering::SeqCst), 1);
        // Stopping when nothing rings does nothing.
        r.stop(&speaker);
        assert_eq!(stops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn missed_ones_are_announced_once() {
        let (mut r, queue, _) = ringer();
        let speaker = Recorder::default();
        queue
            .lock()
            .unwrap()
            .push(Heard::Missed(alert(3, AlertKind::Timer, "", Some(300))));
        r.poll(&speaker);
        assert!(!r.is_ringing());
        assert!(r.play_due(&speaker, true, Instant::now()));
        assert_eq!(
            speaker.take(),
            ["<chime>", "While I was off, your 5-minute timer finished."]
        );
        speaker.finish();
        assert!(!r.play_due(&speaker, true, Instant::now()));
        assert!(speaker.take().is_empty());
    }

    #[test]
    fn stop_words() {
        for yes in [
            "Stop.",
            "stop it",
            "OK, stop!",
            "Stop the timer.",
            "enough",
            "turn it off",
        ] {
            assert!(is_stop_word(yes), "{yes}");
        }
        for no in [
            "stop the music and play jazz",
            "what time is it",
            "",
            "don't stop",
        ] {
            assert!(!is_stop_word(no), "{no}");
        }
    }

    #[test]
    fn the_chime_is_two_tones_without_clicks() {
        let c = chime(16_000);
        assert!((0.6..0.8).contains(&c.seconds()), "{}", c.seconds());
        let peak = c.samples.iter().fold(0f32, |m, s| m.max(s.abs()));
        assert!(peak > 0.3 && peak <= 0.45);
        assert!(c.samples[0].abs() < 0.01 && c.samples.last().unwrap().abs() < 0.01);
    }

    /// One host, one announcement: the local speaker claims what was
    /// missed before satellites connect; with no local microphone the
    /// first satellite to connect says it, and a second one does not.
    #[test]
    fn a_missed_timer_is_announced_once_on_the_host() {
        use crate::timers::{Kind, ManualClock, NewTimer, TimersConfig, When};
        for local in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let store = crate::store::Store::open_in(dir.path()).unwrap();
            let paths = crate::paths::Paths::new(dir.path(), dir.path());
            let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
            let timers = Timers::with_clock(&TimersConfig::default(), &paths, store, clock.clone());
            timers
                .add(NewTimer {
                    kind: Kind::Timer,
                    label: Some("pasta".into()),
                    when: When::In(Duration::from_secs(5)),
                    repeat: None,
                })
                .unwrap();
            // Due while nothing ran.
            clock.advance(Duration::from_secs(60));
            let ringers = Ringers::new(&timers);
            let mut here = ringers.ringer();
            let _scheduler = timers.start_scheduler().unwrap();
            let (at_home, sat1, sat2) = (
                Recorder::default(),
                Recorder::default(),
                Recorder::default(),
            );
            if local {
                here.poll(&at_home);
            }
            let factory = ringers.factory();
            let (mut first, mut second) = (factory(), factory());
            let now = Instant::now();
            for (ringer, speaker) in [
                (&mut here, &at_home),
                (&mut first, &sat1),
                (&mut second, &sat2),
            ] {
                ringer.poll(speaker);
                ringer.play_due(speaker, true, now);
            }
            let said: Vec<Vec<String>> =
                [&at_home, &sat1, &sat2].iter().map(|r| r.take()).collect();
            let announced: Vec<usize> = said
                .iter()
                .enumerate()
                .filter(|(_, s)| {
                    s.iter()
                        .any(|w| w.contains("While I was off, your pasta timer"))
                })
                .map(|(i, _)| i)
                .collect();
            assert_eq!(
                announced,
                [if local { 0 } else { 1 }],
                "local={local}: {said:?}"
            );
        }
    }
}
