//! Announcements: "tell the kitchen dinner is ready" reaches the speakers
//! of the other rooms — today the ESPHome voice devices earshot hosts.
//!
//! A hub the decision layer (the intent tree's `announce` action, the
//! agent's `announce` tool) sends into, and every connected speaker that
//! can play an announcement registers with, under the names a person
//! calls it by ("kitchen", "Kitchen Voice"). It is a lower module so the
//! tree and the tools reach it without naming a front door; the front door
//! (`esphome::host`) holds a [`Registration`] for as long as the device is
//! connected and plays what arrives on it from its own thread.
//!
//! Sending never blocks: each speaker has a small bounded queue, and a
//! full one is reported as busy rather than waited on.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// How many announcements may wait for one speaker.
const QUEUE: usize = 4;
/// The longest announcement (characters) a speaker is handed.
pub const MAX_CHARS: usize = 400;

/// One announcement for one speaker.
#[derive(Debug, Clone, PartialEq)]
pub struct Announcement {
    /// What to say, as a sentence.
    pub text: String,
}

/// Why an announcement went nowhere: each is one sentence to speak.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnnounceError {
    #[error("No other speaker is connected to announce on.")]
    NoSpeakers,
    #[error("I don't know a speaker called {name}; I can announce on {known}.")]
    Unknown { name: String, known: String },
    #[error("There is nothing to announce.")]
    Empty,
    #[error("The {0} speaker is still busy with earlier announcements.")]
    Busy(String),
}

/// The hub (cheap to clone; every clone is the same hub).
#[derive(Clone, Default)]
pub struct Announcements {
    inner: Arc<Mutex<Hub>>,
}

#[derive(Default)]
struct Hub {
    next_id: u64,
    speakers: Vec<Speaker>,
}

struct Speaker {
    id: u64,
    /// Its names, normalised (see [`normalise`]); the first is the one
    /// spoken back.
    names: Vec<String>,
    tx: SyncSender<Announcement>,
}

/// A speaker's place in the hub; dropping it (the device disconnected)
/// takes the speaker out.
pub struct Registration {
    id: u64,
    hub: Announcements,
    rx: Receiver<Announcement>,
}

impl Registration {
    /// The announcements waiting for this speaker (never blocks).
    pub fn pending(&self) -> Vec<Announcement> {
        self.rx.try_iter().collect()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.hub.lock().speakers.retain(|s| s.id != self.id);
    }
}

impl std::fmt::Debug for Announcements {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcements")
            .field("speakers", &self.names())
            .finish()
    }
}

impl Announcements {
    fn lock(&self) -> std::sync::MutexGuard<'_, Hub> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Register a speaker under `names` (empty names are skipped; a
    /// speaker with none can still be reached by "announce …" to all).
    pub fn register(&self, names: &[&str]) -> Registration {
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let mut hub = self.lock();
        hub.next_id += 1;
        let id = hub.next_id;
        let mut normalised: Vec<String> = Vec::new();
        for name in names {
            let n = normalise(name);
            if !n.is_empty() && !normalised.contains(&n) {
                normalised.push(n);
            }
        }
        hub.speakers.push(Speaker {
            id,
            names: normalised,
            tx,
        });
        Registration {
            id,
            hub: self.clone(),
            rx,
        }
    }

    /// The connected speakers' names (the first of each), sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .lock()
            .speakers
            .iter()
            .filter_map(|s| s.names.first().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The name, as matched, of the connected speaker `said` names ("the
    /// kitchen" → "kitchen"), if one does.
    pub fn find(&self, said: &str) -> Option<String> {
        let want = normalise(said);
        if want.is_empty() {
            return None;
        }
        self.lock()
            .speakers
            .iter()
            .any(|s| s.names.contains(&want))
            .then_some(want)
    }

    /// Whether any speaker is connected.
    pub fn any(&self) -> bool {
        !self.lock().speakers.is_empty()
    }

    /// Send `text` to the speaker named `target`, or to every speaker
    /// (`None`). Returns the names it went to.
    pub fn send(&self, target: Option<&str>, text: &str) -> Result<Vec<String>, AnnounceError> {
        let text = sentence(text);
        if text.is_empty() {
            return Err(AnnounceError::Empty);
        }
        let hub = self.lock();
        if hub.speakers.is_empty() {
            return Err(AnnounceError::NoSpeakers);
        }
        let chosen: Vec<&Speaker> = match target {
            None => hub.speakers.iter().collect(),
            Some(name) => {
                let want = normalise(name);
                let found: Vec<&Speaker> = hub
                    .speakers
                    .iter()
                    .filter(|s| s.names.contains(&want))
                    .collect();
                if found.is_empty() {
                    drop(hub);
                    return Err(AnnounceError::Unknown {
                        name: name.trim().to_string(),
                        known: or_list(&self.names()),
                    });
                }
                found
            }
        };
        let mut sent = Vec::new();
        for speaker in chosen {
            // The name as the person said it, else the speaker's first.
            let label = target
                .map(normalise)
                .or_else(|| speaker.names.first().cloned())
                .unwrap_or_else(|| "other".into());
            match speaker.tx.try_send(Announcement { text: text.clone() }) {
                Ok(()) => sent.push(label),
                // Gone between the lock and now: its registration is
                // being dropped.
                Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(_)) if target.is_some() => {
                    return Err(AnnounceError::Busy(label))
                }
                Err(TrySendError::Full(_)) => {}
            }
        }
        if sent.is_empty() {
            return Err(AnnounceError::NoSpeakers);
        }
        Ok(sent)
    }
}

/// A speaker's name as matched: lower case, words only, without "the"
/// and a trailing "speaker"/"satellite"/"device" ("kids room" keeps its
/// "room": it is part of the name).
pub fn normalise(name: &str) -> String {
    let lower = name.to_lowercase();
    let mut words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    if words.first() == Some(&"the") {
        words.remove(0);
    }
    while words.len() > 1
        && matches!(
            words.last(),
            Some(&("speaker" | "speakers" | "satellite" | "device"))
        )
    {
        words.pop();
    }
    words.join(" ")
}

/// The message as a sentence: trimmed, capitalised, ending in a stop, at
/// most [`MAX_CHARS`].
fn sentence(text: &str) -> String {
    let t = text.trim().trim_end_matches([',', ';', ':']).trim();
    let mut out: String = t.chars().take(MAX_CHARS).collect();
    if out.is_empty() {
        return out;
    }
    if let Some(first) = out.chars().next() {
        let upper: String = first.to_uppercase().collect();
        out.replace_range(..first.len_utf8(), &upper);
    }
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

/// "a", "a or b", "a, b or c".
fn or_list(names: &[String]) -> String {
    match names {
        [] => "none".into(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_speaker_gets_it_and_the_others_do_not() {
        let hub = Announcements::default();
        let kitchen = hub.register(&["kitchen", "Kitchen Voice PE"]);
        let office = hub.register(&["Office Speaker"]);
        assert_eq!(hub.names(), vec!["kitchen", "office"]);
        assert_eq!(hub.find("the Kitchen speaker").as_deref(), Some("kitchen"));
        assert_eq!(
            hub.find("kitchen voice pe").as_deref(),
            Some("kitchen voice pe")
        );
        assert_eq!(hub.find("garage"), None);
        assert_eq!(
            hub.send(Some("the kitchen"), "dinner is ready").unwrap(),
            vec!["kitchen"]
        );
        assert_eq!(
            kitchen.pending(),
            vec![Announcement {
                text: "Dinner is ready.".into()
            }]
        );
        assert!(office.pending().is_empty());
        // To all.
        let mut all = hub.send(None, "Time to go!").unwrap();
        all.sort();
        assert_eq!(all, vec!["kitchen", "office"]);
        assert_eq!(kitchen.pending()[0].text, "Time to go!");
        assert_eq!(office.pending().len(), 1);
    }

    #[test]
    fn unknown_names_empty_text_and_no_speakers_are_sentences() {
        let hub = Announcements::default();
        assert_eq!(hub.send(None, "hi"), Err(AnnounceError::NoSpeakers));
        let _a = hub.register(&["kitchen"]);
        let _b = hub.register(&["office"]);
        let err = hub.send(Some("garage"), "hi").unwrap_err();
        assert_eq!(
            err.to_string(),
            "I don't know a speaker called garage; I can announce on kitchen or office."
        );
        assert_eq!(hub.send(None, "  , "), Err(AnnounceError::Empty));
    }

    #[test]
    fn a_dropped_registration_leaves_and_a_full_queue_is_busy_not_a_wait() {
        let hub = Announcements::default();
        let kitchen = hub.register(&["kitchen"]);
        for _ in 0..QUEUE {
            hub.send(Some("kitchen"), "x").unwrap();
        }
        assert_eq!(
            hub.send(Some("kitchen"), "x"),
            Err(AnnounceError::Busy("kitchen".into()))
        );
        assert_eq!(kitchen.pending().len(), QUEUE);
        drop(kitchen);
        assert!(!hub.any());
        assert_eq!(hub.send(None, "x"), Err(AnnounceError::NoSpeakers));
    }

    #[test]
    fn long_text_is_capped() {
        let hub = Announcements::default();
        let k = hub.register(&["kitchen"]);
        hub.send(None, &"a".repeat(5000)).unwrap();
        assert!(k.pending()[0].text.chars().count() <= MAX_CHARS + 1);
    }
}
