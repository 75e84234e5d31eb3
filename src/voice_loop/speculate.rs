//! Ending a complete command early (issue 21, point 2).
//!
//! The endpointer waits `hangover_ms` (700 ms) of silence before it calls
//! an utterance over, and only then did STT start: most of a device
//! command's latency was waiting. At a shorter pause (`audio.vad.early_ms`,
//! [`VadEvent::Pause`](crate::audio::vad::VadEvent::Pause)) the loop now
//! transcribes the audio so far *during* the hang-over:
//! - when that transcript is a complete device command (below), and the
//!   microphone stayed silent while it was computed, the utterance ends
//!   there, with that transcript: no second STT pass;
//! - otherwise listening goes on; if the utterance then ends with no voiced
//!   frame after the pause, the transcript is reused (it is of the same
//!   speech), so open questions lose the STT time from their latency even
//!   though they keep the long hang-over;
//! - if speech resumes, the speculation is dropped with the pause it
//!   belonged to.
//!
//! A wrong action is worse than a slow one, so "complete" is strict: the
//! device classifier is confident of a device intent (or less sure, and
//! the one frame the words fit strongly is that intent's or one it was
//! never taught: [`frame_vouches`]), its frame fits the
//! words strongly, and the sentence does not end the way a sentence
//! stopped half-way does (a trailing ellipsis or comma, which whisper
//! writes for speech that trails off, or a last word that needs a
//! continuation: "put batteries on my", "what time is it in"). A complete
//! command whisper wrote without a full stop ends half-way between that
//! pause and the hang-over ([`EarlyEnd::AfterLongerPause`]), and so does a
//! finished one the classifier is a little less sure of.
//!
//! Open speech keeps the hang-over, with one exception: a finished
//! question the classifier confidently calls other speech also ends at
//! `audio.vad.question_ms` ([`open_question_end`]); its language-model
//! request began at the look, so its answer is nearly ready by then.

use std::sync::Arc;

use std::time::Instant;

use crate::audio::vad::{Speculation, Utterance, VadEvent};
use crate::cancel::CancelToken;
use crate::stt::Transcript;
use crate::tts::speaker::{Speaker, TurnSpeech};

/// How long the loop waits for a look's words between reads of the
/// microphone ([`super::VoiceLoop::look_while_listening`]).
const LOOK_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// Lowest device-classifier confidence that ends a command early. Measured
/// on fragments cut at a pause (notes/latency.md): "Turn the volume." came
/// out volume_up at 0.89 and "Set a timer." timer_set at 0.90, while whole
/// commands scored 0.95–0.9998; a fragment must not act.
pub const EARLY_MIN_CONFIDENCE: f32 = 0.95;

/// Lowest confidence that still ends a *finished* command before the
/// hang-over, after the longer pause ([`EarlyEnd::AfterLongerPause`]).
/// A command whisper heard a little off ("Batteries on my shopping list."
/// with its first word lost: todo_add 0.89), or said in words the examples
/// do not hold ("Take eggs off the shopping list." todo_delete 0.80), is as
/// whole as a clean one; only the doubt is larger, so it gets the longer
/// pause instead of the full hang-over — when nothing else is in doubt:
/// a full stop after a word that ends a request, and a frame the words fit
/// strongly. Measured on the understanding set cut after every word
/// (`tests/endpointing.rs`; notes/latency.md, stop 48): from 0.85 to 0.75
/// the whole commands that end before the hang-over go from 309 to 329 of
/// 414, the fragments from 211 to 216 of 1679; no trap ends early either
/// way. The fragments measured at a pause that scored this high ("Turn
/// the volume." 0.89, "Set a timer." 0.90) end on an open word or fit
/// their frame weakly, and are refused for that.
pub const LONGER_PAUSE_MIN_CONFIDENCE: f32 = 0.75;

/// How sure the device classifier must be that a finished question is
/// *not* a device command before it ends at `audio.vad.question_ms`
/// ([`open_question_end`]).
pub const QUESTION_MIN_OTHER_CONFIDENCE: f32 = 0.85;

/// Words a finished request does not end on.
const DANGLING: &[&str] = &[
    "a", "an", "the", "my", "your", "our", "this", "that", "to", "for", "in", "on", "at", "of",
    "with", "from", "by", "about", "and", "or", "but", "into", "onto", "until", "till", "than",
    "is", "are", "was", "be", "set", "add", "put", "remind", "me", "it's", "what's", "some",
    "called", "named", "like", "if", "when", "after", "before", "volume", "turn", "make",
];

/// How a sentence ends, as whisper wrote it (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Trailing off, or on a word that needs a continuation.
    Open,
    /// Its last word can end a request, but whisper wrote no full stop:
    /// it often leaves one off a short imperative ("Cancel the timer"),
    /// and it also does so for speech it thinks goes on.
    Unmarked,
    /// A full stop, question or exclamation mark after a word that can
    /// end a request.
    Finished,
}

/// How `text` ends (see [`Ending`]).
pub fn ending(text: &str) -> Ending {
    let t = text.trim();
    if t.is_empty() || t.ends_with("...") || t.ends_with('…') || t.ends_with(',') {
        return Ending::Open;
    }
    let last = t
        .trim_end_matches(['.', '?', '!'])
        .split_whitespace()
        .last()
        .unwrap_or("")
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
        .to_lowercase();
    if last.is_empty()
        || lacks_its_verb(t)
        || (DANGLING.contains(&last.as_str())
            && !ends_a_clause(t)
            && !says_which_way(&last, t)
            && !closes_on_its_object(t))
    {
        Ending::Open
    } else if t.ends_with(['.', '?', '!']) {
        Ending::Finished
    } else {
        Ending::Unmarked
    }
}

/// Whether `text` stops on a word that cannot end a sentence ("How hot
/// is", "How do birds", "Add it to the"), whatever mark whisper put
/// after it. Not a trailing comma or "…" after words that can end one:
/// whisper writes "who painted the Mona Lisa," where the voice stays up
/// at the end of a whole question, and holding those past the hang-over
/// (`audio.vad.open_hold_ms`) cost 500 ms on every such line.
fn stops_on_a_word_that_needs_more(text: &str) -> bool {
    let bare = text.trim().trim_end_matches([',', '.', '…', '?', '!']);
    !bare.trim().is_empty() && ending(bare) == Ending::Open
}

/// Whether a question asked with "do" stops before its verb: "How do
/// birds?", "Why does the?", "What did you?" — the question word (or
/// none), "do", "does" or "did", then at most its subject, a pronoun or
/// a noun with its article ("how do the birds"). whisper writes a
/// question mark there when the voice pauses, and the rest ("… find
/// their way home?") follows. "What does it mean?", "Why do cats purr?"
/// have their verb.
fn lacks_its_verb(text: &str) -> bool {
    const DO: &[&str] = &["do", "does", "did"];
    const ARTICLE: &[&str] = &[
        "a", "an", "the", "my", "your", "his", "her", "our", "their", "its", "these", "those",
        "some", "any",
    ];
    let w = words(text);
    let Some(at) = w.iter().position(|x| DO.contains(&x.as_str())) else {
        return false;
    };
    // "do" opens the question, or follows its question word(s): "how
    // do", "how often do", "what kind of music do" is not counted.
    let opens =
        at == 0 || (at <= 2 && QUESTION_WORDS.contains(&w[0].split('\'').next().unwrap_or("")));
    if !opens {
        return false;
    }
    let rest = &w[at + 1..];
    match rest {
        [] | [_] => true,
        [article, _] => ARTICLE.contains(&article.as_str()),
        _ => false,
    }
}

/// Whether a sentence ending on "volume" already said which way: "lower
/// the volume", "turn up the volume" are whole; "turn the volume" waits
/// for its "up" or "down". A question ("what's the volume") asks for the
/// level and is whole too.
fn says_which_way(last: &str, text: &str) -> bool {
    const WAYS: &[&str] = &[
        "up", "down", "lower", "raise", "increase", "decrease", "reduce", "boost", "drop", "mute",
        "unmute", "max", "maximum", "minimum",
    ];
    let words = words(text);
    let asks = words
        .first()
        .is_some_and(|w| QUESTION_WORDS.contains(&w.split('\'').next().unwrap_or("")));
    last == "volume" && (asks || words.iter().any(|w| WAYS.contains(&w.as_str())))
}

/// Whether a sentence's last word, a form of "be", closes a question
/// inside it: "explain what a black hole is", "tell me who she was",
/// "what's the weather going to be". A question word comes before it,
/// followed at once by a subject (an article, a possessive or a pronoun),
/// so "what time is" and "what day of the week is" (no subject yet) still
/// need their "it".
fn ends_a_clause(text: &str) -> bool {
    const BE: &[&str] = &["is", "are", "was", "were", "be"];
    const ASKS: &[&str] = &[
        "what", "what's", "who", "who's", "where", "where's", "how", "how's", "when", "which",
        "why", "whether", "if",
    ];
    const SUBJECT: &[&str] = &[
        "a", "an", "the", "my", "your", "his", "her", "our", "their", "this", "that", "these",
        "those", "it", "he", "she", "they", "we", "you", "i",
    ];
    let w = words(text);
    let Some((last, before)) = w.split_last() else {
        return false;
    };
    if !BE.contains(&last.as_str()) {
        return false;
    }
    let Some(asked) = before.iter().rposition(|x| ASKS.contains(&x.as_str())) else {
        return false;
    };
    // "what time it is", "what day of the week it was": the subject
    // came right before the verb, after the question's own words.
    const PRONOUN: &[&str] = &["it", "he", "she", "they", "we", "you", "i", "this", "that"];
    before
        .get(asked + 1)
        .is_some_and(|x| SUBJECT.contains(&x.as_str()))
        || (before.len() > asked + 2
            && before.last().is_some_and(|x| PRONOUN.contains(&x.as_str())))
}

/// Whether a last word that usually needs more is here the end of the
/// sentence, as the object of what came before it: "me" after a
/// preposition ("what do you know about me", not "remind me"), "that"
/// after hearing or saying ("can you repeat that", "I didn't catch
/// that", "what was that", not "remember that"), "set" after what is set
/// ("do I have any alarms set", not "set"), a verb whose object the
/// question asks for ("what do bees make", not "make").
fn closes_on_its_object(text: &str) -> bool {
    const PREPOSITIONS: &[&str] = &["about", "for", "with", "to", "of", "from", "at", "on"];
    const HEARD: &[&str] = &[
        "repeat",
        "catch",
        "caught",
        "miss",
        "missed",
        "hear",
        "heard",
        "was",
        "say",
        "said",
        "understand",
        "get",
    ];
    const SET_THINGS: &[&str] = &[
        "alarm",
        "alarms",
        "timer",
        "timers",
        "reminder",
        "reminders",
    ];
    let w = words(text);
    let [.., before, last] = w.as_slice() else {
        return false;
    };
    // "what do bees make", "which one did you add": the question word
    // is the verb's object.
    const ASKS_FOR_OBJECT: &[&str] = &["what", "which", "who", "whom"];
    const AUX: &[&str] = &["do", "does", "did", "can", "will", "would", "should"];
    let object_asked = ASKS_FOR_OBJECT.contains(&w[0].as_str())
        && w[1..w.len() - 1].iter().any(|x| AUX.contains(&x.as_str()));
    match last.as_str() {
        "make" | "add" | "put" | "set" if object_asked => true,
        "me" => PREPOSITIONS.contains(&before.as_str()),
        "that" => HEARD.contains(&before.as_str()),
        "set" => SET_THINGS.contains(&before.as_str()),
        _ => false,
    }
}

/// When a transcript made at a pause lets the utterance end before the
/// full hang-over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EarlyEnd {
    /// Wait the hang-over: not a command, not confident, or not whole.
    Never,
    /// A complete command: end at `audio.vad.early_ms` of pause.
    AtPause,
    /// A complete command with one doubt — whisper wrote no full stop, or
    /// the classifier is less sure ([`LONGER_PAUSE_MIN_CONFIDENCE`]) —
    /// ends half-way between `early_ms` and the hang-over. The missing
    /// stop is a weaker sign than a trailing comma, so the command does
    /// not wait the whole hang-over (it did: 400 ms more of waiting for
    /// "Cancel the timer" than for "Cancel the timer."), but it gets
    /// longer to go on.
    AfterLongerPause,
    /// A finished request for words that is not a device command
    /// ([`open_question_end`]): ends at `audio.vad.question_ms`.
    AfterQuestionPause,
}

/// Whether `text` is a complete device command, and so may end early,
/// and how soon. Three signs are read, each clear or a doubt:
/// - how it ends ([`ending`]): finished, or no full stop (a doubt; an
///   open ending never ends early);
/// - the device intent `classified` (intent, confidence):
///   [`EARLY_MIN_CONFIDENCE`] or more, or down to
///   [`LONGER_PAUSE_MIN_CONFIDENCE`] (a doubt; below, or `other`, never);
/// - the intent's frame (`crate::tree::fit`): strong, or weak (a doubt).
///   A weak fit that a missing argument would make strong is the head of
///   a longer command — "Add batteries." is a whole command, but at a
///   pause it is as likely the start of "… to my shopping list", "Set a
///   timer." of "… for ten minutes" — and never ends early; nor does an
///   intent with no frame (a custom tree's).
///
/// No doubt ends at the pause, one after the longer pause, two or more
/// wait the hang-over.
pub fn early_end(text: &str, classified: Option<(String, f32)>) -> EarlyEnd {
    match doubts(text, classified.as_ref()) {
        Some(0) => EarlyEnd::AtPause,
        Some(1) => EarlyEnd::AfterLongerPause,
        _ => EarlyEnd::Never,
    }
}

/// Whether a device command that waits the hang-over
/// ([`early_end`] says `Never`) is still whole enough that its answer is
/// worth preparing during the hang-over: its frame fits, nothing seems
/// missing at its end, and the classifier is at least
/// [`LONGER_PAUSE_MIN_CONFIDENCE`] sure, with two or three doubts
/// ("batteries on my shopping list", whisper's hearing of "Put <pause>
/// batteries on my shopping list": no full stop, todo_add 0.89, a weak
/// fit). Preparing acts on nothing (a dry run, then the first piece
/// synthesised, [`crate::agent::predict`]); when the utterance ends with
/// these words, the answer's first audio is ready at the hang-over
/// instead of one synthesis later, and when it goes on, the preparation
/// is dropped as soon as something else is said.
pub fn answer_worth_preparing(text: &str, classified: Option<&(String, f32)>) -> bool {
    doubts(text, classified).is_some_and(|n| n >= 2)
}

/// How many of [`early_end`]'s three signs are in doubt for `text`, or
/// `None` when it can't end early at all (an open ending, not a device
/// intent, below [`LONGER_PAUSE_MIN_CONFIDENCE`], a frame that does not
/// fit, or the weakly fitting head of a longer command).
fn doubts(text: &str, classified: Option<&(String, f32)>) -> Option<usize> {
    let how = ending(text);
    if how == Ending::Open {
        return None;
    }
    let (intent, confidence) = classified?;
    let confidence = *confidence;
    if becomes_a_reminder(text) {
        return None;
    }
    let unfinished = usize::from(how != Ending::Finished);
    let sure = !intent.is_empty()
        && intent != "other"
        && intent != "none"
        && confidence >= LONGER_PAUSE_MIN_CONFIDENCE;
    if sure {
        let fit = crate::tree::fit::fit(intent, text);
        if fit.fits() && (fit.is_strong() || !may_go_on(intent, text)) {
            let doubted = confidence < EARLY_MIN_CONFIDENCE && !frame_vouches(text, intent);
            return Some(unfinished + usize::from(doubted) + usize::from(!fit.is_strong()));
        }
    }
    if whole_by_frame_alone(text) {
        return Some(unfinished + usize::from(!frame_vouches(text, intent)));
    }
    calendar_question(text).then_some(unfinished + 1)
}

/// Whether the words' one strong frame speaks for them where the
/// classifier is less sure (below [`EARLY_MIN_CONFIDENCE`]), so its doubt
/// is not counted: the frame is the intent the classifier names
/// ("Set the volume to 80." volume_up at 0.73, "Clear my shopping list."
/// todo_delete at 0.81), or the classifier calls the words other speech
/// because its examples lack the phrasing the frame was written for ("How
/// many days until Christmas?" other at 0.73, "Convert 5 miles to
/// kilometers." other at 0.47). Two signs that agree, or one that knows
/// and one that does not, are not a doubt; a classifier naming another
/// device intent is ("The shopping list." todo_add at 0.47 against
/// todo_list's frame). Never for a command that grows at its end
/// ([`GROWS_AT_THE_END`]: "Remind me in ten minutes." is the head of
/// "… to check the oven", and the classifier's doubt is what keeps it
/// waiting) nor for what the speaker told it to remember: "What do you
/// know." and "What have you stored." are as often the head of "… about
/// me" or "… about volcanoes", and a memory lookup may be the language
/// model's question.
fn frame_vouches(text: &str, classified: &str) -> bool {
    let Some(rule) = crate::tree::fit::strong_rule(text, &|_| true) else {
        return false;
    };
    let same =
        rule == classified || (rule.starts_with("volume_") && classified.starts_with("volume_"));
    let rejected = classified.is_empty() || classified == "other" || classified == "none";
    (same || rejected) && !GROWS_AT_THE_END.contains(&rule.as_str()) && !rule.starts_with("memory_")
}

/// Whether `text` asks what is on the calendar, or whether the speaker
/// is free, on a day it names ("What's on my calendar tomorrow?", "Do I
/// have anything on Friday?", "Am I free on Monday afternoon?"): the
/// calendar's own frame (`tree::fit_calendar`), which the tree reads
/// ahead of the classifier — the classifier has no calendar intent, so
/// it always doubts them, and they waited the whole hang-over. A
/// question without a day may still get one ("What's on my calendar
/// <pause> for Friday?") and waits; one that changes the calendar is the
/// head of a longer order and waits too.
fn calendar_question(text: &str) -> bool {
    use crate::tree::fit_calendar::{frame, CalendarFrame};
    let now = chrono::Local::now().naive_local();
    match frame(text, now) {
        // A span is named in the words that made the frame.
        Some(CalendarFrame::Span { .. }) => true,
        Some(CalendarFrame::Query { .. } | CalendarFrame::Free { .. }) => {
            let tidied = crate::tree::fit::tidy(text).to_lowercase();
            matches!(crate::nlu::when::day_in(&tidied, now.date()), Ok(Some(_)))
        }
        _ => false,
    }
}

/// Whether the words alone make a whole device command when the
/// classifier is unsure of them, calls them other speech, or names an
/// intent they do not fit: exactly one intent's frame fits them strongly
/// (`tree::fit::strong_rule`, what the tree's gate then takes: "What's
/// the time in Tokyo?", time_now at 0.50; "How many days until
/// Christmas?", other at 0.84; "Cross apples off my shopping list.",
/// todo_complete at 0.34). A command that takes more at its end (a
/// reminder's time, a list, what to remember) must also not read as the
/// head of a longer one ([`may_go_on`]: "Remind me to call." fits
/// strongly, and so does "… at five pm"); a question of the time, the
/// date, a sum or the volume does not go on that way. The classifier's
/// doubt counts as one of [`early_end`]'s doubts, so such a command ends
/// after the longer pause at the earliest.
fn whole_by_frame_alone(text: &str) -> bool {
    let Some(intent) = crate::tree::fit::strong_rule(text, &|_| true) else {
        return false;
    };
    // "What's my blood type?" fits the memory lookup strongly, but no
    // memory may answer it, and then it is the language model's question.
    if crate::tree::fit::memory_subject(text).is_some() {
        return false;
    }
    !(GROWS_AT_THE_END.contains(&intent.as_str()) && may_go_on(&intent, text))
}

/// Whether `text` is a to-do said as a reminder with no time yet ("Remind
/// me to buy stamps.", a whole to-do by its frame) that a time would make
/// a reminder ("… at noon tomorrow"): cut at a pause, it added a to-do and
/// lost the reminder the speaker was still saying. It waits the
/// hang-over, as a head of a longer command does.
fn becomes_a_reminder(text: &str) -> bool {
    const TIMES: &[&str] = &[" at five pm", " tomorrow at nine", " in ten minutes"];
    let head = text.trim().trim_end_matches(['.', '?', '!']);
    crate::tree::fit::fit("todo_add", text).fits()
        && TIMES
            .iter()
            .any(|rest| crate::tree::fit::fit("reminder_set", &format!("{head}{rest}")).is_strong())
}

/// Whether words that may not end early ([`early_end`] and
/// [`open_question_end`] say `Never`) still read whole, so the utterance
/// ends at `audio.vad.settle_ms` of pause instead of the full hang-over:
/// a device command whose answer is worth preparing (two or three
/// doubts: no full stop, a classifier less sure, a weak fit — often
/// words misheard, "batteries on my shopping list" for "Put <pause>
/// batteries on my shopping list"), or a request for words of three
/// words or more whisper wrote without its mark ("who wrote the
/// odyssey"). Never two words or fewer of other speech ("Boss." for
/// "Pause."), words that trail off or stop on one that needs more
/// ([`ending`], [`NEEDS_MORE`], a noun's possessive), or the head of a
/// longer command: a to-do that a time would make a reminder, a command
/// one of [`MISSING_ARGUMENTS`] would complete ("Set a timer.", "Remind
/// me to call."), or an order that has not said its message yet ("Tell
/// Bob."). Those are where a speaker pauses inside a sentence, and they
/// keep the hang-over.
pub fn settles(text: &str, classified: Option<&(String, f32)>) -> bool {
    if ending(text) == Ending::Open {
        return false;
    }
    if becomes_a_reminder(text) || awaits_its_message(text) {
        return false;
    }
    let named = classified
        .map(|(intent, _)| intent.as_str())
        .filter(|intent| !GROWS_AT_THE_END.contains(intent));
    let head = GROWS_AT_THE_END
        .iter()
        .copied()
        .chain(named)
        .any(|intent| may_go_on(intent, text));
    let w = words(text);
    let asks_more = w
        .last()
        .is_none_or(|last| NEEDS_MORE.contains(&last.as_str()) || possessive(last));
    !head
        && !asks_more
        && w.len() >= 2
        && (answer_worth_preparing(text, classified) || whole_request_for_words(text))
}

/// Whether `word` is a noun's possessive ("today's", "my sister's"),
/// which the noun it owns follows; not "it's", "what's", "that's".
fn possessive(word: &str) -> bool {
    const NOT: &[&str] = &[
        "it's", "what's", "that's", "there's", "here's", "who's", "where's", "how's", "he's",
        "she's", "let's", "when's", "why's",
    ];
    (word.ends_with("'s") || word.ends_with("s'")) && !NOT.contains(&word)
}

/// Whether `text` is a request for words ([`is_question`],
/// [`asks_for_words`]) of three words or more: "who wrote the odyssey".
fn whole_request_for_words(text: &str) -> bool {
    let t = text.trim();
    words(t).len() >= 3 && (is_question(t) || asks_for_words(t))
}

/// Last words after which a request is rarely over, beyond [`DANGLING`]:
/// question words, auxiliaries and subjects that a verb follows,
/// operators that a number follows, a phrasal verb's "rid", fillers —
/// "Do you know what.", "What is six divided.", "Get rid." are a
/// speaker's hesitation, not a request.
const NEEDS_MORE: &[&str] = &[
    "rid",
    "between",
    "among",
    "per",
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "how",
    "when",
    "where",
    "why",
    "whether",
    "do",
    "does",
    "did",
    "can",
    "could",
    "will",
    "would",
    "should",
    "shall",
    "may",
    "might",
    "must",
    "have",
    "has",
    "had",
    "am",
    "were",
    "i",
    "you",
    "we",
    "they",
    "plus",
    "minus",
    "times",
    "divided",
    "multiplied",
    "over",
    "power",
    "percent",
    "um",
    "uh",
    "so",
    "okay",
    "well",
    "hey",
];

/// Whether `text` is an order to pass words on that has not said them:
/// "Tell Bob.", "Send a message to Anna.", "Ask Sam." — at most four
/// words after the verb, none of them "that" or "saying". Words for the
/// speaker ("Tell me a joke.") are a request, not a message.
fn awaits_its_message(text: &str) -> bool {
    const PASS_ON: &[&str] = &["tell", "ask", "send", "text", "message", "email", "write"];
    let w = words(text);
    let Some(first) = w.first() else {
        return false;
    };
    let to_the_speaker = w.get(1).is_some_and(|x| x == "me" || x == "us");
    PASS_ON.contains(&first.as_str())
        && !to_the_speaker
        && w.len() <= 5
        && !w.iter().any(|x| x == "that" || x == "saying" || x == "say")
}

/// Device intents whose command often goes on past a strong fit.
const GROWS_AT_THE_END: &[&str] = &[
    "todo_add",
    "memory_remember",
    "memory_forget",
    "timer_set",
    "timer_extend",
    "alarm_set",
    "reminder_set",
];

/// Whether a finished sentence that is not a device command may end
/// before the full hang-over: a request for words — a question (a
/// question mark or a question word first, [`is_question`]) or an order to
/// tell, explain or describe something to the speaker — that the device
/// classifier confidently called other speech ends at
/// `audio.vad.question_ms` (600 ms) of pause, not the 700 ms hang-over.
/// Its language-model request began at the look, so its answer is nearly
/// ready by then: the first audio came 100–180 ms after an end at 500 ms
/// with a 300 ms model (issue 21), so ending sooner than 600 buys little
/// and cuts more pauses ("who painted?" was a whole question at the look
/// of "Who painted <pause 450> the Mona Lisa?"). Only a request for
/// words: one cut before its end ("What's the weather?" + "… in Paris"
/// after a long pause) costs a wrong answer, never an action; any other
/// statement or order ("Send Bob an email.", "Tell Bob I'm late.") keeps
/// the hang-over, as does a sentence the classifier is unsure of.
pub fn open_question_end(text: &str, classified: &Option<(String, f32)>) -> EarlyEnd {
    let is_other = classified.as_ref().is_some_and(|(intent, confidence)| {
        (intent == "other" || intent == "none") && *confidence >= QUESTION_MIN_OTHER_CONFIDENCE
    });
    let t = text.trim();
    if is_other && ending(t) == Ending::Finished && (is_question(t) || asks_for_words(t)) {
        EarlyEnd::AfterQuestionPause
    } else {
        EarlyEnd::Never
    }
}

/// Whether the language-model request for `text` may begin at the look: a
/// finished sentence, or a request for words whisper wrote without its
/// mark — a question ("who wrote the Odyssey"; it drops the mark often,
/// and a question word is the sign it left) or an order to tell or
/// explain ("explain how a rainbow forms"). A trailing comma counts as
/// no mark here ("who wrote the Odyssey,": whisper writes one where the
/// voice stays up); a sentence trailing off ("…") or stopping on a word
/// that needs more does not begin. Only the request begins; the
/// utterance still ends at the hang-over unless [`open_question_end`]
/// says otherwise, and speech that goes on cancels the request.
fn may_ask_for_an_answer(text: &str) -> bool {
    let t = text.trim();
    let t = t.strip_suffix(',').unwrap_or(t).trim_end();
    if t.ends_with(',') {
        return false;
    }
    match ending(t) {
        Ending::Finished => true,
        Ending::Unmarked => is_question(t) || asks_for_words(t),
        Ending::Open => false,
    }
}

/// Whether `text` is a question: whisper wrote a question mark, or it
/// opens with a question word (whisper often ends "Who wrote Pride and
/// Prejudice" with a full stop).
fn is_question(text: &str) -> bool {
    let first = words(text).into_iter().next().unwrap_or_default();
    // "what's", "who'd": the question word before the apostrophe.
    let word = first.split('\'').next().unwrap_or("");
    text.ends_with('?') || QUESTION_WORDS.contains(&word)
}

/// Words a question opens with.
const QUESTION_WORDS: &[&str] = &["how", "what", "why", "when", "where", "who", "which"];

/// Orders whose answer is only words for the speaker.
const WORD_REQUESTS: &[&str] = &["tell me ", "explain ", "describe ", "define "];

/// Whether `text` is an order to tell, explain, describe or define
/// something: at least three words, and not ending on a question word
/// (or "whether"), which the rest of the sentence usually follows ("Tell
/// me how." is the start of "… to boil an egg").
fn asks_for_words(text: &str) -> bool {
    let words = words(text);
    let starts = WORD_REQUESTS
        .iter()
        .any(|p| text.to_lowercase().starts_with(p));
    let open_end = words
        .last()
        .is_some_and(|w| QUESTION_WORDS.contains(&w.as_str()) || w == "whether");
    starts && words.len() >= 3 && !open_end
}

/// The words of `text`, lower-case, without the punctuation around them
/// (apostrophes kept, typographic ones made straight).
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .replace('’', "'")
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
                .to_string()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// What a device command most often leaves to the end: the list it goes
/// on, how long, when.
const MISSING_ARGUMENTS: &[&str] = &[
    " to my shopping list",
    " to my list",
    " for five minutes",
    " in ten minutes",
    " at five pm",
    " tomorrow at nine",
];

/// Whether a weakly fitting `text` is the head of a longer command: one
/// of [`MISSING_ARGUMENTS`] added after it makes the frame fit strongly.
fn may_go_on(intent: &str, text: &str) -> bool {
    let head = text.trim().trim_end_matches(['.', '?', '!']);
    MISSING_ARGUMENTS
        .iter()
        .any(|rest| crate::tree::fit::fit(intent, &format!("{head}{rest}")).is_strong())
}

/// Whether the device classifier took the words for a device command at
/// all (any confidence): those are answered by the tree's actions, not by
/// a request begun early.
fn is_device_command(classified: &Option<(String, f32)>) -> bool {
    classified
        .as_ref()
        .is_some_and(|(intent, _)| !intent.is_empty() && intent != "other" && intent != "none")
}

/// What a look does with the words it read: when it may end the
/// utterance, and which answers it begins making meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookPlan {
    /// When the utterance may end (before the settle step is considered).
    pub end: EarlyEnd,
    /// Find the tree's answer by a dry run and synthesise its first
    /// sentence ([`crate::agent::predict::answer_without_acting`]).
    pub device_answer: bool,
    /// Begin the language model's request
    /// ([`crate::agent::predict::begin_llm_answer`]).
    pub model_answer: bool,
}

/// The plan for `request` at a look whose [`early_end`] is `early`.
///
/// A command that may end early, or one with two or three doubts
/// ([`answer_worth_preparing`]), prepares its answer.
/// A request for words begins the model's request, whatever the
/// classifier names: words it doubts ("Boss." for "Pause.", todo_complete
/// at 0.29) are the model's when the tree's own walk says so, and that
/// walk, not the classifier, decides whether a request begins. A device
/// command that keeps the whole hang-over (it may go on, or whisper's
/// words read oddly: "Remind me too, what are the plants tomorrow?")
/// still has its answer made meanwhile, so that when the pause does
/// complete the answer is ready instead of ~100 ms of synthesis after it;
/// the dry run decides whether there is one. With both, at most one finds
/// anything: the walk either acts or asks the model.
pub fn look_plan(request: &str, classified: &Option<(String, f32)>, early: EarlyEnd) -> LookPlan {
    if early != EarlyEnd::Never || answer_worth_preparing(request, classified.as_ref()) {
        return LookPlan {
            end: early,
            device_answer: true,
            model_answer: false,
        };
    }
    let device_answer = is_device_command(classified) && ending(request) != Ending::Open;
    if may_ask_for_an_answer(request) {
        LookPlan {
            end: open_question_end(request, classified),
            device_answer,
            model_answer: true,
        }
    } else {
        LookPlan {
            end: EarlyEnd::Never,
            device_answer,
            model_answer: false,
        }
    }
}

/// Voiced audio after an earlier look at the same speech beyond which
/// what followed was words, not a breath or a click (webrtc-vad's count;
/// the STT's check for words lost after a pause uses the same measure).
const WORDS_AFTER_MS: u64 = crate::stt::gaps::MIN_WORDS_MS;

/// Whether `snapshot` holds words after stream position `at_ms` (the
/// speech end an earlier look was made at).
fn words_came_after(snapshot: &Utterance, at_ms: u64) -> bool {
    let from =
        at_ms.saturating_sub(snapshot.start_ms) * u64::from(crate::audio::SAMPLE_RATE) / 1000;
    let after = snapshot.samples.get(from as usize..).unwrap_or_default();
    crate::audio::vad::voiced_ms(after, 2) > WORDS_AFTER_MS
}

/// The speculative transcript an utterance carries, if any.
pub fn carried(utterance: &Utterance) -> Option<Transcript> {
    utterance
        .speculation
        .as_ref()
        .and_then(|s| s.0.downcast_ref::<Transcript>())
        .cloned()
}

impl super::VoiceLoop {
    /// A pause inside speech: transcribe what was said so far, keep it for
    /// the utterance, and end the utterance now if it is a complete
    /// command and nobody spoke meanwhile. Returns the utterance when it
    /// ended here.
    pub(super) fn on_pause(
        &mut self,
        snapshot: Utterance,
        pending: &mut std::collections::VecDeque<VadEvent>,
        conversation: Option<i64>,
    ) -> Option<Utterance> {
        // Speech went on after a pause whose words began a request: that
        // request is not this utterance's, and must not compute beside the
        // look's transcription.
        self.services.speculation.abandon();
        tracing::debug!(
            speech_end_ms = snapshot.speech_end_ms,
            heard_ms = self.endpointer.position_ms(),
            "looking at a pause"
        );
        // Noise webrtc-vad let through is not looked at either.
        if !self.holds_speech(&snapshot) {
            return None;
        }
        // The look starts before the tail an ended utterance keeps
        // (`tail_ms`) has been heard; silence stands in for the rest, so
        // the transcript is the one the whole utterance would get.
        let mut audio = snapshot.to_f32();
        let tail = (snapshot.speech_end_ms + u64::from(self.vad.tail_ms))
            .saturating_sub(snapshot.start_ms)
            * u64::from(crate::audio::SAMPLE_RATE)
            / 1000;
        if (audio.len() as u64) < tail {
            audio.resize(tail as usize, 0.0);
        }
        // What the last look at this utterance heard: a second look whose
        // unsure first reading is the same words (a breath or a click
        // after a finished sentence broke its pause) keeps that reading
        // instead of decoding again with the beams. Not when words came
        // after that look: whisper's greedy reading of "Why do we have
        // <pause> leap years?" was "Why do we have?" again, and keeping it
        // lost the words.
        let heard_before = self
            .endpointer
            .looked_at()
            .filter(|(at, _)| !words_came_after(&snapshot, *at))
            .and_then(|(_, s)| s.0.downcast_ref::<Transcript>())
            .map(|t| t.text.trim().to_string());
        let transcript = match self.look_while_listening(
            audio,
            heard_before,
            conversation,
            snapshot.speech_end_ms,
            pending,
        )? {
            Ok(t) => t,
            Err(e) => {
                tracing::debug!("speculative transcript failed: {e}");
                return None;
            }
        };
        if transcript.no_speech || transcript.text.trim().is_empty() {
            return None;
        }
        let request = self.request_words(&transcript.text);
        let classified = self
            .services
            .tree
            .as_ref()
            .and_then(|tree| tree.shadow_classify(&request));
        let early = early_end(&request, classified.clone());
        // Words that cannot end a sentence: the speaker is looking for
        // the next one, so this pause may outlast the hang-over.
        if stops_on_a_word_that_needs_more(&request) {
            self.endpointer
                .hold(snapshot.speech_end_ms, self.vad.open_hold_ms);
        }
        tracing::debug!(
            text = %transcript.text,
            intent = ?classified,
            ?early,
            stt_ms = transcript.timings.stt_ms,
            "speculative transcript at a pause"
        );
        self.endpointer.attach(
            snapshot.speech_end_ms,
            Speculation(Arc::new(transcript) as Arc<dyn std::any::Any + Send + Sync>),
        );
        // Read before the request moves into its preparation.
        let settled = self.vad.settle_ms > 0
            && self.vad.settle_ms < self.vad.hangover_ms
            && settles(&request, classified.as_ref());
        let plan = look_plan(&request, &classified, early);
        if plan.device_answer {
            self.prepare_answer(conversation, request.clone());
        }
        if plan.model_answer {
            self.prepare_llm_answer(conversation, request);
        }
        let early = plan.end;
        let pause_ms = match early {
            EarlyEnd::Never if settled => self.vad.settle_ms,
            EarlyEnd::Never => return None,
            EarlyEnd::AtPause => self.vad.early_ms,
            EarlyEnd::AfterLongerPause => {
                self.vad.early_ms + self.vad.hangover_ms.saturating_sub(self.vad.early_ms) / 2
            }
            EarlyEnd::AfterQuestionPause if self.vad.question_ms > 0 => self.vad.question_ms,
            EarlyEnd::AfterQuestionPause => return None,
        };
        self.end_when_paused(snapshot.speech_end_ms, pause_ms, pending)
    }

    /// A complete command is ending: find its answer by a dry run that
    /// acts on nothing (an action that would change something says what
    /// it would) and have the speaker synthesise its first piece while the
    /// pause completes ([`crate::agent::predict`]). On a thread of its own, so the pause is
    /// read on meanwhile; the turn's own answer is still what is spoken.
    fn prepare_answer(&self, conversation: Option<i64>, request: String) {
        let services = self.services.clone();
        let speaker = self.speaker.clone();
        // Once the turn has said anything, the prediction is too late (and
        // may have seen the turn's own change: a timer already cancelled).
        let said_before = speaker.said_count();
        let spawned = std::thread::Builder::new()
            .name("predict".into())
            .spawn(move || {
                let answer =
                    crate::agent::predict::answer_without_acting(&services, conversation, &request);
                if let Some(first) = answer.as_deref().and_then(TurnSpeech::first_piece) {
                    tracing::debug!(request = %request, "preparing the answer: {first}");
                    speaker.prepare(&first, said_before);
                }
            });
        if let Err(e) = spawned {
            tracing::debug!("could not start the answer's prediction: {e}");
        }
    }

    /// What a look's draft and its answer need, apart from the loop (the
    /// look runs on a thread of its own: [`Self::look_while_listening`]).
    fn drafter(&self) -> Drafter {
        Drafter {
            services: self.services.clone(),
            speaker: self.speaker.clone(),
            wake_words: self
                .wake
                .as_ref()
                .map(|gate| gate.words().to_vec())
                .unwrap_or_default(),
        }
    }

    /// Heard words as the turn will see them: without the wake word.
    fn request_words(&self, heard: &str) -> String {
        self.drafter().request_words(heard)
    }

    /// See [`Drafter::prepare_llm_answer`].
    fn prepare_llm_answer(&self, conversation: Option<i64>, request: String) {
        self.drafter().prepare_llm_answer(conversation, request);
    }

    /// Transcribe a look's `audio` on a thread of its own while the
    /// microphone is read on. Speech that goes on drops the look at once
    /// (whisper stops after its encoder, or at its next token): a look at a gap inside a
    /// sentence neither holds the listening loop nor delays the look at
    /// the next pause, so looks can start at a short pause (`look_ms`).
    /// The audio read meanwhile is endpointed as usual (its events go to
    /// `pending`), up to a pause that could end the utterance by itself:
    /// the rest waits in the source, as it did when the look held the
    /// loop. `None`: the look was dropped (speech went on, or shutdown).
    fn look_while_listening(
        &mut self,
        audio: Vec<f32>,
        heard_before: Option<String>,
        conversation: Option<i64>,
        speech_end_ms: u64,
        pending: &mut std::collections::VecDeque<VadEvent>,
    ) -> Option<Result<Transcript, crate::stt::SttError>> {
        let cancel = CancelToken::new();
        let (done_tx, done) = crossbeam_channel::bounded(1);
        let stt = self.stt.clone();
        let drafter = self.drafter();
        let look_cancel = cancel.clone();
        let look = std::thread::Builder::new()
            .name("look".into())
            .spawn(move || {
                let transcribed = stt.transcribe_drafting(
                    &audio,
                    &mut |words| {
                        if heard_before.as_deref() == Some(words.trim()) {
                            return true;
                        }
                        if !look_cancel.is_cancelled() {
                            drafter.on_draft(conversation, words);
                        }
                        false
                    },
                    &look_cancel,
                );
                let _ = done_tx.send(transcribed);
            });
        let look = match look {
            Ok(look) => look,
            Err(e) => {
                tracing::debug!("could not start the look at a pause: {e}");
                return None;
            }
        };
        // Not joined: whisper.cpp stops only after its encoder (~50–100 ms
        // here, four times that on a Pi), and the loop must read on. The
        // next look's pass waits for the engine, and a look cancelled
        // before it gets the engine never runs; a draft is not acted on
        // once cancelled.
        let drop_look = |look: std::thread::JoinHandle<()>| {
            cancel.cancel();
            drop(look);
        };
        let read_until = self.vad.hangover_ms.saturating_sub(2 * self.vad.frame_ms);
        let mut buf = vec![0i16; (crate::audio::SAMPLE_RATE * self.vad.frame_ms / 1000) as usize];
        let mut reading = true;
        loop {
            if let Ok(transcribed) = done.try_recv() {
                let _ = look.join();
                return Some(transcribed);
            }
            if self.shutdown.is_cancelled() {
                drop_look(look);
                return None;
            }
            match self.endpointer.pause_ms(speech_end_ms) {
                None => {
                    drop_look(look);
                    tracing::debug!("speech went on: the look at the pause was dropped");
                    return None;
                }
                Some(ms) if ms >= read_until => reading = false,
                Some(_) => {}
            }
            let read = if reading {
                self.source.read(&mut buf, std::time::Duration::ZERO)
            } else {
                Ok(0)
            };
            match read {
                Ok(0) => {
                    if let Ok(transcribed) = done.recv_timeout(LOOK_POLL) {
                        let _ = look.join();
                        return Some(transcribed);
                    }
                }
                Ok(n) => pending.extend(self.endpointer.push(&buf[..n])),
                // The main loop meets the error (or the end) on its next read.
                Err(_) => reading = false,
            }
        }
    }

    /// A complete command was heard up to `speech_end_ms`: read on until
    /// the pause after it reaches `pause_ms` and end the utterance there,
    /// unless speech resumes first (then `None`, and listening goes on
    /// with the events read meanwhile in `pending`). The transcript was
    /// made while the pause grew (`look_ms`), so usually little is left to
    /// wait.
    fn end_when_paused(
        &mut self,
        speech_end_ms: u64,
        pause_ms: u32,
        pending: &mut std::collections::VecDeque<VadEvent>,
    ) -> Option<Utterance> {
        let early = pause_ms;
        let mut buf = vec![0i16; 1600];
        // Read everything already captured first, then 20 ms at a time.
        let mut wait = std::time::Duration::ZERO;
        let deadline = Instant::now() + std::time::Duration::from_millis(u64::from(early) + 500);
        loop {
            match self.endpointer.pause_ms(speech_end_ms) {
                None => return None,
                Some(ms) if ms >= early => break,
                Some(_) => {}
            }
            if Instant::now() > deadline || self.shutdown.is_cancelled() {
                return None;
            }
            match self.source.read(&mut buf, wait) {
                Ok(0) => wait = std::time::Duration::from_millis(20),
                Ok(n) => {
                    for event in self.endpointer.push(&buf[..n]) {
                        match event {
                            // The full hang-over passed meanwhile.
                            VadEvent::Utterance(u) => return Some(u),
                            other => pending.push_back(other),
                        }
                    }
                }
                // The main loop meets the error (or the end) on its next read.
                Err(_) => return None,
            }
        }
        let ended = self.endpointer.end_now(speech_end_ms);
        if ended.is_some() {
            tracing::info!("a complete command at a pause: answering now");
        }
        ended
    }
}

/// A look's draft and the model's answer begun on it, apart from the
/// loop's audio (cheap clones of what they use).
struct Drafter {
    services: crate::agent::Services,
    speaker: Arc<Speaker>,
    /// The wake word's words (`[wake]`), taken off what was heard.
    wake_words: Vec<String>,
}

impl Drafter {
    /// Heard words as the turn will see them: without the wake word.
    fn request_words(&self, heard: &str) -> String {
        if self.wake_words.is_empty() {
            heard.to_string()
        } else {
            crate::wake::strip::strip(heard, &self.wake_words)
        }
    }

    /// Whisper's first reading of a look it was unsure of, while the beams
    /// decode the audio again (~250 ms on this machine): a request for
    /// words begins its language-model request on it now, as it would on
    /// the final words, so the answer's first sentence is not that much
    /// later. Most unsure readings are the final words; when the final
    /// words differ, their own request replaces this one. Not when the
    /// model answering computes on this device: it would slow the beams.
    fn on_draft(&self, conversation: Option<i64>, words: &str) {
        use crate::llm::ChatModel;
        let request = self.request_words(words);
        if request.trim().is_empty()
            || !may_ask_for_an_answer(&request)
            || self.services.speculation.computes_here()
        {
            return;
        }
        let classified = self
            .services
            .tree
            .as_ref()
            .and_then(|tree| tree.shadow_classify(&request));
        if is_device_command(&classified) {
            return;
        }
        tracing::debug!(draft = %request, "beginning the answer's request on the look's first reading");
        self.prepare_llm_answer(conversation, request);
    }

    /// A finished sentence (or an unmarked question, [`may_ask_for_an_answer`])
    /// that is not a device command keeps the long
    /// hang-over (it may go on), but the language-model request its turn
    /// will send can start now ([`crate::agent::predict::begin_llm_answer`]),
    /// and the first sentence of the answer be synthesised as it arrives.
    /// If the speech goes on, the turn sends its own request and the early
    /// one is cancelled; nothing is said or done before the turn.
    fn prepare_llm_answer(&self, conversation: Option<i64>, request: String) {
        let services = self.services.clone();
        let speaker = self.speaker.clone();
        let said_before = speaker.said_count();
        // Heard now: once the turn has begun, it is too late to begin.
        let epoch = services.speculation.epoch();
        let spawned = std::thread::Builder::new()
            .name("predict-llm".into())
            .spawn(move || {
                if !crate::agent::predict::begin_llm_answer(
                    &services,
                    conversation,
                    &request,
                    epoch,
                ) {
                    return;
                }
                tracing::debug!(request = %request, "began the answer's request early");
                let wait = std::time::Duration::from_secs(5);
                if let Some(first) =
                    crate::agent::predict::first_llm_piece(&services, &request, wait)
                {
                    tracing::debug!(request = %request, "preparing the answer: {first}");
                    speaker.prepare(&first, said_before);
                }
            });
        if let Err(e) = spawned {
            tracing::debug!("could not start the answer's request early: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads_finished(text: &str) -> bool {
        ending(text) == Ending::Finished
    }

    /// The plan of a look that read `text`, classified as `intent`.
    fn plan(text: &str, intent: &str, confidence: f32) -> LookPlan {
        let classified = Some((intent.to_string(), confidence));
        look_plan(text, &classified, early_end(text, classified.clone()))
    }

    #[test]
    fn words_after_an_earlier_look_are_told_from_silence() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/speech/jfk.wav");
        let (speech, _) = crate::audio::wav::read_16k_mono(&path, None).unwrap();
        let speech = crate::audio::to_i16(&speech);
        let second = |n: f32| (n * 16_000.0) as usize;
        // 1 s of words, a 500 ms pause (the earlier look was made at its
        // start, 1000 ms), then more words or only silence.
        let snapshot = |after: &[i16]| {
            let mut samples = speech[second(0.5)..second(1.5)].to_vec();
            samples.extend(vec![0i16; second(0.5)]);
            samples.extend_from_slice(after);
            Utterance {
                samples,
                start_ms: 0,
                speech_start_ms: 0,
                speech_end_ms: 0,
                reason: crate::audio::vad::EndReason::Early,
                decided_at: Instant::now(),
                speculation: None,
            }
        };
        assert!(words_came_after(
            &snapshot(&speech[second(2.0)..second(3.0)]),
            1000
        ));
        assert!(!words_came_after(&snapshot(&vec![0i16; second(0.3)]), 1000));
        // Whatever came before the look is not counted.
        assert!(!words_came_after(&snapshot(&[]), 1000));
        assert!(words_came_after(&snapshot(&[]), 0));
    }

    #[test]
    fn a_device_command_s_answer_is_made_whichever_pause_ends_it() {
        // A complete command: ends at the pause, its answer made.
        let timer = plan("Set a timer for 5 minutes.", "timer_set", 0.99);
        assert_eq!(timer.end, EarlyEnd::AtPause);
        assert!(timer.device_answer && !timer.model_answer);
        // Words that keep the whole hang-over still have their answer
        // made: a to-do that a time would make a reminder, and whisper's
        // odd reading of a reminder (the model's request begins too; the
        // tree's walk takes one of them).
        let stamps = plan("Remind me to buy stamps.", "todo_add", 0.83);
        assert_eq!(stamps.end, EarlyEnd::Never);
        assert!(stamps.device_answer, "{stamps:?}");
        let plants = plan(
            "Remind me too, what are the plants tomorrow?",
            "reminder_set",
            0.65,
        );
        assert_eq!(plants.end, EarlyEnd::Never);
        assert!(plants.device_answer && plants.model_answer, "{plants:?}");
        // Trailing off: nothing to make yet.
        let head = plan("Set a timer for", "timer_set", 0.98);
        assert_eq!(head.end, EarlyEnd::Never);
        assert!(!head.device_answer && !head.model_answer);
        // Other speech: the model's answer only.
        let sky = plan("Why is the sky blue?", "other", 0.99);
        assert!(!sky.device_answer && sky.model_answer);
        assert_eq!(sky.end, EarlyEnd::AfterQuestionPause);
    }

    /// Ends at the first pause ([`EarlyEnd::AtPause`]).
    fn is_complete_command(text: &str, classified: Option<(String, f32)>) -> bool {
        early_end(text, classified) == EarlyEnd::AtPause
    }

    #[test]
    fn a_sentence_stopped_half_way_is_not_finished() {
        for unfinished in [
            "Put batteries on my...",
            "Put batteries on my",
            "What time is it in?",
            "Set a timer for.",
            "Add milk and",
            "Remind me to,",
            "",
        ] {
            assert!(!reads_finished(unfinished), "{unfinished:?}");
        }
        for finished in [
            "What time is it?",
            "Set a timer for five minutes.",
            "Add batteries to my shopping list.",
            "Stop!",
            "Lower the volume.",
            "Turn up the volume.",
        ] {
            assert!(reads_finished(finished), "{finished:?}");
        }
        for half in [
            "Turn the volume.",
            "Set the volume.",
            "Can you make the volume.",
        ] {
            assert!(!reads_finished(half), "{half:?}");
        }
    }

    #[test]
    fn only_a_word_that_needs_more_holds_a_pause_past_the_hang_over() {
        for held in [
            "How hot is?",
            "How do birds?",
            "Add it to the",
            "Put it on my...",
            "Set a timer for,",
        ] {
            assert!(stops_on_a_word_that_needs_more(held), "{held:?}");
        }
        for not_held in [
            "who painted the Mona Lisa,",
            "Why is the sky blue...",
            "Set a timer for ten minutes.",
            "What time is it",
            "",
        ] {
            assert!(!stops_on_a_word_that_needs_more(not_held), "{not_held:?}");
        }
    }

    #[test]
    fn a_question_with_do_is_not_finished_before_its_verb() {
        for before_the_verb in [
            "How do birds?",
            "Why does the moon?",
            "What did you?",
            "Do you?",
            "How often do dogs?",
            "Where do my keys?",
            "How hot is?",
        ] {
            assert_eq!(ending(before_the_verb), Ending::Open, "{before_the_verb:?}");
        }
        for with_its_verb in [
            "Why do cats purr?",
            "What does it mean?",
            "What do bees make?",
            "How do you do?",
            "Where did the Romans live?",
            "How does a rainbow form?",
            "Do you know what time it is?",
            "Turn the volume down to do.",
            "What do I have on my calendar today?",
        ] {
            assert_eq!(ending(with_its_verb), Ending::Finished, "{with_its_verb:?}");
        }
    }

    #[test]
    fn only_a_confident_device_intent_is_a_complete_command() {
        let c = |i: &str, p: f32| Some((i.to_string(), p));
        assert!(is_complete_command(
            "What time is it?",
            c("time_now", 0.999)
        ));
        // Less sure, but its frame vouches for it: complete. A classifier
        // that names another intent is a doubt the frame does not lift.
        assert!(is_complete_command("What time is it?", c("time_now", 0.6)));
        assert!(!is_complete_command(
            "What time is it?",
            c("todo_list", 0.6)
        ));
        // Fragments measured at a pause: confident, wrong, and refused.
        assert!(!is_complete_command(
            "Turn the volume.",
            c("volume_up", 0.8935)
        ));
        assert!(!is_complete_command("Set a timer.", c("timer_set", 0.8954)));
        // Not after a longer pause either: an open word, a weak fit.
        assert_eq!(
            early_end("Turn the volume.", c("volume_up", 0.8935)),
            EarlyEnd::Never
        );
        assert_eq!(
            early_end("Set a timer.", c("timer_set", 0.8954)),
            EarlyEnd::Never
        );
        assert!(!is_complete_command(
            "Why is the sky blue?",
            c("other", 0.99)
        ));
        assert!(!is_complete_command("What time is it?", None));
        assert!(!is_complete_command(
            "What time is it in",
            c("time_now", 0.95)
        ));
    }

    #[test]
    fn a_command_that_may_go_on_is_not_complete_at_a_pause() {
        let c = |i: &str| Some((i.to_string(), 0.99));
        // Whole commands, as the shipped benchmark set says them.
        for (text, intent) in [
            ("What time is it?", "time_now"),
            ("Set a timer for five minutes.", "timer_set"),
            ("Add batteries to my shopping list.", "todo_add"),
            ("What's on my shopping list?", "todo_list"),
            ("Cancel the timer.", "timer_cancel"),
            ("What's the date today?", "date_today"),
            ("Turn the volume down.", "volume_down"),
        ] {
            assert!(is_complete_command(text, c(intent)), "{text}");
        }
        // Heads of longer commands that read as whole ones: a list, a
        // duration may follow.
        for (text, intent) in [
            ("Add batteries.", "todo_add"),
            ("Put batteries.", "todo_add"),
            ("I need milk.", "todo_add"),
            ("Set a timer.", "timer_set"),
        ] {
            assert!(!is_complete_command(text, c(intent)), "{text}");
        }
        // A custom tree's intent has no frame: never early.
        assert!(!is_complete_command("Feed the cat.", c("feed_cat")));
    }

    #[test]
    fn a_question_inside_a_sentence_may_end_it_on_is() {
        for text in [
            "Explain what a black hole is.",
            "Tell me who she was.",
            "What's the weather going to be?",
            "do you know where the station is",
        ] {
            assert_ne!(ending(text), Ending::Open, "{text}");
        }
        assert_eq!(ending("Explain what a black hole is."), Ending::Finished);
        for text in [
            "What time is",
            "Who is",
            "The weather is.",
            "What is the",
            "How much is",
        ] {
            assert_eq!(ending(text), Ending::Open, "{text}");
        }
    }

    #[test]
    fn a_whole_command_without_a_full_stop_ends_after_a_longer_pause() {
        let c = |i: &str| Some((i.to_string(), 0.99));
        // As whisper wrote two of the benchmark set's commands.
        for (text, intent) in [
            ("Cancel the timer", "timer_cancel"),
            ("Add batteries to my shopping list", "todo_add"),
            ("  What time is it  ", "time_now"),
        ] {
            assert_eq!(ending(text), Ending::Unmarked, "{text}");
            assert_eq!(
                early_end(text, c(intent)),
                EarlyEnd::AfterLongerPause,
                "{text}"
            );
            assert!(!is_complete_command(text, c(intent)), "{text}");
        }
        // With the stop: at the first pause.
        assert_eq!(
            early_end("Cancel the timer.", c("timer_cancel")),
            EarlyEnd::AtPause
        );
        // Less sure, its frame vouching for it: the missing stop is the
        // one doubt left.
        assert_eq!(
            early_end("Cancel the timer", Some(("timer_cancel".to_string(), 0.9))),
            EarlyEnd::AfterLongerPause
        );
        // Open endings, heads, doubt and other speech wait the hang-over
        // with or without a stop.
        for (text, classified) in [
            ("Put batteries on my", c("todo_add")),
            ("Add milk and", c("todo_add")),
            ("Add batteries", c("todo_add")),
            ("Set a timer", c("timer_set")),
            ("Set a timer for", c("timer_set")),
            ("Set a timer for five minutes,", c("timer_set")),
            ("Cancel the timer", Some(("todo_list".to_string(), 0.9))),
            ("Tell me about whales", c("other")),
            ("Cancel the timer", None),
            ("", c("time_now")),
        ] {
            assert_eq!(early_end(text, classified), EarlyEnd::Never, "{text:?}");
        }
    }

    #[test]
    fn only_a_finished_question_that_is_surely_not_a_command_ends_before_the_hang_over() {
        let c = |i: &str, p: f32| Some((i.to_string(), p));
        for (text, classified, expected) in [
            ("Who wrote Pride and Prejudice?", c("other", 0.99), true),
            ("  How do bees make honey?  ", c("none", 0.9), true),
            // A question whisper ended with a full stop.
            ("who wrote Pride and Prejudice.", c("other", 0.99), true),
            ("What's the capital of Peru.", c("other", 0.99), true),
            // Orders for words.
            ("Explain how a rainbow forms.", c("other", 0.99), true),
            ("Tell me a joke.", c("other", 0.95), true),
            ("Describe the water cycle.", c("other", 0.99), true),
            // Other statements and orders may go on to an action, and an
            // order for words may go on past a question word or be too
            // short to say what: the hang-over.
            ("Send Bob an email.", c("other", 0.99), false),
            ("Tell Bob I'm late.", c("other", 0.99), false),
            ("I like whales.", c("other", 0.99), false),
            ("Tell me how.", c("other", 0.99), false),
            ("Tell me why.", c("other", 0.99), false),
            ("Explain this.", c("other", 0.99), false),
            // Unfinished, unsure, unknown, or a device command.
            ("What is the capital of?", c("other", 0.99), false),
            ("Tell me about,", c("other", 0.99), false),
            ("Who wrote Pride and Prejudice?", c("other", 0.6), false),
            ("Who wrote Pride and Prejudice?", None, false),
            ("What time is it?", c("time_now", 0.99), false),
            ("", c("other", 0.99), false),
        ] {
            assert_eq!(
                open_question_end(text, &classified) == EarlyEnd::AfterQuestionPause,
                expected,
                "{text:?} {classified:?}"
            );
        }
    }

    #[test]
    fn a_question_without_its_mark_may_begin_its_answer_but_not_end_early() {
        assert!(may_ask_for_an_answer("who wrote the Odyssey"));
        assert!(may_ask_for_an_answer("Why is the sky blue?"));
        assert!(may_ask_for_an_answer("I like whales."));
        // An order for words without its full stop.
        assert!(may_ask_for_an_answer("explain how a rainbow forms"));
        assert!(may_ask_for_an_answer("Tell me a fact about owls"));
        assert!(!may_ask_for_an_answer("tell me how"));
        // A comma where the voice stayed up: no mark, not trailing off.
        assert!(may_ask_for_an_answer("who wrote the Odyssey,"));
        assert!(!may_ask_for_an_answer("what is the capital of,"));
        assert!(!may_ask_for_an_answer("who wrote the Odyssey..."));
        assert!(!may_ask_for_an_answer("I think,"));
        // Not a question, or trailing off: the request waits for the turn.
        assert!(!may_ask_for_an_answer("tell Bob I'm late"));
        assert!(!may_ask_for_an_answer("what is the capital of"));
        assert!(!may_ask_for_an_answer("who wrote the,"));
        let other = Some(("other".to_string(), 0.99));
        assert_eq!(
            open_question_end("who wrote the Odyssey", &other),
            EarlyEnd::Never
        );
    }

    #[test]
    fn a_doubtful_command_waits_the_hang_over_with_its_answer_prepared() {
        for (text, intent, confidence, expected) in [
            // No stop and a classifier naming another intent: two
            // doubts; and a weak fit: three.
            ("Read me my shopping list", "todo_add", 0.8, true),
            ("batteries on my shopping list", "todo_add", 0.89, true),
            ("and milk to the shopping list", "todo_add", 0.8, true),
            // One doubt ends early instead; none at the pause.
            ("Batteries on my shopping list.", "todo_add", 0.96, false),
            ("Add milk to the shopping list.", "todo_add", 0.99, false),
            // A head, an open end, other speech, too unsure.
            ("Set a timer", "timer_set", 0.9, false),
            ("Put batteries on my", "todo_add", 0.9, false),
            ("who wrote the odyssey", "other", 0.99, false),
            // Less sure, but the frame vouches for it: only the missing
            // stop is in doubt, so it ends after the longer pause.
            ("Read me my shopping list", "todo_list", 0.7, false),
            ("Read me my shopping list", "todo_list", 0.8, false),
        ] {
            let classified = (intent.to_string(), confidence);
            assert_eq!(
                answer_worth_preparing(text, Some(&classified)),
                expected,
                "{text:?} {intent} {confidence}"
            );
        }
        assert!(!answer_worth_preparing("Read me my shopping list", None));
    }

    #[test]
    fn words_that_read_whole_settle_before_the_hang_over_and_heads_do_not() {
        for (text, intent, confidence, expected) in [
            // Misheard, unmarked or doubted, but whole.
            ("batteries on my shopping list", "todo_add", 0.89, true),
            ("who wrote the odyssey", "other", 0.99, true),
            ("Why is the sky blue?", "other", 0.7, true),
            ("Read me my shopping list", "todo_add", 0.8, true),
            ("What's the capital of France", "other", 0.9, true),
            ("Tell me a joke", "other", 0.8, true),
            // Heads of longer commands and open endings wait.
            ("Set a timer.", "timer_set", 0.9, false),
            ("Set a timer", "other", 0.5, false),
            ("Add batteries.", "todo_add", 0.99, false),
            ("Put batteries.", "todo_add", 0.99, false),
            ("Remind me to call.", "reminder_set", 0.9, false),
            ("Remind me to buy stamps.", "todo_add", 0.9, false),
            ("Remind me in ten minutes.", "reminder_set", 0.6, false),
            ("Put batteries on my", "todo_add", 0.9, false),
            ("That's...", "other", 0.9, false),
            ("Tell me,", "other", 0.9, false),
            ("What time is", "time_now", 0.9, false),
            ("Tell Bob.", "other", 0.9, false),
            ("Ask Sam", "other", 0.9, false),
            ("Send a message to Anna", "other", 0.9, false),
            ("Remember that", "memory_remember", 0.9, false),
            ("", "other", 0.9, false),
            // A speaker's hesitation, or too little to tell.
            ("Do you know what.", "other", 0.9, false),
            ("What is six divided.", "calculate", 0.5, false),
            ("Could you tell.", "other", 0.9, false),
            ("Boss.", "other", 0.6, false),
            ("Get rid.", "todo_delete", 0.8, false),
            ("What's today's.", "date_today", 0.8, false),
        ] {
            let classified = (intent.to_string(), confidence);
            assert_eq!(
                settles(text, Some(&classified)),
                expected,
                "{text:?} {intent} {confidence}"
            );
        }
        assert!(settles("Why is the sky blue?", None));
        assert!(!settles("Set a timer.", None));
    }

    #[test]
    fn each_doubt_waits_longer_and_a_head_waits_the_hang_over() {
        use EarlyEnd::{AfterLongerPause, AtPause, Never};
        for (text, intent, confidence, expected) in [
            // Heard without its verb ("Add" lost, or heard as "and"): the
            // frame fits weakly, but nothing is missing at the end: one
            // doubt. A second (less sure, no stop) waits the hang-over.
            (
                "Batteries on my shopping list.",
                "todo_add",
                0.96,
                AfterLongerPause,
            ),
            (
                "and milk to the shopping list.",
                "todo_add",
                0.96,
                AfterLongerPause,
            ),
            ("and milk to the shopping list.", "todo_add", 0.9, Never),
            ("and milk to the shopping list", "todo_add", 0.96, Never),
            // Heads of longer commands wait the hang-over however sure.
            ("Add batteries.", "todo_add", 0.999, Never),
            ("Put batteries.", "todo_add", 0.999, Never),
            ("Set a timer.", "timer_set", 0.999, Never),
            // A whole command said another way, less sure, that its frame
            // vouches for (the same intent): at the pause, whatever the
            // confidence; without its stop, after the longer pause.
            ("Read me my shopping list.", "todo_list", 0.92, AtPause),
            ("Read me my shopping list.", "todo_list", 0.8, AtPause),
            ("Read me my shopping list.", "todo_list", 0.7, AtPause),
            (
                "Read me my shopping list",
                "todo_list",
                0.7,
                AfterLongerPause,
            ),
            // The classifier names another intent: its doubt stays.
            (
                "Read me my shopping list.",
                "todo_add",
                0.8,
                AfterLongerPause,
            ),
            ("Read me my shopping list", "todo_add", 0.8, Never),
            // A command that grows at its end keeps the classifier's doubt.
            ("Batteries on my shopping list.", "todo_add", 0.8, Never),
            (
                "Put milk on my shopping list.",
                "todo_add",
                0.9,
                AfterLongerPause,
            ),
        ] {
            assert_eq!(
                early_end(text, Some((intent.to_string(), confidence))),
                expected,
                "{text:?} {intent} {confidence}"
            );
        }
    }

    #[test]
    fn words_that_one_frame_fits_strongly_end_early_whatever_the_classifier_says() {
        use EarlyEnd::{AfterLongerPause, AtPause, Never};
        for (text, intent, confidence, expected) in [
            // Unsure, or other speech: the tree's gate takes the one
            // strong frame, and the frame vouches for the words.
            ("What's the time in Tokyo?", "time_now", 0.5, AtPause),
            ("How many days until Christmas?", "other", 0.84, AtPause),
            ("Convert 10 miles to kilometers.", "other", 0.54, AtPause),
            ("Set the volume to 5.", "volume_up", 0.6, AtPause),
            ("Set the volume to 5.", "volume_down", 0.6, AtPause),
            // A classifier naming another intent is a doubt.
            (
                "Take eggs off the shopping list.",
                "todo_complete",
                0.3,
                AfterLongerPause,
            ),
            // A missing stop is one doubt; with the classifier's, two.
            (
                "What's the time in Tokyo",
                "time_now",
                0.5,
                AfterLongerPause,
            ),
            ("What's the time in Tokyo", "todo_list", 0.5, Never),
            // Commands that grow at their end, and memories, keep the
            // classifier's doubt.
            ("Cancel the egg timer.", "other", 0.5, AtPause),
            ("What do you know about me.", "other", 0.6, AfterLongerPause),
            // No strong frame, or the head of a longer command: never.
            ("Remind me.", "reminder_set", 0.5, Never),
            ("Set a timer.", "other", 0.5, Never),
            ("Put batteries.", "other", 0.5, Never),
            ("I love this song.", "other", 0.99, Never),
            ("The volume is fine.", "volume_up", 0.6, Never),
            // A to-do said as a reminder: a time may follow.
            ("Remind me to buy stamps.", "todo_add", 0.99, Never),
            ("Remind me to buy stamps.", "reminder_set", 0.9, Never),
            ("Add stamps to my shopping list.", "todo_add", 0.99, AtPause),
        ] {
            assert_eq!(
                early_end(text, Some((intent.to_string(), confidence))),
                expected,
                "{text:?} {intent} {confidence}"
            );
        }
        // No classifier answer at all: nothing ends early.
        assert_eq!(early_end("What's the time in Tokyo?", None), Never);
    }

    #[test]
    fn a_calendar_question_that_names_its_day_ends_after_the_longer_pause() {
        use EarlyEnd::{AfterLongerPause, Never};
        for (text, expected) in [
            ("What's on my calendar tomorrow?", AfterLongerPause),
            ("Do I have anything on Friday?", AfterLongerPause),
            ("Am I free on Monday afternoon?", AfterLongerPause),
            // No day yet ("… for Friday" may follow), or it changes the
            // calendar (more may follow): the hang-over.
            ("What's on my calendar?", Never),
            ("Put lunch with Sam in my diary for Friday at one.", Never),
            ("What's on my calendar tomorrow", Never),
        ] {
            assert_eq!(
                early_end(text, Some(("todo_list".to_string(), 0.5))),
                expected,
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_last_word_that_is_its_verb_s_object_ends_the_sentence() {
        for text in [
            "Do you know what time it is?",
            "Tell me what day it was.",
            "Can you repeat that?",
            "I didn't catch that.",
            "What was that?",
            "What do you know about me?",
            "Set a timer for me.",
            "Do I have any alarms set?",
            "What's the volume?",
        ] {
            assert_eq!(ending(text), Ending::Finished, "{text}");
        }
        for text in [
            "Remember that.",
            "Remind me.",
            "Set.",
            "What time is.",
            "What day of the week is.",
            "Tell me.",
        ] {
            assert_eq!(ending(text), Ending::Open, "{text}");
        }
    }
}
