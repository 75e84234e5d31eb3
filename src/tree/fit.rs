//! The no-wrong-action gate: does the utterance fit the intent it was
//! classified as, and what are the intent's arguments?
//!
//! A voice device that acts wrongly is worse than one that says "I can't".
//! The classifier only says which intent an utterance is *near*; "strike
//! eggs off my list" is near `todo_add`, "never mind, forget it" near
//! `memory_forget`, "what time does the match start" near `time_now`. So
//! every device intent has a *frame* here: the shapes of sentence that
//! really ask for it, with the argument taken out ("X off my list" →
//! complete X). An intent runs only when the classifier is confident *and*
//! its frame fits ([`gate`]); a few frames are unambiguous on their own
//! (`Strength::Strong`: "add X to my shopping list", "what time is it",
//! spoken arithmetic) and decide even when the classifier is unsure or
//! picked a neighbour. Everything else goes to the router graph.
//!
//! The actions take their arguments from the same frames
//! ([`todo_item`], [`memory_fact`], …), so what the gate checked is what
//! runs. Frames are written against the words people use, not against the
//! example files; intents without a frame (a custom tree's) pass through
//! on the classifier alone.

use std::sync::OnceLock;

use regex::Regex;

pub(super) fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| crate::small_regex::new(&format!("(?i){pattern}")).expect("static regex"))
}

macro_rules! rx {
    ($pattern:expr) => {{
        static CELL: OnceLock<Regex> = OnceLock::new();
        re(&CELL, $pattern)
    }};
}

/// How sure a frame alone is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strength {
    /// The frame fits, but the words also have other readings: the
    /// classifier must agree.
    Weak,
    /// The frame alone is unambiguous ("add milk to my shopping list").
    Strong,
}

/// Whether an utterance fits an intent.
#[derive(Debug, Clone, PartialEq)]
pub enum Fit {
    /// It fits; `arg` is the intent's argument when it has one (the item,
    /// the fact, the memory to forget).
    Fits {
        strength: Strength,
        arg: Option<String>,
    },
    /// It does not; why, for the turn log.
    Unfit(&'static str),
    /// The gate has no frame for this intent (custom intents).
    NoFrame,
}

impl Fit {
    fn weak(arg: Option<String>) -> Fit {
        Fit::Fits {
            strength: Strength::Weak,
            arg,
        }
    }
    fn strong(arg: Option<String>) -> Fit {
        Fit::Fits {
            strength: Strength::Strong,
            arg,
        }
    }
    pub fn fits(&self) -> bool {
        matches!(self, Fit::Fits { .. })
    }
    pub fn is_strong(&self) -> bool {
        matches!(
            self,
            Fit::Fits {
                strength: Strength::Strong,
                ..
            }
        )
    }
    pub fn arg(&self) -> Option<&str> {
        match self {
            Fit::Fits { arg, .. } => arg.as_deref(),
            _ => None,
        }
    }
}

/// The intents that have a frame, in the order strong frames are tried.
pub const FRAMED: &[&str] = &[
    "calculate",
    "stop",
    "repeat",
    "pause",
    "resume",
    "volume_up",
    "volume_down",
    "time_now",
    "date_today",
    "todo_list",
    "todo_add",
    "todo_complete",
    "todo_delete",
    "memory_list",
    "memory_remember",
    "memory_forget",
    "timer_set",
    "alarm_set",
    "reminder_set",
    "timer_list",
    "timer_remaining",
    "timer_extend",
    "timer_cancel",
    "timer_cancel_all",
    "timer_snooze",
];

/// Labels that mean "none of the intents" (trained from out-of-scope
/// examples).
pub const REJECT: &[&str] = &["other", "oos"];

/// What the gate decided for one classify node.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The intent to take, or `None` for the node's fallback.
    pub intent: Option<String>,
    /// `classifier` (confident and fits), `rule` (a strong frame decided),
    /// or `none`.
    pub by: &'static str,
    /// Why, when the gate changed or refused the classifier's answer.
    pub note: Option<String>,
}

/// Decide a classify node: the classifier's `hit` (best intent and its
/// confidence) against `threshold`, checked by the intent's frame.
/// `allowed` says which intents the node can branch to (a strong frame
/// for any other intent is not considered).
pub fn gate(
    text: &str,
    hit: Option<(&str, f32)>,
    threshold: f32,
    allowed: &dyn Fn(&str) -> bool,
) -> Decision {
    // A reject class ("other", "oos") is the classifier saying "not a
    // device command"; an unambiguous frame still decides.
    let confident = hit
        .filter(|(i, c)| *c >= threshold && !REJECT.contains(i))
        .map(|(i, _)| i);
    if let Some(intent) = confident {
        match fit(intent, text) {
            Fit::Fits { .. } | Fit::NoFrame => {
                return Decision {
                    intent: Some(intent.to_string()),
                    by: "classifier",
                    note: None,
                }
            }
            Fit::Unfit(why) => {
                if let Some(rule) = strong_rule(text, allowed) {
                    return Decision {
                        note: Some(format!(
                            "intent '{intent}' does not fit ({why}); the words fit '{rule}'"
                        )),
                        intent: Some(rule),
                        by: "rule",
                    };
                }
                return Decision {
                    intent: None,
                    by: "none",
                    note: Some(format!("intent '{intent}' does not fit: {why}")),
                };
            }
        }
    }
    match strong_rule(text, allowed) {
        Some(rule) => Decision {
            note: Some(match hit {
                Some((i, c)) => format!("'{i}' at {c:.2} is unsure; the words fit '{rule}'"),
                None => format!("no classifier answer; the words fit '{rule}'"),
            }),
            intent: Some(rule),
            by: "rule",
        },
        None => Decision {
            intent: None,
            by: "none",
            note: None,
        },
    }
}

/// The one intent whose frame is strong for `text` (none when two are).
pub fn strong_rule(text: &str, allowed: &dyn Fn(&str) -> bool) -> Option<String> {
    let mut found: Option<&str> = None;
    for intent in FRAMED.iter().copied().filter(|i| allowed(i)) {
        if fit(intent, text).is_strong() {
            match found {
                // volume up/down both fit "set the volume to 30": same action.
                Some(f) if f.starts_with("volume_") && intent.starts_with("volume_") => {}
                Some(_) => return None,
                None => found = Some(intent),
            }
        }
    }
    found.map(str::to_string)
}

/// Longest utterance a frame looks at (longer is not a device command).
const MAX_WORDS: usize = 40;

/// The utterance tidied for matching: straight apostrophes, single
/// spaces, leading fillers and the wake word's "hey" and polite openers
/// ("can you", "please") and trailing courtesy removed. Case is kept (the
/// arguments are said back); patterns are case-insensitive.
pub fn tidy(text: &str) -> String {
    static LEAD: OnceLock<Regex> = OnceLock::new();
    static TRAIL: OnceLock<Regex> = OnceLock::new();
    let lead = LEAD.get_or_init(|| {
        crate::small_regex::new(r"(?i)^(?:(?:um+|uh+|er+m?|hmm+|ah+|oh|hey|hi|ok|okay|alright|all right|right|so|well|yeah|yes|now|then|and|earshot|listen|quick(?:ly)?|just|please|kindly|(?:can|could|would|will) you(?: please)?|can i ask you to|i(?:'d| would) like you to|i want you to|i need you to|go ahead and)\b[\s,.!:-]*)+")
            .expect("static regex")
    });
    let trail = TRAIL.get_or_init(|| {
        crate::small_regex::new(r"(?i)(?:[\s,.!-]+(?:please|thanks|thank you|thx|cheers|now|for me|mate|buddy|will you|would you|ok|okay|right now|earshot|again please))+[\s.!?]*$|[\s.!?]+$")
            .expect("static regex")
    });
    let t: String = text
        .chars()
        .map(|c| match c {
            '’' | '‘' | '`' => '\'',
            '“' | '”' => '"',
            c if c.is_whitespace() => ' ',
            c => c,
        })
        .collect();
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    let t = lead.replace(&t, "").to_string();
    // "excuse me, what time is it"; but "sorry, say that again" keeps its
    // "sorry" for the repeat frame.
    let t = match rx!(r"^(?:excuse me|sorry|pardon me)[\s,.!]+(.+)$").captures(&t) {
        Some(c)
            if !rx!(
                r"^(?:say|what did|what was|repeat|come again|i didn'?t|i missed|one more)"
            )
            .is_match(&c[1]) =>
        {
            c[1].to_string()
        }
        _ => t,
    };
    let t = trail.replace(&t, "");
    t.trim_matches(|c: char| c == ',' || c == ' ').to_string()
}

/// A question rather than a request ("how do I add…", "did I…", "is the
/// volume…"). Polite requests ("can you…") were removed by [`tidy`].
pub(super) fn is_question(t: &str) -> bool {
    rx!(r"^(?:how|why|what|what's|whats|when|where|who|whom|whose|which|did|does|do|is|isn't|are|aren't|was|were|has|have|had|should|shall|would|could|can|will|am|may|might|must)\b")
        .is_match(t)
        || t.ends_with('?') && !rx!(r"^(?:can|could|would|will) you\b").is_match(t)
}

/// "don't add…", "I haven't bought…", "never…".
pub(super) fn is_negated(t: &str) -> bool {
    rx!(r"\b(?:don't|dont|do not|doesn't|didn't|did not|never|not|haven't|have not|hasn't|won't|wouldn't|shouldn't|no longer|no need)\b")
        .is_match(t)
}

/// Only a pronoun or a placeholder: no argument at all.
pub(super) fn is_empty_arg(arg: &str) -> bool {
    let a = arg
        .trim()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    a.is_empty()
        || rx!(r"^(?:it|that|this|them|those|these|something|anything|stuff|things?|one|some|about it|about that|of it|everything|all|all of it|it all|the lot|whatever)$")
            .is_match(&a)
}

/// A time or date inside an argument: that is a reminder or an alarm (the
/// time issue's intents), not a plain to-do.
fn has_time(arg: &str) -> bool {
    super::fit_time::says_when(arg)
        || rx!(r"\b(?:at \d|at (?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|noon|midnight)\b|in (?:an?|\d+|one|two|three|four|five|six|seven|eight|nine|ten|fifteen|twenty|thirty|forty|fifty|sixty|ninety|half an?) (?:few )?(?:minutes?|mins?|hours?|seconds?|days?|weeks?)|tomorrow|tonight|this (?:morning|afternoon|evening)|(?:on|next|every) (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|week|month)|o'clock|\d{1,2}:\d{2}|\d+ ?(?:am|pm)\b|[ap]\.m\.)")
        .is_match(arg)
}

/// Words that mean taking something off a list.
fn has_removal(t: &str) -> bool {
    rx!(r"\b(?:off|remove|delete|erase|done|finished|bought|cross|tick|strike|scratch|completed?|rid)\b")
        .is_match(t)
}

const LIST_NOUN: &str = r"(?:(?:to[- ]?do|todo|shopping|grocery|groceries|task|tasks|reminders?|chores?|jobs)\s+)?(?:list|lists|todos|to-dos|to dos|tasks)";
const POSSESSIVE: &str = r"(?:my|the|our|me|this|your)";

/// The argument inside quotes, when the user quoted it ("add 'delete
/// everything' to my list"): taken as said, its words not read as a
/// command.
fn quoted(t: &str) -> Option<(String, String)> {
    let caps = rx!(r#"["']([^"']{1,200})["']"#).captures(t)?;
    let whole = caps.get(0)?;
    let inner = caps.get(1)?.as_str().trim().to_string();
    // An apostrophe inside a word ("mum's") is not a quote.
    let before = t[..whole.start()].chars().last();
    if before.is_some_and(char::is_alphanumeric) || inner.is_empty() {
        return None;
    }
    let rest = format!("{} ITEM {}", &t[..whole.start()], &t[whole.end()..]);
    Some((inner, rest.split_whitespace().collect::<Vec<_>>().join(" ")))
}

/// Does `text` fit `intent`? The arguments come out of the same match.
/// "Add" as whisper writes it when it hears the word alone, before a
/// pause or at the very start: "At oranges to the shopping list.", "At 5
/// more minutes to the timer.". For the intents whose frames begin with
/// "add", a sentence that opens so and adds to something ("… to my/the
/// …") is read with its verb; nothing else opens a sentence so. Likewise
/// "Put" heard as "But" at the start of a verbless "… on my/the … list".
pub fn lost_add(intent: &str, t: String) -> String {
    let adds_to = match intent {
        "todo_add" => true,
        // "at five minutes to the hour" is a time, not a timer's.
        "timer_extend" => rx!(r"(?i)\b(?:timer|alarm|reminder)\b").is_match(&t),
        _ => false,
    };
    if adds_to
        && rx!(r"(?i)^(?:at|ad)\s+\S.*\s(?:to|onto|on to)\s+(?:my|the|your|our)\s").is_match(&t)
    {
        return format!("add{}", &t[2..]);
    }
    // "Put" heard as "But" before what goes on a list: "But milk and
    // bread on the grocery list." A sentence that says something of the
    // list ("but milk is on the list already") has a verb of its own.
    if intent == "todo_add"
        && rx!(&format!(
            r"(?i)^but\s+\S.*\s(?:on|onto|on to)\s+{POSSESSIVE}\s+(?:\S+\s+)?{LIST_NOUN}\W*$"
        ))
        .is_match(&t)
        && !rx!(r"(?i)\b(?:is|are|was|were|be|been|isn't|aren't|wasn't|weren't|am|'s|'re|already|still|not|no|never|nothing|everything|it|that|this|they|he|she|we|i|you|have|has|had|do|does|did|got|think|guess|remember|forgot)\b").is_match(&t[3..])
    {
        return format!("put{}", &t[3..]);
    }
    t
}

pub fn fit(intent: &str, text: &str) -> Fit {
    // Intents without a frame ("yes", "no", a custom tree's) are the
    // classifier's alone.
    if !FRAMED.contains(&intent) {
        return Fit::NoFrame;
    }
    if text.split_whitespace().count() > MAX_WORDS {
        return Fit::Unfit("too long for a device command");
    }
    let t = lost_add(intent, tidy(text));
    if t.is_empty() || !t.chars().any(char::is_alphanumeric) {
        return Fit::Unfit("no words");
    }
    match intent {
        "calculate" => calculate(text),
        "stop" => stop(&t),
        "repeat" => repeat(&t),
        "pause" => pause(&t),
        "resume" => resume(&t),
        "volume_up" => volume(&t, true),
        "volume_down" => volume(&t, false),
        "time_now" => time_now(&t),
        "date_today" => date_today(&t),
        "todo_list" => todo_list(&t),
        "todo_add" => todo_add(&t),
        "todo_complete" => todo_complete(&t),
        "todo_delete" => todo_delete(&t),
        "memory_list" => memory_list(&t),
        "memory_remember" => memory_remember(&t),
        "memory_forget" => memory_forget(&t),
        i if super::fit_time::TIME_INTENTS.contains(&i) => super::fit_time::fit(i, &t),
        _ => Fit::NoFrame,
    }
}

/// The to-do item an utterance names for `intent` (`todo_add`,
/// `todo_complete`, `todo_delete`), when its frame fits.
pub fn todo_item(intent: &str, text: &str) -> Option<String> {
    fit(intent, text).arg().map(str::to_string)
}

/// The fact "remember that …" asks to keep, when the frame fits.
pub fn memory_fact(text: &str) -> Option<String> {
    fit("memory_remember", text).arg().map(str::to_string)
}

/// What "forget …" asks to forget, when the frame fits.
pub fn memory_target(text: &str) -> Option<String> {
    fit("memory_forget", text).arg().map(str::to_string)
}

fn calculate(text: &str) -> Fit {
    if crate::tree::spoken_math::to_expression(text).is_some()
        || crate::tree::units::conversion(text).is_some()
    {
        Fit::strong(None)
    } else {
        Fit::Unfit("not arithmetic")
    }
}

const STOP_WORDS: &str = r"(?:stop(?: it| that| talking| speaking| now| there| right there)?|cancel(?: that| it)?|enough(?: now)?|that'?s enough|that will do|that'll do|quiet|be quiet|keep quiet|shut up|shush|shh+|sh+|hush|silence|zip it|never ?mind|nevermind|forget it|forget about it|forget that|no|nope|abort|halt|okay stop|wait|hold on|be still|pipe down)";

fn stop(t: &str) -> Fit {
    let whole = rx!(&format!(r"^(?:{STOP_WORDS})(?:[\s,.!]+(?:{STOP_WORDS}))*$"));
    if whole.is_match(t) {
        // "no" and "wait" alone are answers more than commands.
        if rx!(r"^(?:no|nope|wait|hold on)$").is_match(t) {
            return Fit::weak(None);
        }
        return Fit::strong(None);
    }
    // Leave-taking ends the conversation as a stop word does.
    if rx!(r"^(?:(?:ok(?:ay)?|thanks|thank you|no)[,\s]+)?(?:that'?s all|that is all|that'?ll be all|that will be all|that'?s it for now|that'?s everything|bye|bye bye|goodbye|good bye|see you(?: later)?)$").is_match(t) {
        return Fit::strong(None);
    }
    if is_question(t) {
        return Fit::Unfit("a question, not a command");
    }
    // "snooze", "stop the alarm": the timers' words.
    if rx!(r"\b(?:snooze|timers?|alarms?|reminders?|countdown)\b").is_match(t) {
        return Fit::Unfit("about a timer, not the speech");
    }
    // "stop reminding me", "stop the timer": something else to stop.
    if rx!(r"^(?:stop|cancel)\b").is_match(t) && t.split_whitespace().count() > 1 {
        return Fit::Unfit("stops something other than the speech");
    }
    if t.split_whitespace().count() <= 4 && !is_negated(t) {
        return Fit::weak(None);
    }
    Fit::Unfit("too long for a stop word")
}

fn repeat(t: &str) -> Fit {
    if rx!(r"^(?:(?:sorry|pardon|excuse me),? )?(?:say (?:that|it|this) (?:again|once more)|say again|repeat(?: that| it| yourself| the last (?:thing|answer|bit|part|sentence))?(?: again)?|come again|pardon(?: me)?|sorry|excuse me|once more|one more time|again|what did you (?:just )?say|what was that|what'?s that|i didn'?t (?:catch|hear) (?:that|you|it)|i missed that|run that by me again|tell me (?:that|it) again|(?:could|can) you repeat(?: that)?)$").is_match(t) {
        return Fit::strong(None);
    }
    if rx!(r"\b(?:after me|how do you say|say it in|about|spell)\b").is_match(t) {
        return Fit::Unfit("asks something else");
    }
    if rx!(r"\b(?:again|repeat|say that|catch that|what you said|last thing)\b").is_match(t) {
        return Fit::weak(None);
    }
    Fit::Unfit("no words of repeating")
}

fn pause(t: &str) -> Fit {
    if rx!(r"^(?:(?:turn on |switch on |enable |activate |go into |put yourself in(?:to)? )?(?:do not disturb|don'?t disturb|dnd)(?: mode)?(?: on)?|pause(?: listening| yourself| for (?:a (?:bit|while|moment|minute)|now))?|stop listening(?: for (?:a (?:bit|while)|now))?|go to sleep|(?:have a |take a )(?:break|rest|nap)|mute(?: yourself| the mic(?:rophone)?)?|go quiet for (?:a (?:bit|while)|now)|give me (?:some )?(?:peace|quiet|peace and quiet|privacy)|leave me alone(?: for a (?:bit|while))?|privacy mode|sleep mode|sleep(?: now)?|don'?t listen)$").is_match(t) {
        return Fit::strong(None);
    }
    if is_question(t) {
        return Fit::Unfit("a question, not a command");
    }
    if acts_on_something_else(t) {
        return Fit::Unfit("pauses something other than me");
    }
    // "sleep" and "break" alone are everyday words ("sleep tight", "I
    // can't sleep", "break the eggs"); only their do-not-disturb phrases
    // count.
    if rx!(r"\b(?:pause|disturb|disturbing|mute|listening|quiet for|go (?:back )?to sleep|sleep mode|(?:take|have) a (?:break|rest|nap))\b").is_match(t) {
        return Fit::weak(None);
    }
    Fit::Unfit("no words of pausing")
}

/// "mute the TV", "pause my podcast", "resume the music", "unmute my
/// phone": the pausing verb has an object, and it is not the device (its
/// microphone, its listening, itself). Pausing or resuming *me* for them
/// would be a wrong action.
fn acts_on_something_else(t: &str) -> bool {
    let Some(c) = rx!(r"\b(?:pause|un-?pause|mute|un-?mute|resume|silence|stop)\s+(?:(?:the|my|this|that|our|his|her|their|your|a|an|all)\s+)?(?P<obj>[a-z][a-z'-]*)").captures(t) else {
        return false;
    };
    let obj = &c["obj"];
    !rx!(r"^(?:mic|mics|microphone|microphones|yourself|you|listening|for|now|please|it|everything|again|right|a|an|the|here|there|then|so|and|mode|it's|do|dnd|disturb|disturbing|bothering|interrupting)$").is_match(obj)
}

fn resume(t: &str) -> Fit {
    if rx!(r"\b(?:wake me|me up|get me up|alarm|timer|remind)\b").is_match(t) || has_time(t) {
        return Fit::Unfit("a wake-up time or a timer, not resuming");
    }
    if rx!(r"^(?:resume(?: listening)?|un-?pause|start listening(?: again)?|(?:you can|ok to) (?:listen|talk|speak) (?:again|now)|listen(?:ing)? again|i'?m back|come back|you'?re back|be back|wake up|back on|(?:turn|switch) off do not disturb|(?:turn|switch) do not disturb off|(?:disable|end|cancel|stop|exit|leave) do not disturb(?: mode)?|do not disturb off|dnd off|unmute(?: yourself)?|carry on listening)$").is_match(t) {
        return Fit::strong(None);
    }
    if is_question(t) {
        return Fit::Unfit("a question, not a command");
    }
    if acts_on_something_else(t) {
        return Fit::Unfit("resumes something other than me");
    }
    if rx!(r"\b(?:resume|unpause|un-pause|listening again|unmute|disturb)\b").is_match(t) {
        return Fit::weak(None);
    }
    Fit::Unfit("no words of resuming")
}

const AUDIO: &str = r"(?:it|that|this|you|yourself|the volume|volume|the sound|sound|the music|the audio|audio|the speaker|your voice|things)";

/// "max volume", "volume to maximum", "turn it all the way up": `Some(true)`
/// for the top of the scale, `Some(false)` for the bottom ("minimum
/// volume"), `None` for anything else.
pub fn volume_extreme(t: &str) -> Option<bool> {
    let t = t.to_lowercase();
    let t = t.trim_end_matches(['.', '!', '?']).trim();
    let top = r"max|maximum|full|the max|the maximum|full blast|the top|highest|the highest";
    let bottom = r"min|minimum|the min|the minimum|lowest|the lowest|the bottom";
    // "it" only with "to": "put it on top" is not about the volume.
    let said = |ends: &str| {
        rx_dyn(&format!(
            r"^(?:(?:{ends}) (?:volume|sound)|(?:set |turn |put |crank |make )?(?:the )?(?:volume|sound)(?: up| down)? (?:to |at |on )?(?:{ends})|volume (?:{ends})|(?:turn|crank|put|set) it (?:up |down )?to (?:{ends}))$"
        ))
        .is_match(t)
    };
    if said(top) || rx!(r"^(?:turn|crank) (?:it|the volume|the sound) all the way up$").is_match(t)
    {
        Some(true)
    } else if said(bottom)
        || rx!(r"^(?:turn|bring) (?:it|the volume|the sound) all the way down$").is_match(t)
    {
        Some(false)
    } else {
        None
    }
}

/// "What's the volume?": the level is said back, nothing changes.
pub fn asks_volume(t: &str) -> bool {
    rx!(r"^(?:(?:what'?s|what is|whats|tell me)\s+)?(?:the\s+)?(?:current\s+)?(?:volume|volume level|sound level)(?:\s+(?:set to|at|now|right now|level))?$|^how loud (?:are you|is it|is the volume)(?: set)?(?: now| right now)?$|^what volume (?:is it|are you|is this)(?: (?:set to|at|on))?(?: now)?$|^what (?:level|percent) is the volume(?: at| set to| on)?(?: now)?$")
        .is_match(t)
        && !rx!(r"^(?:the\s+)?volume$").is_match(t)
}

fn volume(t: &str, up: bool) -> Fit {
    // Asked, not changed: either direction's action says the level.
    if asks_volume(t) {
        return Fit::strong(None);
    }
    // "the volume is fine", "that volume is perfect": the level is right
    // as it is (the classifier heard "volume" and said up).
    if rx!(r"\b(?:is|'s|are|seems|sounds|looks)\s+(?:fine|good|ok|okay|alright|all right|perfect|right|great|just right|nice|better|spot on)\b").is_match(t)
        && !rx!(r"\b(?:too|not|enough|more|bit|little|up|down|louder|quieter)\b").is_match(t)
    {
        return Fit::Unfit("says the level is right");
    }
    // "the volume knob is broken": a fault told, not a level asked for.
    if rx!(r"\b(?:broken|broke|stuck|jammed|faulty|busted|not working|doesn'?t work|does not work|stopped working|isn'?t working|dead)\b").is_match(t) {
        return Fit::Unfit("tells of a fault, not a request");
    }
    // "i love this volume", "the kids turned the volume up": a liking or
    // what someone did, not a request.
    if rx!(r"^(?:i|we)\s+(?:love|like|prefer|enjoy|hate)\s+(?:this|the|that|my|your)\s+(?:volume|sound|level)\b").is_match(t)
        || rx!(r"^(?:the|my|our|his|her|their|someone|somebody|he|she|they|we|i|you)\b.*\b(?:turned|put|set|made|changed|cranked|pushed|left)\b.*\b(?:volume|sound|it)\b").is_match(t)
    {
        return Fit::Unfit("a statement, not a request");
    }
    // A level said: either direction's action sets it.
    if rx!(r"^(?:set |change |put |turn |make )?(?:the )?(?:volume|sound)(?: level)? (?:to|at|on) (?:level )?\S+(?: percent| per cent|%)?$|^volume (?:\d+|[a-z]+(?: [a-z]+)?)(?: percent)?$").is_match(t)
        && crate::nlu::numbers::find_numbers(t).len() == 1
    {
        return Fit::strong(None);
    }
    // "turn it up to 80", "bring the volume down to 3".
    if rx!(r"^(?:turn|crank|bump|bring|push|knock|take|put|set) (?:it|that|the volume|the sound|you) (?:up|down) to (?:level )?\S+(?: percent| per cent|%)?$").is_match(t)
        && crate::nlu::numbers::find_numbers(t).len() == 1
    {
        return Fit::strong(None);
    }
    // The ends of the scale go one way only.
    if let Some(top) = volume_extreme(t) {
        return if top == up {
            Fit::strong(None)
        } else {
            Fit::Unfit("the volume's other end")
        };
    }
    let (strong, weak, other) = if up {
        (
            format!(
                r"^(?:(?:turn|crank|bump|pump|bring|push) (?:{AUDIO} )?up(?: (?:{AUDIO}))?(?: (?:a (?:bit|little|touch|notch|tad)|some|more|loads))?|(?:a (?:bit|little|touch|tad) )?louder(?: (?:please|a bit|still))?|(?:make it |go |be |talk |speak )(?:a (?:bit|little) )?louder|volume up|up the volume|speak up|increase (?:the )?(?:volume|sound)|raise (?:the )?(?:volume|sound|your voice)|more volume|(?:i )?can'?t hear you|i cannot hear you|i can barely hear you|(?:(?:it'?s|you'?re) )?(?:too quiet|too soft|not loud enough))$"
            ),
            r"\b(?:louder|volume|speak up|turn (?:it|you|that) up|can't hear|cannot hear|barely hear|too quiet)\b",
            r"\b(?:quieter|softer|down|lower|too loud|decrease|reduce)\b",
        )
    } else {
        (
            format!(
                r"^(?:(?:turn|bring|knock|take) (?:{AUDIO} )?down(?: (?:{AUDIO}))?(?: (?:a (?:bit|little|touch|notch|tad)|some))?|(?:a (?:bit|little|touch|tad) )?(?:quieter|softer)(?: please)?|(?:make it |go |be |talk |speak )(?:a (?:bit|little) )?(?:quieter|softer|lower)|volume down|lower (?:the )?(?:volume|sound|your voice)|(?:decrease|reduce) (?:the )?(?:volume|sound)|less volume|not so loud|(?:it'?s|you'?re) (?:too loud|a bit loud|very loud|so loud)|too loud|keep it down)$"
            ),
            r"\b(?:quieter|softer|volume|turn (?:it|you|that) down|too loud|so loud|keep it down)\b",
            r"\b(?:louder|up|increase|raise|too quiet|can't hear)\b",
        )
    };
    if rx_dyn(&strong).is_match(t) {
        return Fit::strong(None);
    }
    if is_question(t) {
        return Fit::Unfit("a question, not a command");
    }
    if rx!(r"\bvolume of\b|\b(?:heat|heating|temperature|thermostat|lights?|tv|radio|oven|fan|brightness)\b").is_match(t) {
        return Fit::Unfit("about something other than my volume");
    }
    let weak_ok = crate::small_regex::new(&format!("(?i){weak}")).is_ok_and(|r| r.is_match(t));
    let other_way = crate::small_regex::new(&format!("(?i){other}")).is_ok_and(|r| r.is_match(t));
    if weak_ok && !other_way && !is_negated(t) {
        return Fit::weak(None);
    }
    Fit::Unfit("no words of the volume going that way")
}

/// A regex built from a pattern formatted at run time, cached by its
/// text. The patterns are this file's own (a bounded set), so each is
/// built once and kept for the process, as `rx!` keeps its own: a clone
/// per call, as before, gave every call fresh search caches.
fn rx_dyn(pattern: &str) -> &'static Regex {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static CACHE: OnceLock<Mutex<HashMap<String, &'static Regex>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = map.get(pattern) {
        return r;
    }
    let r: &'static Regex = Box::leak(Box::new(
        crate::small_regex::new(&format!("(?i){pattern}")).expect("static regex"),
    ));
    map.insert(pattern.to_string(), r);
    r
}

/// The place "what time is it in Tokyo?" asks about ("Tokyo"), from the
/// tidied `t`; `None` when it asks the time here. The clock action looks
/// the place's time zone up (`actions::clock::zone_of`); the on-device
/// model would invent a time.
pub fn asked_place(t: &str) -> Option<String> {
    let c = rx!(r"^(?:(?:what'?s|what is|whats|tell me|give me|do you know|check)\s+)?(?:the\s+)?(?:current\s+|local\s+)?time(?:\s+(?:is it|now|right now))?\s+(?:in|over in|out in)\s+(?P<p>[\w' .-]+?)(?:\s+(?:now|right now|at the moment|currently))?$|^(?:what|which) time is it(?: now| right now)? (?:in|over in|out in) (?P<q>[\w' .-]+?)(?: now| right now| at the moment)?$|^(?:do you know |can you tell me |could you tell me |tell me )?what time it is (?:in|over in|out in) (?P<r>[\w' .-]+?)(?: now| right now)?$")
        .captures(t)?;
    let place = c.name("p").or(c.name("q")).or(c.name("r"))?.as_str().trim();
    // "the time in ten minutes", "in the morning": not a place.
    if place.is_empty()
        || rx!(r"^(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+|half|quarter|a few|the morning|the evening|the afternoon|the night|here|this room|this house)\b").is_match(place)
    {
        return None;
    }
    Some(place.to_string())
}

/// The place "what's the date in Sydney?" / "what day is it in Tokyo?"
/// asks about, from the tidied `t`: its date may not be today's here.
pub fn asked_date_place(t: &str) -> Option<String> {
    let t = t.to_lowercase();
    let t = t.trim_end_matches(['?', '.', '!']).trim();
    let c = rx!(r"^(?:(?:what'?s|what is|whats|tell me)\s+)?(?:the\s+)?(?:date|day)(?:\s+(?:today|now|is it|it is))?\s+(?:in|over in|out in)\s+(?P<p>[\w' .-]+?)(?:\s+(?:today|now|right now|at the moment))?$|^(?:what|which) (?:day|date) is it(?: today| now)? (?:in|over in|out in) (?P<q>[\w' .-]+?)(?: today| now| right now)?$")
        .captures(t)?;
    let place = c.name("p").or(c.name("q"))?.as_str().trim();
    if place.is_empty()
        || rx!(r"^(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+|half|a few|the morning|the evening|the afternoon|here)\b").is_match(place)
    {
        return None;
    }
    Some(place.to_string())
}

/// The two places "what's the time difference between London and New
/// York?" compares, from the tidied `t`.
pub fn asked_time_difference(t: &str) -> Option<(String, String)> {
    let t = t.to_lowercase();
    let t = t.trim_end_matches(['?', '.', '!']).trim();
    let c = rx!(r"^(?:what'?s|what is|whats|tell me|how big is|how much is)?\s*(?:the\s+)?time (?:difference|gap) (?:between|from) (?P<a>[\w' .-]+?) (?:and|to) (?P<b>[\w' .-]+?)$|^how many hours (?:ahead|behind) (?:is|are) (?P<c>[\w' .-]+?) (?:of|from|than) (?P<d>[\w' .-]+?)$")
        .captures(t)?;
    let a = c.name("a").or(c.name("c"))?.as_str().trim();
    let b = c.name("b").or(c.name("d"))?.as_str().trim();
    (!a.is_empty() && !b.is_empty()).then(|| (a.to_string(), b.to_string()))
}

/// How far ahead "what time will it be in 20 minutes?" / "what's 5
/// minutes from now?" looks, from the tidied `t` (tidying drops a last
/// "now").
pub fn asked_time_ahead(t: &str) -> Option<std::time::Duration> {
    let t = t.to_lowercase();
    let t = t.trim_end_matches(['?', '.', '!']).trim();
    let c = rx!(r"^(?:what time will it be|what time is it going to be|what will the time be|what'?ll the time be|what time'?s it going to be) in (?P<a>.+)$|^(?:what(?:'s| is| will it be)|what time is it|what time will it be|what'?s the time) (?P<b>.+?) from(?: now)?$")
        .captures(t)?;
    let said = c.name("a").or(c.name("b"))?.as_str().trim();
    let found = crate::nlu::when::duration_in(said).ok().flatten()?;
    // The whole rest is the length ("in 20 minutes"), nothing after it.
    (found.span.start == 0 && said[found.span.end..].trim().is_empty()).then_some(found.value)
}

fn time_now(t: &str) -> Fit {
    if asked_place(t).is_some()
        || asked_time_ahead(t).is_some()
        || asked_time_difference(t).is_some()
    {
        return Fit::strong(None);
    }
    if rx!(r"^(?:(?:what'?s|what is|whats|tell me|give me|got|have you got|do you have|do you know|you got|check|what'?s the current|current)\s+)?(?:the\s+)?(?:current\s+|exact\s+)?time(?:\s+(?:is it|now|right now|please|at the moment|currently))?$|^(?:what|which) (?:time|hour) is it(?: now| right now| at the moment| currently| here)?$|^what time (?:do you make it|have we got|is it now)$|^(?:do you know|can you tell me|could you tell me|tell me) what time it is(?: now| right now)?$|^time check$|^how late is it$|^is it late$|^what o'?clock is it$").is_match(t) {
        return Fit::strong(None);
    }
    if rx!(r"\b(?:time|times) (?:in|at|for|of|zone|zones|difference|limit|table|tables|travel|machine|left|lapse|span|frame|line|out|off|to (?:go|leave|get|make|cook|boil|bake))\b|\btimes\b|\btimer\b|\bhow (?:much|long|many)\b|\bwhat time (?:does|do|did|will|would|should|shall|is the|are the|was|were|is my|is our)\b|\b(?:when|alarm|remind|schedule|calendar|meeting|match|game|film|movie|show|train|bus|flight|sunset|sunrise|open|close|closes|opens)\b|\btime (?:is it|now) in\b").is_match(t) {
        return Fit::Unfit("asks about another time, not the time now");
    }
    // "the time signature", "time complexity": another thing called time.
    if let Some(c) = rx!(r"\btime\s+(\w+)").captures(t) {
        if !matches!(
            &c[1],
            "is" | "now" | "please" | "right" | "it" | "check" | "currently" | "again"
        ) {
            return Fit::Unfit("about another kind of time");
        }
    }
    if rx!(r"\b(?:time|o'?clock|clock|what hour)\b").is_match(t) && is_question_or_short(t) {
        return Fit::weak(None);
    }
    Fit::Unfit("no words asking the time")
}

fn is_question_or_short(t: &str) -> bool {
    is_question(t) || t.split_whitespace().count() <= 5
}

/// The one day other than today that a question about the date asks
/// for ("what's the date tomorrow", "what day is it on the 25th", "what
/// was the date yesterday"), read from the tidied `t` as of `today`; `None`
/// when it asks about today, names no single day, or is about something
/// on that day (an event, a holiday, an appointment) rather than its date.
pub fn asked_day(t: &str, today: chrono::NaiveDate) -> Option<chrono::NaiveDate> {
    let t = t.to_lowercase();
    let t = t.trim_end_matches(['?', '.', '!']).trim();
    if !rx!(r"^(?:(?:what'?s|what is|whats|what was|what will be|tell me|give me|do you know|can you tell me)\s+)?(?:the\s+)?(?:what\s+)?(?:date|day(?: of the week)?)\b|^(?:what|which) (?:date|day(?: of the week)?) (?:is|was|will be|'s|falls on|is it)\b|^what'?s the date\b").is_match(t)
        || rx!(r"\b(?:birthday|anniversary|christmas|easter|holiday|weekend|until|till|since|ago|how many|how long|date of|dates|date night|dating|deadline|due|calendar|appointment|meeting|event|party|free|busy|open|closed?|moon|bins?|trash|garbage|every|each)\b").is_match(t)
    {
        return None;
    }
    // The time parser reads days ahead (for alarms and reminders), so
    // "yesterday" is read here.
    let said_day = crate::nlu::when::day_in(t, today)
        .ok()
        .flatten()
        // "two weeks from today" counts from today; it does not ask it.
        .filter(|_| !rx!(r"\bfrom today\b").is_match(t));
    let (day, span) = match said_day {
        Some(said) => match said.value.day {
            crate::nlu::when::DayRef::Date(d) => (d, said.span),
            crate::nlu::when::DayRef::Repeat(_) => return None,
        },
        None => match rx!(r"\byesterday\b").find(t) {
            Some(at) => (today.pred_opt()?, at.range()),
            None => days_ahead(t, today)?,
        },
    };
    // The day must be all the question names beyond asking: "what day is
    // the 25th", not "what day is the dentist on the 25th".
    let rest = format!("{} {}", &t[..span.start], &t[span.end..]);
    if !rx!(r"^(?:(?:what'?s|what is|whats|what was|what will be|tell me|give me|do you know|can you tell me|what|which|the|date|day|of|week|is|was|will|be|it|'s|on|falls|going to|gonna|for|please|from|today|now)\s*)*$").is_match(rest.trim()) {
        return None;
    }
    (day != today).then_some(day)
}

/// The day a whole number of days or weeks ahead names: "what's the date
/// in three weeks", "what day is it ten days from now" (the delay parser
/// reads "in …" and "… from now"; "… from today" is left to the caller's
/// check of the other words). A delay of hours is not a day.
fn days_ahead(
    t: &str,
    today: chrono::NaiveDate,
) -> Option<(chrono::NaiveDate, std::ops::Range<usize>)> {
    let said = crate::nlu::when::delay_in(t)
        .ok()
        .flatten()
        .or_else(|| crate::nlu::when::duration_in(t).ok().flatten())?;
    let secs = said.value.as_secs();
    if secs == 0 || secs % 86_400 != 0 {
        return None;
    }
    let day = today.checked_add_days(chrono::Days::new(secs / 86_400))?;
    Some((day, said.span))
}

/// What "how many days until Christmas?" counts to, from the tidied `t`
/// as of `today`: the day, and how to name it in the answer (a holiday's
/// name, or `None` to say the date). `None` when it counts to something
/// that is not a day ("until my flight", "until dinner").
pub fn counted_day(
    t: &str,
    today: chrono::NaiveDate,
) -> Option<(chrono::NaiveDate, Option<&'static str>)> {
    let t = t.to_lowercase();
    let t = t.trim_end_matches(['?', '.', '!']).trim();
    let c = rx!(r"^how many (?:more )?(?:days?|sleeps|weeks?)(?: (?:is it|are there|are left|left|to go|have i got|do i have|do we have|is that))? (?:until|till|til|'til|to|before) (?P<d>.+)$|^how (?:long|far) (?:is it |is there )?(?:until|till|til|'til) (?P<e>.+)$|^how (?:long|far) away is (?P<f>.+)$")
        .captures(t)?;
    let said = c.name("d").or(c.name("e")).or(c.name("f"))?.as_str().trim();
    let said = said.strip_prefix("it's ").unwrap_or(said);
    if let Some(found) = holiday(said, today) {
        return Some(found);
    }
    // "the weekend": the next Saturday (today on a weekend day).
    if rx!(r"^(?:the |this |next )?weekend$").is_match(said) {
        use chrono::Datelike;
        let days = match today.weekday() {
            chrono::Weekday::Sun => 0,
            d => (5 - i64::from(d.num_days_from_monday())).max(0),
        };
        return Some((today + chrono::Duration::days(days), Some("the weekend")));
    }
    // A date or a weekday, and nothing else: "the 25th", "Friday",
    // "March 3rd" (not "my birthday on Friday").
    // The time parser reads "on the 25th" as a day, not "the 25th" alone.
    let on = if said.starts_with("on ") {
        said.to_string()
    } else {
        format!("on {said}")
    };
    let found = crate::nlu::when::day_in(&on, today).ok().flatten()?;
    let crate::nlu::when::DayRef::Date(day) = found.value.day else {
        return None;
    };
    let rest = format!("{} {}", &on[..found.span.start], &on[found.span.end..]);
    rx!(r"^(?:on|the|next|this|coming|\s)*$")
        .is_match(rest.trim())
        .then_some((day, None))
}

/// The next day (today or later) of a fixed-date holiday `said` names
/// ("christmas", "new year's eve"), with its name as said back.
fn holiday(
    said: &str,
    today: chrono::NaiveDate,
) -> Option<(chrono::NaiveDate, Option<&'static str>)> {
    use chrono::Datelike;
    const HOLIDAYS: &[(&str, u32, u32, &str)] = &[
        (r"^christmas eve$", 12, 24, "Christmas Eve"),
        (r"^(?:christmas|xmas)(?: day)?$", 12, 25, "Christmas"),
        (r"^boxing day$", 12, 26, "Boxing Day"),
        (r"^new year'?s eve$", 12, 31, "New Year's Eve"),
        (
            r"^(?:the )?new year(?:'?s)?(?: day)?$",
            1,
            1,
            "New Year's Day",
        ),
        (r"^halloween$", 10, 31, "Halloween"),
        (
            r"^(?:valentine'?s|valentines)(?: day)?$",
            2,
            14,
            "Valentine's Day",
        ),
        (
            r"^(?:st\.?|saint) patrick'?s day$",
            3,
            17,
            "Saint Patrick's Day",
        ),
        (
            r"^(?:the )?(?:fourth|4th) of july$|^independence day$",
            7,
            4,
            "the Fourth of July",
        ),
    ];
    static COMPILED: OnceLock<Vec<Regex>> = OnceLock::new();
    let compiled = COMPILED.get_or_init(|| {
        HOLIDAYS
            .iter()
            .map(|(p, ..)| crate::small_regex::new(p).expect("static regex"))
            .collect()
    });
    for ((_, month, day, name), pattern) in HOLIDAYS.iter().zip(compiled) {
        if pattern.is_match(said) {
            let this_year = chrono::NaiveDate::from_ymd_opt(today.year(), *month, *day)?;
            let next = if this_year >= today {
                this_year
            } else {
                chrono::NaiveDate::from_ymd_opt(today.year() + 1, *month, *day)?
            };
            return Some((next, Some(name)));
        }
    }
    // Easter and the days fixed by it (the Western churches' date).
    const MOVABLE: &[(&str, i64, &str)] = &[
        (r"^easter(?: sunday| day)?$", 0, "Easter"),
        (r"^good friday$", -2, "Good Friday"),
        (r"^easter monday$", 1, "Easter Monday"),
    ];
    for (pattern, offset, name) in MOVABLE {
        if rx_dyn(pattern).is_match(said) {
            let on = |year: i32| easter(year).map(|d| d + chrono::Duration::days(*offset));
            let this_year = on(today.year())?;
            let next = if this_year >= today {
                this_year
            } else {
                on(today.year() + 1)?
            };
            return Some((next, Some(name)));
        }
    }
    None
}

/// Easter Sunday of `year` in the Gregorian calendar (the anonymous
/// Gregorian algorithm, Meeus/Jones/Butcher).
fn easter(year: i32) -> Option<chrono::NaiveDate> {
    let a = year % 19;
    let b = year / 100;
    let c = year % 100;
    let d = b / 4;
    let e = b % 4;
    let f = (b + 8) / 25;
    let g = (b - f + 1) / 3;
    let h = (19 * a + b - d - g + 15) % 30;
    let i = c / 4;
    let k = c % 4;
    let l = (32 + 2 * e + 2 * i - h - k) % 7;
    let m = (a + 11 * h + 22 * l) / 451;
    let month = (h + l - 7 * m + 114) / 31;
    let day = (h + l - 7 * m + 114) % 31 + 1;
    chrono::NaiveDate::from_ymd_opt(year, u32::try_from(month).ok()?, u32::try_from(day).ok()?)
}

/// The holiday "what day is Christmas this year?" / "when is Halloween"
/// asks the date of, from the tidied `t` as of `today`.
pub fn asked_holiday(
    t: &str,
    today: chrono::NaiveDate,
) -> Option<(chrono::NaiveDate, &'static str)> {
    let t = t.to_lowercase();
    let t = t.trim_end_matches(['?', '.', '!']).trim();
    let c = rx!(r"^(?:what day|what date|which day|what day of the week|when) (?:is|does|will|was|'s) (?P<h>.+?)(?: fall| be| land)?(?: on)?(?P<y> this year| next year)?$|^when'?s (?P<i>.+?)(?P<z> this year| next year)?$")
        .captures(t)?;
    let said = c.name("h").or(c.name("i"))?.as_str().trim();
    // "this year" is this year's, though it is past ("what date was
    // Easter this year?" in December); otherwise the next one.
    use chrono::Datelike;
    let from = match c.name("y").or(c.name("z")).map(|m| m.as_str().trim()) {
        Some("this year") => chrono::NaiveDate::from_ymd_opt(today.year(), 1, 1)?,
        Some(_) => chrono::NaiveDate::from_ymd_opt(today.year() + 1, 1, 1)?,
        None => today,
    };
    let (day, name) = holiday(said, from)?;
    Some((day, name?))
}

/// What "is it a weekday?" / "is it the weekend?" asks (today's date
/// answers it).
pub fn asks_weekday(t: &str) -> bool {
    rx!(r"^(?:is (?:it|today) (?:a |the )?(?:weekday|week day|weekend|work ?day|working day|school day|day off)|is it the weekend (?:yet|already))$").is_match(t)
}

/// What "what week of the year is it?" asks.
pub fn asks_week_number(t: &str) -> bool {
    rx!(r"^(?:what|which) week (?:of the year |number )?is (?:it|this)(?: now| today)?$|^what'?s the week number$|^what week number is (?:it|this)$").is_match(t)
}

fn date_today(t: &str) -> Fit {
    let today = chrono::Local::now().date_naive();
    if asked_day(t, today).is_some()
        || asked_date_place(t).is_some()
        || counted_day(t, today).is_some()
        || asked_holiday(t, today).is_some()
        || asks_weekday(t)
        || asks_week_number(t)
    {
        return Fit::strong(None);
    }
    // "is it the 6th today?": today's date answers it too.
    if rx!(r"^(?:is it|is today|it's|today is) the \d{1,2}(?:st|nd|rd|th)(?: of \w+)?(?: today)?$")
        .is_match(t)
    {
        return Fit::strong(None);
    }
    // "is it Monday today?", "is today Friday": today's date answers it.
    if rx!(r"^(?:is it|is today|it's|today is|is this) (?:a )?(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june|july|august|september|october|november|december)(?: today| already| yet)?$").is_match(t) {
        return Fit::strong(None);
    }
    if rx!(r"^(?:(?:what'?s|what is|whats|tell me|give me)\s+)?(?:the\s+)?(?:date|today'?s date|date today|day today|day of the week|day it is)(?:\s+(?:today|is it|please|is it today))?$|^(?:what|which) (?:day|date) is (?:it|today)(?: today)?$|^what'?s today$|^what is today$|^what day of the (?:week|month) is it(?: today)?$|^(?:what'?s|what is) the date today$|^(?:do you know|can you tell me|tell me) (?:what day|the date|what the date is|what day it is)(?: today)?$|^what'?s today'?s date$|^which day is it$|^what month is it$|^what year is it$").is_match(t) {
        return Fit::strong(None);
    }
    if rx!(r"\b(?:when|birthday|anniversary|christmas|easter|holiday|weekend|tomorrow|yesterday|next|last|ago|until|till|since|date of|dates|day after|day before|how many|how long|date night|dating|deadline|due|calendar|appointment|meeting|free|monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|june|july|august|september|october|november|december|\d+(?:st|nd|rd|th)|in (?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|\d+) (?:days?|weeks?|months?|years?))\b").is_match(t)
        || rx!(r"\bwhat (?:date|day) (?:is|was|will be|falls on) (\w+)")
            .captures(t)
            .is_some_and(|c| !matches!(&c[1], "it" | "today"))
    {
        return Fit::Unfit("asks about another day, not today");
    }
    if rx!(r"\b(?:date|day)\b.*\b(?:in|over in|out in) [a-z]").is_match(t) {
        return Fit::Unfit("a day somewhere else");
    }
    if rx!(r"\b(?:date|day|today|month|year)\b").is_match(t) && is_question_or_short(t) {
        return Fit::weak(None);
    }
    Fit::Unfit("no words asking the date")
}

fn todo_list(t: &str) -> Fit {
    let possessed =
        format!(r"\b{POSSESSIVE}\s+{LIST_NOUN}\b|\bmy (?:to[- ]?dos?|todos|tasks|chores|jobs)\b");
    if rx_dyn(&format!(r"^(?:(?:what'?s|what is|whats|what are|what'?s left|what is left|anything|is there anything|is anything|what else is|what have i got|what do i have|what have we got)\s+)?(?:still\s+)?(?:on|in)\s+{POSSESSIVE}\s+{LIST_NOUN}(?:\s+(?:today|now|for today|at the moment|so far))?$|^(?:read|show|tell|give|list|check|go through|run through|read out|read back|open)(?: me| us)?(?: out)?\s+(?:what'?s on\s+)?{POSSESSIVE}\s+{LIST_NOUN}(?: out)?$|^(?:my|the|our)\s+{LIST_NOUN}$|^what (?:do|have|must|should) (?:i|we) (?:have|got|need|gotta) to do(?: today| now)?$|^(?:do|have) (?:i|we) (?:have|got) (?:anything|something|much|stuff|things) (?:left )?to do(?: today| now)?$|^what'?s on my (?:plate|agenda)(?: today)?$|^what (?:do|must|should) (?:i|we) (?:need|have|got) to (?:buy|get|pick up|shop for)(?: today| this week)?$|^what are my (?:tasks|todos|to-dos|to dos|chores|jobs)(?: today| for today)?$")).is_match(t) {
        return Fit::strong(None);
    }
    // "is bread on my list?": the item asked about is the argument.
    if let Some(c) = rx_dyn(&format!(
        r"^(?:is|are) (?:there )?(?:any )?(?:some )?(?P<item>.+?) (?:already |still )?(?:on|in) {POSSESSIVE} {LIST_NOUN}(?: already| still| yet| at the moment| now)?$"
    ))
    .captures(t)
    {
        let item = c.name("item").map_or("", |m| m.as_str()).trim();
        if !is_empty_arg(item) && !rx!(r"^(?:it|that|this|everything|anything|something|nothing)\b").is_match(item) {
            return Fit::strong(Some(item.to_string()));
        }
    }
    if rx!(r"\b(?:list of|list the|list all|a list|guest list|playlist|wish ?list|waiting list|bucket list|reading list|watch ?list|mailing list|list price|top \d+|how (?:do|can|to))\b").is_match(t) {
        return Fit::Unfit("about another list");
    }
    if has_removal(t) || rx!(r"\b(?:add|put|stick|remove|delete|clear|empty|wipe)\b").is_match(t) {
        return Fit::Unfit("changes the list rather than reading it");
    }
    // A statement of what the list holds, not a question about it:
    // "that's on my to-do list already", "everything is on the list".
    if !is_question(t)
        && !rx!(r"\bwhat").is_match(t)
        && rx_dyn(&format!(
            r"(?:'s|\b(?:is|are|was|were))\s+(?:\w+\s+)?(?:on|in)\s+{POSSESSIVE}\s+{LIST_NOUN}\b"
        ))
        .is_match(t)
    {
        return Fit::Unfit("says what is on the list, not asking for it");
    }
    // "the list is getting long": something said of the list.
    if rx_dyn(&format!(
        r"^(?:my|the|our|this|that) {LIST_NOUN} (?:is|'s|are|was|has|have|keeps|looks|seems|gets|got|getting|needs|takes)\b"
    ))
    .is_match(t)
        && !is_question(t)
    {
        return Fit::Unfit("says something of the list, not asking for it");
    }
    // "but not on my shopping list": said of something, not asked.
    if !is_question(t) && is_negated(t) {
        return Fit::Unfit("a negated statement, not a request for the list");
    }
    if rx_dyn(&possessed).is_match(t) {
        return Fit::weak(None);
    }
    Fit::Unfit("does not name my to-do list")
}

/// The item between a lead and the list phrase, tidied.
fn clean_item(item: &str) -> String {
    let item = item
        .trim()
        .trim_matches(|c: char| c == ',' || c == ':' || c == '-');
    let item = rx!(r"^(?:an item (?:called|for)|a (?:task|todo|to-do|note|reminder|item) (?:to|for|called|saying)|the item|item)\s+")
        .replace(item, "");
    item.trim().to_string()
}

/// Whether a verbless list item's words tell of the list instead of
/// naming a thing: a verb of being, a pronoun, or "already", "everything"
/// and the like, none of which a thing to buy or do is made of.
fn tells_what_is_there(item: &str) -> bool {
    const NOT_AN_ITEM: &[&str] = &[
        "is",
        "are",
        "was",
        "were",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "be",
        "been",
        "it",
        "it's",
        "that",
        "that's",
        "this",
        "these",
        "those",
        "there",
        "there's",
        "what",
        "what's",
        "which",
        "i",
        "i'm",
        "we",
        "we're",
        "you",
        "he",
        "she",
        "they",
        "already",
        "also",
        "still",
        "everything",
        "nothing",
        "anything",
        "all",
        "else",
    ];
    item.split_whitespace().any(|w| {
        let w = w
            .trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
            .replace('’', "'")
            .to_lowercase();
        NOT_AN_ITEM.contains(&w.as_str())
    })
}

fn todo_add(t: &str) -> Fit {
    let (quoted_item, t_owned) = match quoted(t) {
        Some((inner, rest)) => (Some(inner), rest),
        None => (None, t.to_string()),
    };
    let t = t_owned.as_str();
    let item_of = |s: &str| match &quoted_item {
        Some(q) if s.contains("ITEM") => clean_item(&s.replace("ITEM", q)),
        _ => clean_item(s),
    };
    if is_question(t) {
        return Fit::Unfit("a question, not a request");
    }
    if is_negated(t) && !rx!(r"^(?:don'?t|do not) let me forget to\b").is_match(t) {
        return Fit::Unfit("negated");
    }
    let verbs = r"jot down|write down|note down|pencil in|add|put|stick|pop|throw|chuck|bung|jot|write|include|append|slap|whack|save";
    let strong = rx_dyn(&format!(
        r"^(?:{verbs})\s+(?P<item>.+?)\s+(?:to|on|onto|in|into|on to|down on|at the (?:end|bottom) of)\s+{POSSESSIVE}\s+{LIST_NOUN}$"
    ));
    let lead = rx!(
        r"^(?:remind me to|don'?t let me forget to|do not let me forget to|make a note to|make a note that i (?:need|have) to|i need to remember to|add (?:a |an )?(?:new )?(?:task|todo|to-do|to do|item|reminder|note) to|(?:new|add a|create a) (?:task|todo|to-do|to do|item)(?: to| called| for)?:?|(?:to[- ]?do|todo|task|shopping list|list)\s*:|(?:(?:my|the|our) )?(?:shopping |grocery |to[- ]?do |todo )?list,?\s+(?:add|put))\s+(?P<item>.+)$"
    );
    let weak_lead = rx_dyn(&format!(
        r"^(?:(?:{verbs})(?:\s+down)?|i (?:need|have|must|gotta|got) to|i'?ve got to|we need to|we have to|i need to buy|we need|i need|we'?re out of|we are out of|i'?m out of|we'?ve run out of|we have run out of|we'?re running low on|running low on|out of)\s+(?P<item>.+?)(?:\s+(?:to|on|onto)\s+{POSSESSIVE}\s+{LIST_NOUN})?$"
    ));
    let (item, strength) = if let Some(c) = strong.captures(t) {
        (item_of(&c["item"]), Strength::Strong)
    } else if let Some(c) = lead.captures(t) {
        (item_of(&c["item"]), Strength::Strong)
    } else if let Some(c) = weak_lead.captures(t) {
        let item = item_of(&c["item"]);
        // "add salt to the pasta water", "put the kettle on": adds to
        // something that is not my list.
        if quoted_item.is_none()
            && rx!(r"\b(?:to|into|in|onto|on) (?:the|a|an|my|your|his|her|our|this|that|some)\b|\s(?:on|off|up|down|away|out|back|in)$").is_match(&item)
        {
            return Fit::Unfit("adds to something other than my list");
        }
        (item, Strength::Weak)
    } else if let Some(c) = rx_dyn(&format!(
        r"^(?P<item>.+?)\s+(?:to|on|onto)\s+{POSSESSIVE}\s+{LIST_NOUN}$"
    ))
    .captures(t)
    {
        // No verb: whisper often lost it and wrote what it heard of it
        // ("at oranges to the shopping list" for "Add <pause> oranges…",
        // "that's batteries on my list" for "Put <pause> batteries…").
        // No item begins with those words, so they are not the item's
        // (a quoted item is kept as it was said).
        let item = item_of(&c["item"]);
        let item = if quoted_item.is_none() {
            rx!(r"(?i)^(?:at|ad|had|that'?s)\s+(?P<rest>\S.*)$")
                .replace(&item, "$rest")
                .to_string()
        } else {
            item
        };
        // Without a verb, words that say what the list holds are a
        // statement, not a request: "milk is on my list", "that's
        // already on my shopping list", "everything else on my list".
        if quoted_item.is_none() && tells_what_is_there(&item) {
            return Fit::Unfit("says what is on my list, not what to add");
        }
        (item, Strength::Weak)
    } else {
        return Fit::Unfit("no words of adding to my list");
    };
    if is_empty_arg(&item) {
        return Fit::Unfit("no item named");
    }
    let unquoted = quoted_item.is_none();
    if unquoted && has_removal(&item) {
        return Fit::Unfit("the words take something off, not add it");
    }
    if unquoted && rx!(r"\b(?:to|into|in|on|onto) (?:the|a|my|your|his|her|our|this|that) \w+$|\s(?:on|off|up|down|away|out|back|in)$|\b(?:list|lists)\b").is_match(&item) {
        return Fit::Unfit("adds to something other than my list");
    }
    if has_time(&item) {
        return Fit::Unfit("has a time: a reminder, not a to-do");
    }
    if unquoted && super::fit_time::is_timer_talk(&item) {
        return Fit::Unfit("a length or a timer: a timer's, not a to-do");
    }
    if item.split_whitespace().count() > 12 {
        return Fit::Unfit("too long for a to-do item");
    }
    // "add an event", "add a new contact": with no list named, a thing of
    // another app (the calendar, contacts, a playlist), not a to-do.
    if strength == Strength::Weak
        && rx!(r"^(?:a|an|the|my|another)\s+(?:new\s+)?(?:event|meeting|appointment|appt|entry|contact|user|account|comment|photo|picture|song|track|playlist|alarm|reminder|timer|tab|page|file|folder|friend|email|message|column|row|device|widget)s?(?:\s+(?:called|named|for)\b.*)?$").is_match(&item.to_lowercase())
    {
        return Fit::Unfit("a thing of another app, not a to-do");
    }
    Fit::Fits {
        strength,
        arg: Some(item),
    }
}

fn todo_complete(t: &str) -> Fit {
    if is_question(t) {
        return Fit::Unfit("a question, not a request");
    }
    if is_negated(t)
        || rx!(r"\b(?:yet|will|going to|gonna|tomorrow|later|need to|have to)\b").is_match(t)
    {
        return Fit::Unfit("not done yet");
    }
    let strong = rx_dyn(&format!(
        r"^(?:cross|tick|check|strike|knock|scratch|mark|score)\s+(?P<item>.+?)\s+off(?:\s+(?:of\s+)?{POSSESSIVE}\s+{LIST_NOUN})?$|^(?:cross|tick|check|strike|knock|scratch|mark)\s+off\s+(?P<item2>.+?)(?:\s+(?:on|from|in)\s+{POSSESSIVE}\s+{LIST_NOUN})?$|^mark\s+(?P<item3>.+?)\s+(?:as\s+)?(?:done|complete|completed|finished|bought|sorted|paid|booked|called|sent|fixed|cleaned|watered|posted)(?:\s+(?:on|in)\s+{POSSESSIVE}\s+{LIST_NOUN})?$|^(?P<item4>.+?)\s+off\s+{POSSESSIVE}\s+{LIST_NOUN}$"
    ));
    let weak = rx!(
        r"^(?:i(?:'ve| have)?|we(?:'ve| have)?|just)\s+(?:just\s+|already\s+|finally\s+)?(?:bought|got|picked up|done|finished|completed|did|called|rang|phoned|paid|booked|sorted|sorted out|watered|posted|sent|cleaned|fixed|fed|walked|emptied|taken out|took out|washed|returned|cancelled|renewed|grabbed)\s+(?P<item>.+)$|^(?P<item2>.+?)(?:\s+(?:is|are|was|were|has been|have been)|'s)\s+(?:all\s+|now\s+|finally\s+)?(?:done|finished|complete|completed|sorted|bought|dealt with|taken care of|handled|ticked off|crossed off)$|^(?:done|finished|completed)(?:\s+with)?\s+(?P<item3>.+)$|^(?:complete|finish|tick|check)\s+(?P<item4>.+)$"
    );
    let (c, strength) = if let Some(c) = strong.captures(t) {
        (c, Strength::Strong)
    } else if let Some(c) = weak.captures(t) {
        (c, Strength::Weak)
    } else {
        return Fit::Unfit("no words of finishing an item");
    };
    let raw = ["item", "item2", "item3", "item4"]
        .iter()
        .find_map(|n| c.name(n))
        .map(|m| m.as_str())
        .unwrap_or_default();
    // "take X off my list", "remove X off the list" are deletions.
    if rx!(r"^(?:take|remove|delete|get|erase|drop)\b").is_match(raw) {
        return Fit::Unfit("a deletion, not done");
    }
    let item =
        clean_item(&rx!(r"\s+(?:from|on|in)\s+(?:my|the|our)\s+(?:\w+\s+)?list$").replace(raw, ""));
    let item = rx!(r"^(?:the\s+)?(?:item|task|todo|to-do|one)\s+")
        .replace(&item, "")
        .to_string();
    // "the gas bill is paid off my list" → "the gas bill".
    let item = rx!(r"(?:\s+(?:is|are|was|were)|'s)\s+(?:now\s+)?\w+$")
        .replace(&item, "")
        .trim()
        .to_string();
    if is_empty_arg(&item) {
        return Fit::Unfit("no item named");
    }
    if item.split_whitespace().count() > 10 {
        return Fit::Unfit("too long for a to-do item");
    }
    // "We finished the bread", "the eggs are finished": a thing finished
    // has run out, and ticking it off would drop what is needed. Only a
    // task is finished by doing it ("I've finished the ironing").
    if strength == Strength::Weak && rx!(r"\bfinish(?:ed)?\b").is_match(t) && !task_like(&item) {
        return Fit::Unfit("a thing finished may have run out");
    }
    Fit::Fits {
        strength,
        arg: Some(item),
    }
}

/// Whether a to-do item names something to do rather than something to
/// get: it opens with a verb or is an "-ing" chore ("call mum", "the
/// ironing", "pay the gas bill").
fn task_like(item: &str) -> bool {
    let lower = item.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let first = words
        .iter()
        .find(|w| !matches!(**w, "the" | "my" | "our" | "a" | "an" | "that" | "this"))
        .copied()
        .unwrap_or("");
    first.len() > 4 && first.ends_with("ing")
        || rx!(r"^(?:laundry|dishes|homework|housework|chores?|report|essay|taxes|tax|paperwork|assignment|project|presentation|emails?|errands?|accounts|forms?|application|lawn|garden|tidy|tidying|puzzle)\b").is_match(first)
        || rx!(r"^(?:call|ring|phone|text|email|pay|book|water|feed|walk|fix|clean|wash|send|post|buy|pick|take|return|renew|write|read|do|make|cook|sort|tidy|mow|iron|hoover|vacuum|file|finish|check|cancel|order|print|sign|charge|change|put|get|bring|collect|drop|visit|see|meet|plan|prepare|pack|empty|clear|learn|practise|practice|study|submit|reply|answer|update|apply)\b").is_match(first)
}

/// The argument of a to-do deletion that names the whole list.
pub const WHOLE_LIST: &str = "everything";

fn todo_delete(t: &str) -> Fit {
    if is_question(t) {
        return Fit::Unfit("a question, not a request");
    }
    if is_negated(t) {
        return Fit::Unfit("negated");
    }
    let verbs = r"delete|remove|erase|drop|get rid of|scrap|bin|take|cut|ditch|lose|clear";
    // The whole list: "clear my shopping list", "delete everything from
    // my list". The action asks before it deletes.
    if rx_dyn(&format!(
        r"^(?:(?:clear|empty|wipe|reset|clean)(?: out| off)?\s+{POSSESSIVE}\s+{LIST_NOUN}(?:\s+out)?|(?:{verbs}|clear)\s+(?:everything|all(?: the)?(?: items)?|every item|all of it|it all)\s+(?:from|off|on|in|out of)\s+{POSSESSIVE}\s+{LIST_NOUN})(?:\s+(?:entirely|completely|altogether))?$"
    ))
    .is_match(t)
    {
        return Fit::strong(Some(WHOLE_LIST.to_string()));
    }
    let strong = rx_dyn(&format!(
        r"^(?:{verbs})\s+(?P<item>.+?)\s+(?:from|off|out of|off of)\s+{POSSESSIVE}\s+{LIST_NOUN}(?:\s+(?:entirely|completely|altogether))?$"
    ));
    let weak = rx_dyn(&format!(
        r"^(?:{verbs})\s+(?:the\s+)?(?:item|task|todo|to-do|entry|one)?\s*(?P<item>.+?)(?:\s+(?:item|task|todo|entry|one))?(?:\s+(?:off|out))?$"
    ));
    let (raw, strength) = if let Some(c) = strong.captures(t) {
        (c["item"].to_string(), Strength::Strong)
    } else if let Some(c) = weak.captures(t) {
        (c["item"].to_string(), Strength::Weak)
    } else {
        return Fit::Unfit("no words of deleting an item");
    };
    let item = clean_item(&raw);
    if is_empty_arg(&item)
        || rx!(
            r"^(?:my|the|our|this|that)\s+(?:\w+\s+)?(?:list|todos|tasks)$|^(?:everything|all)\b"
        )
        .is_match(&item)
    {
        return Fit::Unfit("names no single item");
    }
    if rx!(r"\b(?:memory|memories|remember|alarm|timer|reminder|event|appointment|email|message|file|photo|account|app)\b").is_match(&item) {
        return Fit::Unfit("deletes something other than a to-do");
    }
    if strength == Strength::Weak && item.split_whitespace().count() > 6 {
        return Fit::Unfit("too long for a to-do item");
    }
    Fit::Fits {
        strength,
        arg: Some(item),
    }
}

/// What "what's my wifi password?" asks the memory for ("wifi
/// password"), from the tidied words; `None` when they do not ask for
/// something of the speaker's, or name what the device keeps elsewhere
/// (lists, timers, the calendar, mail, the volume, the time).
pub fn memory_subject(text: &str) -> Option<String> {
    let t = tidy(text).to_lowercase();
    let t = t.trim_end_matches(['?', '.', '!']).trim();
    let c = rx!(r"^(?:what(?:'s| is| are| was| were|'re)|what do you (?:know|remember) about|do you (?:know|remember)(?: what)?|what did i (?:tell|say to) you about|remind me what) (?:my|our) (?P<s>[a-z0-9' -]+?)(?: (?:is|are|was|were|again))*$")
        .captures(t)?;
    let subject = c.name("s")?.as_str().trim();
    if subject.is_empty()
        || subject.split_whitespace().count() > 5
        || rx!(r"\b(?:lists?|shopping|to do|todo|to-do|tasks?|timers?|alarms?|reminders?|calendar|diary|schedule|agenda|appointments?|meetings?|plans?|events?|volume|time|date|day|next|mail|emails?|messages?|inbox|location|weather|battery|memories|memory|balance)\b").is_match(subject)
    {
        return None;
    }
    Some(subject.to_string())
}

fn memory_list(t: &str) -> Fit {
    // "what's my wifi password?": one memory looked up.
    if let Some(subject) = memory_subject(t) {
        return Fit::strong(Some(subject));
    }
    if rx!(r"^(?:what (?:do|did) you (?:remember|know|recall)(?: about me| about myself| of me)?|what have i told you(?: about (?:me|myself))?|what do you know about me|what'?s in your memory|(?:list|read|show|tell me)(?: me)? (?:my |your |the )?memories|tell me what you (?:remember|know)(?: about me)?|what have you (?:remembered|stored|saved|learned)(?: about me)?|what (?:have|did) i (?:ask|asked|tell|told) you to (?:remember|keep|save|note)|what did you (?:save|store|note down|keep) (?:for me|about me)|what do you have on me|what'?s stored about me|what do you keep about me)$").is_match(t) {
        return Fit::strong(None);
    }
    if rx!(r"\b(?:about me|about myself|my memories|your memory|have i told you)\b").is_match(t)
        && is_question_or_short(t)
        && !rx!(r"\bremember (?:when|the|that time|how|what|where|who)\b").is_match(t)
    {
        return Fit::weak(None);
    }
    Fit::Unfit("does not ask what I remember")
}

/// The name a speaker gives themself: "my name is Alex", "I'm called Sam
/// Lee", "call me Jo" (the name as whisper writes one, capitalised, so
/// "call me back" and "call me a taxi" are not names).
fn introduced_name(t: &str) -> Option<String> {
    let c = rx!(r"^(?:(?:my name is|my name's|i'm called|i am called|you can call me|i go by)\s+(?P<any>[A-Za-z][A-Za-z'-]*(?: [A-Za-z][A-Za-z'-]*)?)|call me\s+(?P<cap>\p{Lu}[\p{L}'-]*))$")
        .captures(t)?;
    let name = c.name("any").or(c.name("cap"))?.as_str();
    let lower = name.to_lowercase();
    if rx!(r"^(?:a|an|the|not|no|back|later|soon|now|tonight|tomorrow|when|if|at|on|maybe|please|anything|whatever|anytime|sometime|up|it|that|this|what|nothing|something|unknown|secret)\b").is_match(&lower) {
        return None;
    }
    // Said back as a name: each word capitalised.
    Some(
        name.split_whitespace()
            .map(|w| {
                let mut cs = w.chars();
                cs.next()
                    .map(|f| f.to_uppercase().chain(cs).collect::<String>())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join(" "),
    )
}

fn memory_remember(t: &str) -> Fit {
    if is_question(t) {
        return Fit::Unfit("a question, not a request");
    }
    if let Some(name) = introduced_name(t) {
        return Fit::strong(Some(format!("my name is {name}")));
    }
    let lead = rx!(
        r"^(?:please\s+)?(?:remember|don'?t forget|do not forget|keep in mind|bear in mind|make a note|take note|note|for (?:future reference|the record)|just so you know|fyi|for your information|i want you to know|you should know|store this|save this)(?:\s+that|\s+this)?[\s,:-]+(?P<fact>.+)$"
    );
    let trail = rx!(
        r"^(?P<fact>.+?)[\s,.-]+(?:remember that|remember this|please remember|remember it|don'?t forget (?:that|it)|keep that in mind|make a note of (?:that|it))$"
    );
    let first_person =
        |f: &str| rx!(r"\b(?:i|i'm|i've|i'd|my|mine|me|we|we're|our|us)\b").is_match(f);
    let (fact, strength) = if let Some(c) = lead.captures(t) {
        let fact = c["fact"].trim().to_string();
        // "remember the titans is a good film": a bare "remember" with a
        // fact about the world is small talk, not a fact about the user.
        let bare = rx!(r"^(?:please\s+)?remember\s").is_match(t)
            && !rx!(r"^(?:please\s+)?remember\s+(?:that|this)\b").is_match(t);
        if bare && !first_person(&fact) {
            return Fit::Unfit("a bare 'remember' with no fact about you");
        }
        (fact, Strength::Strong)
    } else if let Some(c) = trail.captures(t) {
        (c["fact"].trim().to_string(), Strength::Strong)
    } else {
        return Fit::Unfit("no words of remembering a fact");
    };
    if rx!(r"^(?:to|when|how|where|who|what|the time|me\b|us\b|you\b|if|whether)").is_match(&fact) {
        return Fit::Unfit("not a fact to keep (a reminder, or a question)");
    }
    let words = fact.split_whitespace().count();
    if is_empty_arg(&fact) || words < 2 || (words < 3 && !first_person(&fact)) {
        return Fit::Unfit("no fact said");
    }
    if has_time(&fact) && rx!(r"^(?:i|we) (?:need|have|must|should) to\b").is_match(&fact) {
        return Fit::Unfit("a reminder with a time");
    }
    Fit::Fits {
        strength,
        arg: Some(fact.trim_end_matches(['.', '!']).to_string()),
    }
}

fn memory_forget(t: &str) -> Fit {
    if is_question(t) {
        return Fit::Unfit("a question, not a request");
    }
    if rx!(r"^(?:i|we|you|he|she|they)\s+(?:forgot|forget|have forgotten|'ve forgotten|always forget|keep forgetting)\b|^(?:don'?t|do not|never|never ever)\s+forget\b|\bforgot\b").is_match(t) {
        return Fit::Unfit("about forgetting, not a request to forget");
    }
    let lead = rx!(
        r"^(?:forget what (?:i said|i told you|you know) about|forget the fact that|forget that|forget about|forget|delete the memory (?:that|about|of)|delete (?:my|the) memory (?:that|about|of)|remove the memory (?:that|about|of)|erase the memory (?:that|about|of)|delete what you know about|erase what you know about|stop remembering(?: that)?|wipe the memory (?:that|about))\s+(?P<what>.+)$"
    );
    let Some(c) = lead.captures(t) else {
        return Fit::Unfit("no words of forgetting a memory");
    };
    let what = c["what"].trim().to_string();
    if is_empty_arg(&what)
        || rx!(r"^(?:it|that|this|everything|all|about it|me|you|my list|the list)\b")
            .is_match(&what)
    {
        return Fit::Unfit("names no memory");
    }
    if rx!(r"^(?:to|the (?:alarm|timer|reminder|list))\b").is_match(&what) {
        return Fit::Unfit("not a memory");
    }
    Fit::strong(Some(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(intent: &str, text: &str) -> Option<String> {
        fit(intent, text).arg().map(str::to_string)
    }

    #[test]
    fn easter_and_the_days_it_fixes() {
        let date = |y, m, d| chrono::NaiveDate::from_ymd_opt(y, m, d).unwrap();
        // Published dates of Western Easter.
        for (year, month, day) in [
            (2024, 3, 31),
            (2025, 4, 20),
            (2026, 4, 5),
            (2027, 3, 28),
            (2038, 4, 25),
        ] {
            assert_eq!(easter(year), Some(date(year, month, day)), "{year}");
        }
        let today = date(2026, 12, 6);
        assert_eq!(
            counted_day("how many weeks until easter", today),
            Some((date(2027, 3, 28), Some("Easter")))
        );
        assert_eq!(
            counted_day("how many days until good friday", today),
            Some((date(2027, 3, 26), Some("Good Friday")))
        );
        assert_eq!(
            counted_day("how long until easter monday", date(2027, 3, 1)),
            Some((date(2027, 3, 29), Some("Easter Monday")))
        );
    }

    #[test]
    fn a_holiday_this_year_is_this_years_even_when_past() {
        let date = |y, m, d| chrono::NaiveDate::from_ymd_opt(y, m, d).unwrap();
        let today = date(2026, 12, 6);
        assert_eq!(
            asked_holiday("what date is easter this year", today),
            Some((date(2026, 4, 5), "Easter"))
        );
        assert_eq!(
            asked_holiday("when is easter", today),
            Some((date(2027, 3, 28), "Easter"))
        );
        assert_eq!(
            asked_holiday("what day is christmas next year", today),
            Some((date(2027, 12, 25), "Christmas"))
        );
        assert_eq!(
            asked_holiday("what day was halloween this year", today),
            Some((date(2026, 10, 31), "Halloween"))
        );
    }

    #[test]
    fn a_question_about_something_of_mine_asks_the_memory() {
        for (text, subject) in [
            ("what's my wifi password", "wifi password"),
            ("What is my locker code?", "locker code"),
            ("do you remember my sister's name", "sister's name"),
            ("what do you know about my car", "car"),
            ("what was my parking spot again", "parking spot"),
        ] {
            assert_eq!(memory_subject(text).as_deref(), Some(subject), "{text}");
            assert!(fit("memory_list", text).is_strong(), "{text}");
        }
        for not_memory in [
            "what's on my list",
            "what's my next appointment",
            "what's my shopping list",
            "what are my reminders",
            "what's the wifi password",
            "what's my alarm set for",
            "my wifi password is blue42",
        ] {
            assert_eq!(memory_subject(not_memory), None, "{not_memory}");
        }
    }

    #[test]
    fn the_time_a_while_from_now_is_the_time_now_plus_the_while() {
        let ahead = |t: &str| asked_time_ahead(&tidy(t)).map(|d| d.as_secs());
        assert_eq!(ahead("what time will it be in 20 minutes"), Some(1200));
        assert_eq!(ahead("What's five minutes from now?"), Some(300));
        assert_eq!(ahead("what time is it two hours from now"), Some(7200));
        assert_eq!(ahead("what time will it be in Tokyo"), None);
        assert_eq!(ahead("what time will it be in 20 minutes in Tokyo"), None);
        assert!(fit("time_now", "what time will it be in an hour and a half").is_strong());
    }

    #[test]
    fn a_thing_finished_has_run_out_and_a_task_finished_is_done() {
        for ran_out in [
            "we finished the bread",
            "the eggs are finished",
            "i just finished the eggs",
            "finished the milk",
        ] {
            assert!(!fit("todo_complete", ran_out).fits(), "{ran_out}");
        }
        assert_eq!(
            arg("todo_complete", "i've finished the ironing").as_deref(),
            Some("the ironing")
        );
        assert_eq!(
            arg("todo_complete", "I finished the laundry").as_deref(),
            Some("the laundry")
        );
        assert_eq!(
            arg("todo_complete", "we finished call mum").as_deref(),
            Some("call mum")
        );
        // Other words of doing keep their meaning for things.
        assert_eq!(
            arg("todo_complete", "the eggs are done").as_deref(),
            Some("the eggs")
        );
        assert_eq!(
            arg("todo_complete", "i got the bread").as_deref(),
            Some("the bread")
        );
    }

    #[test]
    fn list_phrases_pick_the_right_intent_and_item() {
        assert_eq!(
            strong_rule("strike eggs off my list", &|_| true).as_deref(),
            Some("todo_complete")
        );
        assert_eq!(
            arg("todo_complete", "strike eggs off my list").as_deref(),
            Some("eggs")
        );
        assert!(!fit("todo_add", "strike eggs off my list").fits());
        assert_eq!(
            arg("todo_complete", "the eggs are done").as_deref(),
            Some("the eggs")
        );
        assert_eq!(
            arg("todo_add", "stick milk on the list").as_deref(),
            Some("milk")
        );
        assert_eq!(
            arg("todo_add", "add 'delete everything' to my list").as_deref(),
            Some("delete everything")
        );
        assert_eq!(
            arg("todo_delete", "remove the dentist from my list").as_deref(),
            Some("the dentist")
        );
        assert!(!fit("todo_add", "add salt to the pasta").fits());
        // A verb whisper lost before a pause, written as what it heard.
        assert_eq!(
            arg("todo_add", "At oranges to the shopping list.").as_deref(),
            Some("oranges")
        );
        assert_eq!(
            arg("todo_add", "That's batteries on my shopping list").as_deref(),
            Some("batteries")
        );
        // "At" before the item and "to" the list is whisper's "Add".
        assert!(fit("todo_add", "At oranges to the shopping list.").is_strong());
        assert!(fit("todo_add", "Ad batteries to my list").is_strong());
        assert!(fit("timer_extend", "At 5 more minutes to the timer.").is_strong());
        // Only where "add" fits: not before another verb's words.
        assert!(!fit("timer_extend", "At 5 I go to the gym").fits());
        assert!(!fit("timer_extend", "At 5 minutes to the hour").fits());
        assert!(!fit("timer_extend", "At 5 minutes to the rice").fits());
        assert!(!fit("todo_add", "That's batteries on my shopping list").is_strong());
        // Without a verb, words about what the list holds add nothing.
        for said in [
            "That's already on my list.",
            "Milk is on my shopping list.",
            "Eggs and bread are on the shopping list",
            "Everything else on my list.",
            "I think it's on my list",
            "Nothing new on my to-do list.",
        ] {
            assert!(!fit("todo_add", said).fits(), "{said}");
        }
        // Nor do they ask to read it.
        for said in [
            "that's on my to-do list already",
            "I think everything is on the shopping list",
        ] {
            assert!(!fit("todo_list", said).fits(), "{said}");
        }
        for asked in [
            "what's on my list",
            "is there anything on my shopping list",
            "I wonder what's on my list",
        ] {
            assert!(fit("todo_list", asked).fits(), "{asked}");
        }
        // A thing's own words stay an item.
        assert_eq!(
            arg("todo_add", "all-purpose flour to my shopping list").as_deref(),
            Some("all-purpose flour")
        );
        // Not in quotes: a quoted item is kept as it was said.
        assert_eq!(
            arg("todo_add", "\"at home tests\" to my list").as_deref(),
            Some("at home tests")
        );
        // After a verb the item is kept whole.
        assert_eq!(
            arg("todo_add", "add at home tests to my list").as_deref(),
            Some("at home tests")
        );
        assert!(!fit("todo_add", "how do i add things to my list").fits());
        assert!(!fit("todo_list", "list the planets").fits());
        assert!(!fit("todo_list", "clear my list").fits());
        for other_app in [
            "add an event",
            "add a new contact named Bob",
            "add a comment",
            "add a song",
        ] {
            assert!(!fit("todo_add", other_app).fits(), "{other_app}");
        }
        assert!(fit("todo_add", "add a meeting room booking to my to-do list").fits());
        assert!(fit("todo_add", "add a birthday card").fits());
        assert!(fit("todo_delete", "clear my list").is_strong());
    }

    #[test]
    fn a_date_somewhere_else_and_a_time_difference() {
        assert_eq!(
            asked_date_place("what's the date today in sydney").as_deref(),
            Some("sydney")
        );
        assert_eq!(
            asked_date_place("What day is it in Tokyo?").as_deref(),
            Some("tokyo")
        );
        assert_eq!(asked_date_place("what's the date in three weeks"), None);
        assert!(fit("date_today", "what day is it in tokyo").is_strong());
        assert!(!fit("date_today", "what's the date of the party in london").fits());
        assert_eq!(
            asked_time_difference("What's the time difference between London and New York?"),
            Some(("london".into(), "new york".into()))
        );
        assert_eq!(
            asked_time_difference("how many hours ahead is tokyo of paris"),
            Some(("tokyo".into(), "paris".into()))
        );
        assert!(fit(
            "time_now",
            "what's the time difference between london and tokyo"
        )
        .is_strong());
        assert_eq!(
            asked_time_difference("what's the difference between a time and a date"),
            None
        );
    }

    #[test]
    fn pausing_something_else_does_not_pause_me() {
        for text in [
            "mute the tv",
            "mute my phone",
            "resume the music",
            "resume my podcast",
            "unpause the movie",
            "pause spotify",
            "sleep tight",
            "sleep well",
            "i can't sleep",
            "break the eggs into a bowl",
            "put the baby to sleep",
        ] {
            assert!(!fit("pause", text).fits(), "pause: {text}");
            assert!(!fit("resume", text).fits(), "resume: {text}");
        }
        for text in [
            "mute yourself",
            "mute the microphone",
            "pause for a minute",
            "go to sleep",
            "take a break",
            "stop disturbing me",
        ] {
            assert!(fit("pause", text).fits(), "{text}");
        }
        for text in [
            "resume",
            "unmute the mic",
            "resume listening please",
            "stop do not disturb",
        ] {
            assert!(fit("resume", text).fits(), "{text}");
        }
    }

    #[test]
    fn never_mind_forgets_nothing() {
        assert!(!fit("memory_forget", "never mind, forget it").fits());
        assert!(fit("stop", "never mind, forget it").is_strong());
        assert!(!fit("memory_forget", "I forgot my keys").fits());
        assert_eq!(
            arg("memory_forget", "forget that I like jazz").as_deref(),
            Some("I like jazz")
        );
        assert!(!fit("memory_forget", "forget everything").fits());
    }

    #[test]
    fn other_times_are_not_the_time_now() {
        assert!(!fit("time_now", "what time does the match start tonight").fits());
        assert!(fit("time_now", "what's the time").is_strong());
        assert!(!fit("resume", "get me up at six").fits());
        assert!(!fit("date_today", "when is diwali").fits());
        // Another single day's date is answered; an event on it is not.
        let today = chrono::NaiveDate::from_ymd_opt(2026, 12, 6).unwrap();
        let day = |t: &str| asked_day(&tidy(t), today).map(|d| d.to_string());
        assert_eq!(
            day("What's the date tomorrow?").as_deref(),
            Some("2026-12-07")
        );
        assert_eq!(
            day("what day is it tomorrow").as_deref(),
            Some("2026-12-07")
        );
        // Whole days or weeks ahead.
        assert_eq!(
            day("What's the date in three weeks?").as_deref(),
            Some("2026-12-27")
        );
        assert_eq!(
            day("what day will it be ten days from now").as_deref(),
            Some("2026-12-16")
        );
        assert_eq!(
            day("what's the date two weeks from today").as_deref(),
            Some("2026-12-20")
        );
        assert_eq!(day("what's the date in three hours"), None);
        assert_eq!(day("what day is the party in two weeks"), None);
        assert_eq!(
            day("What's the date on Friday?").as_deref(),
            Some("2026-12-11")
        );
        assert_eq!(
            day("what was the date yesterday").as_deref(),
            Some("2026-12-05")
        );
        assert_eq!(
            day("what day is the 25th of December").as_deref(),
            Some("2026-12-25")
        );
        assert!(!fit("date_today", "what day is the 25th").fits());
        for not_a_day in [
            "what's the date",
            "what day is it today",
            "what day is the dentist on the 25th",
            "what date is easter this year",
            "is tomorrow a bank holiday",
            "i have a date on friday",
            "what's the weather tomorrow",
            "how many days until friday",
            "what day is the meeting tomorrow",
        ] {
            assert_eq!(day(not_a_day), None, "{not_a_day}");
        }
        // A day the question names but that is not read is never
        // answered with today's date.
        assert!(!fit("date_today", "what's the date in two months").fits());
        assert!(fit("date_today", "what's the date in two weeks").is_strong());
        // A fixed holiday's date is known.
        assert!(fit("date_today", "what day is christmas on").is_strong());
        assert!(fit("date_today", "What's the date tomorrow?").is_strong());
        assert!(fit("date_today", "Is it Monday today?").is_strong());
        assert!(fit("date_today", "Is it the 6th today?").is_strong());
        assert!(fit("todo_list", "Do I have anything to do today?").is_strong());
        assert_eq!(
            memory_fact("My name is Alex.").as_deref(),
            Some("my name is Alex")
        );
        assert_eq!(memory_fact("Call me Jo.").as_deref(), Some("my name is Jo"));
        assert_eq!(
            memory_fact("i'm called sam lee").as_deref(),
            Some("my name is Sam Lee")
        );
        for not_a_name in [
            "call me back",
            "call me a taxi",
            "Call me later.",
            "my name is not important",
        ] {
            assert_eq!(memory_fact(not_a_name), None, "{not_a_name}");
        }
        for top in [
            "Max volume.",
            "volume to maximum",
            "turn it all the way up",
            "set the volume to max",
        ] {
            assert_eq!(volume_extreme(&tidy(top)), Some(true), "{top}");
            assert!(fit("volume_up", top).is_strong(), "{top}");
            assert!(!fit("volume_down", top).fits(), "{top}");
        }
        assert_eq!(volume_extreme("minimum volume"), Some(false));
        assert_eq!(volume_extreme("max is my cat"), None);
        assert_eq!(volume_extreme("put it on top"), None);
        assert_eq!(volume_extreme("make it full"), None);
        assert_eq!(volume_extreme("turn it up to max"), Some(true));
        assert!(fit("volume_up", "Turn it up to 80.").is_strong());
        assert!(fit("volume_down", "bring the volume down to 3").is_strong());
        for whole in [
            "Clear my shopping list.",
            "empty the list",
            "delete everything from my to do list",
        ] {
            assert_eq!(
                todo_item("todo_delete", whole).as_deref(),
                Some(WHOLE_LIST),
                "{whole}"
            );
        }
        assert!(!fit("todo_delete", "delete everything").fits());
        assert!(!fit("date_today", "is it monday tomorrow").fits());
        assert!(fit("date_today", "What's the date on Friday?").is_strong());
    }

    #[test]
    fn the_gate_refuses_unfit_and_rescues_strong() {
        let all = |_: &str| true;
        let d = gate(
            "strike eggs off my list",
            Some(("todo_add", 0.9)),
            0.6,
            &all,
        );
        assert_eq!(d.intent.as_deref(), Some("todo_complete"));
        assert_eq!(d.by, "rule");
        let d = gate(
            "never mind, forget it",
            Some(("memory_forget", 0.9)),
            0.6,
            &all,
        );
        assert_eq!(d.intent.as_deref(), Some("stop"));
        let d = gate("add salt to the pasta", Some(("todo_add", 0.9)), 0.6, &all);
        assert_eq!(d.intent, None);
        let d = gate("nineteen plus six", Some(("other", 0.9)), 0.6, &all);
        assert_eq!(d.intent.as_deref(), Some("calculate"));
        let d = gate("shh", None, 0.6, &all);
        assert_eq!(d.intent.as_deref(), Some("stop"));
        // A custom intent without a frame passes on the classifier alone.
        let d = gate("lights on", Some(("lights", 0.9)), 0.6, &all);
        assert_eq!(d.intent.as_deref(), Some("lights"));
        // "yes" is a filler to the frames but an intent of its own.
        let d = gate("yes", Some(("yes", 0.9)), 0.8, &all);
        assert_eq!(d.intent.as_deref(), Some("yes"));
    }

    #[test]
    fn bad_input_is_refused_quickly() {
        let long = "add ".repeat(5000);
        let started = std::time::Instant::now();
        for intent in FRAMED {
            for text in [
                "",
                "!!!",
                "🙂🙂",
                "the the the",
                long.as_str(),
                "¿qué hora es?",
            ] {
                let f = fit(intent, text);
                assert!(
                    !f.is_strong() || *intent == "stop",
                    "{intent} {text:?} {f:?}"
                );
            }
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
