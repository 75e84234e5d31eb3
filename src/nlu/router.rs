//! The router graph's decision (R-ROUTE): which of simple / context /
//! persona answers a request.
//!
//! 1. Keyword precheck on whole words and phrases (case-insensitive), so
//!    "tell me about mastodons" does not match `todo` and "report" does not
//!    match "repo" — the reference's substring bug.
//! 2. The on-device classifier (kNN over MiniLM) when present and sure.
//! 3. The main LLM with a one-word prompt, normalised.
//! 4. Otherwise `simple`.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::Classifier;
use crate::cancel::CancelToken;
use crate::llm::{ChatMessage, ChatModel, ChatRequest, LlmError};

/// The three paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Route {
    Simple,
    Context,
    Persona,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Simple => "simple",
            Route::Context => "context",
            Route::Persona => "persona",
        }
    }
}

/// How the route was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DecidedBy {
    Keyword,
    Classifier,
    Llm,
    Default,
}

/// A routing decision, as `earshot route --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub route: Route,
    pub by: DecidedBy,
    /// Classifier confidence (or 1.0 for a keyword hit); `null` otherwise.
    pub confidence: Option<f32>,
    /// The keyword that matched, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyword: Option<String>,
    /// Why the LLM was not used, or failed (shown in the turn log).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub elapsed_ms: f64,
}

/// The seed's 11 keywords (R-ROUTE), always on.
pub const SEED_KEYWORDS: &[&str] = &[
    "notion",
    "to-do",
    "todo",
    "task list",
    "to do list",
    "calendar",
    "schedule",
    "reminder",
    "note down",
    "create a task",
    "add a task",
];

/// More phrases from the reference's longer multilingual list (its
/// live-information and scheduling entries; its shopping and chat-app words
/// such as "order", "track", "dm" are left out because, even as whole words,
/// they fire on everyday speech: "in order to", "back on track").
pub const EXTRA_KEYWORDS: &[&str] = &[
    "todos",
    "to-dos",
    "reminders",
    "remind me",
    "my tasks",
    "search the web",
    "look up",
    "stock price",
    "share price",
    "stock market",
    "market cap",
    "exchange rate",
    "bitcoin",
    "ethereum",
    "crypto",
    "cryptocurrency",
    "gold price",
    "nasdaq",
    "dow jones",
    "s&p 500",
    "lista de tareas",
    "tarea",
    "tareas",
    "recordatorio",
    "recuérdame",
    "calendario",
    "agenda",
    "lista de tarefas",
    "tarefa",
    "tarefas",
    "lembrete",
    "lembre-me",
    "待办",
    "提醒",
    "日程",
    "任务清单",
    "股价",
    "股票",
    "汇率",
    "比特币",
    // Issue 18: mail goes to the agent's email tools.
    "email",
    "emails",
    "e-mail",
    "inbox",
    "mail",
];

/// One-word classification prompt (the seed's, tightened).
pub const CLASSIFY_PROMPT: &str = "Classify the user's request into exactly one word.\n\
- simple: general questions, explanations, chit-chat; no tools needed.\n\
- context: needs outside or live information or a tool: web search, maths, todo lists, calendar, reminders, past conversations, facts the user stored.\n\
- persona: the user explicitly asks for a style, personality, role, teaching style or behaviour.\n\
Answer with only one word: simple, context or persona.";

/// Whole-word, case-insensitive keyword matcher.
///
/// A plain scan of the lower-cased text, not one regex per keyword: a
/// case-insensitive regex with Unicode word classes keeps a lazy DFA
/// cache per keyword and per thread that uses it, and the router runs
/// on the turn's thread and on the prediction's, so ~60 keyword regexes
/// held ~34 MB of `earshot run`'s resident memory and grew it as new
/// sentences came (heaptrack over the latency bench; issue 21).
pub struct KeywordMatcher {
    keywords: Vec<Keyword>,
}

/// One keyword, lower-cased.
struct Keyword {
    word: String,
    form: KeywordForm,
}

enum KeywordForm {
    /// Scripts written without spaces (CJK) have no word boundaries:
    /// the keyword matches as a substring.
    Substring,
    /// A hyphenated keyword matches exactly as written, between word
    /// boundaries ("e-mail", "lembre-me").
    Exact,
    /// The keyword's words, with any run of whitespace or hyphens
    /// between them ("to do" matches "to-do" and "to  do").
    Words(Vec<String>),
}

impl KeywordMatcher {
    pub fn new(extra: &[String]) -> Self {
        let mut words: Vec<String> = SEED_KEYWORDS
            .iter()
            .chain(EXTRA_KEYWORDS)
            .map(|s| s.to_lowercase())
            .collect();
        words.extend(
            extra
                .iter()
                .map(|s| s.trim().to_lowercase())
                .filter(|s| !s.is_empty()),
        );
        let keywords = words
            .into_iter()
            .map(|word| {
                let form = if word.chars().any(is_cjk) {
                    KeywordForm::Substring
                } else if word.contains('-') {
                    KeywordForm::Exact
                } else {
                    KeywordForm::Words(
                        word.split(|c: char| c.is_whitespace() || c == '-')
                            .filter(|p| !p.is_empty())
                            .map(str::to_string)
                            .collect(),
                    )
                };
                Keyword { word, form }
            })
            .filter(|k| !matches!(&k.form, KeywordForm::Words(parts) if parts.is_empty()))
            .collect();
        Self { keywords }
    }

    /// The first keyword found as a whole word/phrase.
    pub fn find(&self, text: &str) -> Option<&str> {
        let text = text.to_lowercase();
        self.keywords
            .iter()
            .find(|k| k.is_in(&text))
            .map(|k| k.word.as_str())
    }
}

impl Keyword {
    /// Whether the keyword occurs in `text` (lower-cased).
    fn is_in(&self, text: &str) -> bool {
        match &self.form {
            KeywordForm::Substring => text.contains(&self.word),
            KeywordForm::Exact => starts(text).any(|i| {
                text[i..]
                    .strip_prefix(self.word.as_str())
                    .is_some_and(ends_word)
            }),
            KeywordForm::Words(parts) => starts(text).any(|i| {
                let mut rest = &text[i..];
                for (n, part) in parts.iter().enumerate() {
                    if n > 0 {
                        let gap = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '-');
                        if gap.len() == rest.len() {
                            return false;
                        }
                        rest = gap;
                    }
                    match rest.strip_prefix(part.as_str()) {
                        Some(after) => rest = after,
                        None => return false,
                    }
                }
                ends_word(rest)
            }),
        }
    }
}

/// A word character: a letter or digit of any script, or the underscore.
/// A regex's Unicode `\w` also counts combining marks; no keyword or
/// sentence the router sees turns on that difference.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Where a keyword may begin: the start, or after a character that is
/// neither a word character nor a hyphen.
fn starts(text: &str) -> impl Iterator<Item = usize> + '_ {
    let mut before: Option<char> = None;
    text.char_indices().filter_map(move |(i, c)| {
        let ok = before.is_none_or(|b| !is_word_char(b) && b != '-');
        before = Some(c);
        ok.then_some(i)
    })
}

/// Whether a keyword that ended just before `rest` ended a word.
fn ends_word(rest: &str) -> bool {
    rest.chars()
        .next()
        .is_none_or(|c| !is_word_char(c) && c != '-')
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF)
}

/// Normalise the LLM's one-word answer: lower-cased, trimmed, punctuation
/// and think blocks dropped; anything else becomes `simple`.
pub fn normalise_label(raw: &str) -> Route {
    let cleaned = crate::llm::think::strip_think(raw).to_lowercase();
    let word = cleaned
        .split(|c: char| !c.is_alphabetic())
        .find(|w| !w.is_empty())
        .unwrap_or("");
    match word {
        "context" => Route::Context,
        "persona" => Route::Persona,
        _ => Route::Simple,
    }
}

/// Map a classifier label to a route (labels may be intent names such as
/// `route.context`).
fn label_to_route(label: &str) -> Option<Route> {
    let last = label.rsplit(['.', ':', '/']).next().unwrap_or(label);
    match last.trim().to_lowercase().as_str() {
        "simple" => Some(Route::Simple),
        "context" => Some(Route::Context),
        "persona" => Some(Route::Persona),
        _ => None,
    }
}

/// The router: keywords, then classifier, then LLM.
pub struct Router {
    keywords: KeywordMatcher,
    classifier: Option<Arc<dyn Classifier>>,
    threshold: f32,
    llm: Option<(Arc<dyn ChatModel>, String)>,
    /// The language model's last few routes, by text: the answer begun
    /// at a pause ([`Router::decide_ahead`]) asked it already, and the
    /// turn that follows must not wait for the same question again.
    /// A route of `None`: asking the model failed (unreachable, refused,
    /// timed out; not cancelled), and a turn with the same words within
    /// [`LLM_ROUTE_FRESH`] falls back at once instead of waiting again.
    llm_routes: std::sync::Mutex<std::collections::VecDeque<(String, Option<Route>, Instant)>>,
    /// Words whose route [`Router::decide_ahead`] guessed without the
    /// model, and the guess, for [`Router::confirm_ahead`] to ask it about.
    guessed: std::sync::Mutex<Option<(String, Route)>>,
}

/// How many language-model routes [`Router`] remembers, and for how long:
/// a turn follows the look that asked within a second or two.
const LLM_ROUTES_KEPT: usize = 8;
const LLM_ROUTE_FRESH: std::time::Duration = std::time::Duration::from_secs(60);

impl Router {
    pub fn new(
        extra_keywords: &[String],
        classifier: Option<Arc<dyn Classifier>>,
        threshold: f32,
        llm: Option<(Arc<dyn ChatModel>, String)>,
    ) -> Self {
        Self {
            keywords: KeywordMatcher::new(extra_keywords),
            classifier,
            threshold,
            llm,
            llm_routes: std::sync::Mutex::new(std::collections::VecDeque::new()),
            guessed: std::sync::Mutex::new(None),
        }
    }

    /// The route of `text` for an answer begun before its turn, known at
    /// once: as [`Router::decide`] will find it without a model, or, where
    /// it will ask the language model, the classifier's own label however
    /// unsure (a guess: [`Router::confirm_ahead`] then asks the model
    /// while the guessed answer is already on its way, and the turn uses
    /// that answer only if its own request, on the model's route, is the
    /// same). Asking first cost a whole model reply before the answer's
    /// request could begin ("What's the population of Canada?", simple
    /// at 0.62: first audio 1.25 s after the end of speech with a 300 ms
    /// model, issue 21). Not for a model that computes on this device,
    /// whose time would go to a guess ([`Router::decide_offline`] then).
    /// `None`: not known ahead.
    pub fn decide_ahead(&self, text: &str) -> Option<Route> {
        match &self.llm {
            Some((llm, _)) if !llm.computes_here() => {
                match self.remembered_llm_route(text) {
                    Some(Some(route)) => return Some(route),
                    Some(None) => return Some(Route::Simple),
                    None => {}
                }
                if let Some(route) = self.decide_offline(text) {
                    return Some(route);
                }
                let guess = self.guess(text);
                if let Ok(mut guessed) = self.guessed.lock() {
                    *guessed = Some((text.to_string(), guess));
                }
                Some(guess)
            }
            _ => self.decide_offline(text),
        }
    }

    /// Ask the language model the route of `text` when
    /// [`Router::decide_ahead`] guessed it, so the turn finds the model's
    /// route remembered instead of waiting for it. True when the model
    /// named another route than the guess: what was begun on the guess is
    /// not what the turn will send.
    pub fn confirm_ahead(&self, text: &str) -> bool {
        let guessed = self
            .guessed
            .lock()
            .ok()
            .and_then(|mut g| g.take_if(|(words, _)| words.as_str() == text));
        match guessed {
            Some((_, guess)) if self.remembered_llm_route(text).is_none() => {
                self.decide(text, &CancelToken::new());
                self.remembered_llm_route(text)
                    .is_some_and(|confirmed| confirmed.unwrap_or(Route::Simple) != guess)
            }
            _ => false,
        }
    }

    /// The classifier's route for `text` at any confidence (a keyword's
    /// first); `simple` with neither.
    fn guess(&self, text: &str) -> Route {
        if self.keywords.find(text).is_some() {
            return Route::Context;
        }
        self.classifier
            .as_ref()
            .and_then(|c| c.classify(text))
            .and_then(|(label, _)| label_to_route(&label))
            .unwrap_or(Route::Simple)
    }

    /// What the model said of `text` lately: `Some(Some(route))`, or
    /// `Some(None)` when asking it failed.
    fn remembered_llm_route(&self, text: &str) -> Option<Option<Route>> {
        let routes = self.llm_routes.lock().ok()?;
        routes
            .iter()
            .rev()
            .find(|(t, _, at)| t == text && at.elapsed() < LLM_ROUTE_FRESH)
            .map(|(_, route, _)| *route)
    }

    fn remember_llm_route(&self, text: &str, route: Option<Route>) {
        if let Ok(mut routes) = self.llm_routes.lock() {
            routes.retain(|(t, _, _)| t != text);
            if routes.len() >= LLM_ROUTES_KEPT {
                routes.pop_front();
            }
            routes.push_back((text.to_string(), route, Instant::now()));
        }
    }

    /// The route [`Router::decide`] reaches for `text` without asking a
    /// language model: a keyword, a confident classifier, or the default
    /// when no model would be asked. `None` when `decide` would ask one
    /// (a prediction must not spend a model call on routing).
    pub fn decide_offline(&self, text: &str) -> Option<Route> {
        if self.keywords.find(text).is_some() {
            return Some(Route::Context);
        }
        if let Some((label, confidence)) = self.classifier.as_ref().and_then(|c| c.classify(text)) {
            if let Some(route) = label_to_route(&label).filter(|_| confidence >= self.threshold) {
                return Some(route);
            }
        }
        self.llm.is_none().then_some(Route::Simple)
    }

    /// Decide the route of `text`. Never fails: an LLM error falls back to
    /// `simple` with a note.
    pub fn decide(&self, text: &str, cancel: &CancelToken) -> Decision {
        let started = Instant::now();
        let done =
            |route, by, confidence, keyword: Option<String>, note: Option<String>| Decision {
                route,
                by,
                confidence,
                keyword,
                note,
                elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
            };
        if let Some(word) = self.keywords.find(text) {
            return done(
                Route::Context,
                DecidedBy::Keyword,
                Some(1.0),
                Some(word.to_string()),
                None,
            );
        }
        let mut note = None;
        let mut below: Option<(Route, f32)> = None;
        if let Some(classifier) = &self.classifier {
            match classifier.classify(text) {
                Some((label, confidence)) => match label_to_route(&label) {
                    Some(route) if confidence >= self.threshold => {
                        return done(route, DecidedBy::Classifier, Some(confidence), None, None);
                    }
                    Some(route) => {
                        below = Some((route, confidence));
                        note = Some(format!(
                            "classifier said {} at {confidence:.2}, below {:.2}",
                            route.as_str(),
                            self.threshold
                        ));
                    }
                    None => note = Some(format!("classifier label {label:?} is not a route")),
                },
                None => note = Some("no on-device classifier loaded".into()),
            }
        }
        if let Some((llm, model)) = &self.llm {
            let asked = match self.remembered_llm_route(text) {
                Some(Some(route)) => Ok(route),
                // Asked a moment ago (at the look, or the same words'
                // last turn) and it failed: asking again would cost the
                // turn the same wait for the same.
                Some(None) => Err("it failed for these words just before".to_string()),
                None => match ask_llm(llm.as_ref(), model, text, cancel) {
                    Ok(route) => {
                        self.remember_llm_route(text, Some(route));
                        Ok(route)
                    }
                    Err(e) => {
                        if !matches!(e, LlmError::Cancelled) {
                            self.remember_llm_route(text, None);
                        }
                        Err(e.to_string())
                    }
                },
            };
            match asked {
                Ok(route) => {
                    return done(route, DecidedBy::Llm, below.map(|b| b.1), None, note);
                }
                Err(e) => {
                    note = Some(match note {
                        Some(n) => format!("{n}; LLM classification failed: {e}"),
                        None => format!("LLM classification failed: {e}"),
                    })
                }
            }
        }
        done(
            Route::Simple,
            DecidedBy::Default,
            below.map(|b| b.1),
            None,
            note,
        )
    }
}

fn ask_llm(
    llm: &dyn ChatModel,
    model: &str,
    text: &str,
    cancel: &CancelToken,
) -> Result<Route, LlmError> {
    llm.check_configured()?;
    let request = ChatRequest {
        model: model.to_string(),
        messages: vec![
            ChatMessage::system(CLASSIFY_PROMPT),
            ChatMessage::user(text),
        ],
        temperature: 0.0,
        max_completion_tokens: 512,
        top_p: 1.0,
        tools: Vec::new(),
        stream: false,
    };
    let response = llm.chat(&request, &mut |_| {}, cancel)?;
    Ok(normalise_label(&response.content))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher() -> KeywordMatcher {
        KeywordMatcher::new(&[])
    }

    #[test]
    fn every_seed_keyword_matches_as_a_phrase() {
        let m = matcher();
        for kw in SEED_KEYWORDS {
            let text = format!("please {kw} for me");
            assert!(m.find(&text).is_some(), "{kw}");
            let upper = format!("PLEASE {} NOW", kw.to_uppercase());
            assert!(m.find(&upper).is_some(), "{kw} upper");
        }
        assert!(m.find("Add milk to my to do list.").is_some());
        assert!(m.find("what's on my calendar?").is_some());
        assert!(m.find("add it to Notion").is_some());
    }

    /// The keyword regexes the scan replaced (one per keyword), kept here
    /// as the reference the scan must agree with.
    fn regex_reference(word: &str) -> regex::Regex {
        if word.chars().any(is_cjk) {
            return regex::Regex::new(&format!("(?i){}", regex::escape(word))).unwrap();
        }
        let body = if word.contains('-') {
            regex::escape(word)
        } else {
            word.split(|c: char| c.is_whitespace() || c == '-')
                .filter(|p| !p.is_empty())
                .map(regex::escape)
                .collect::<Vec<_>>()
                .join(r"[\s\-]+")
        };
        regex::Regex::new(&format!(r"(?i)(?:^|[^\w-])(?:{body})(?:$|[^\w-])")).unwrap()
    }

    #[test]
    fn the_scan_finds_what_the_keyword_regexes_found() {
        let extra = ["to-do list".to_string(), "Hausaufgabe".to_string()];
        let m = KeywordMatcher::new(&extra);
        let reference: Vec<(String, regex::Regex)> = m
            .keywords
            .iter()
            .map(|k| (k.word.clone(), regex_reference(&k.word)))
            .collect();
        let held_out = include_str!("../../tests/data/understanding.tsv");
        let questions = include_str!("../../tests/data/llm_questions.txt");
        let mut texts: Vec<String> = held_out
            .lines()
            .chain(questions.lines())
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit('\t').next().unwrap_or(l).to_string())
            .collect();
        // Edges: boundaries, hyphens, runs of spaces, other scripts, case.
        texts.extend(
            [
                "Add eggs to my TO-DO list",
                "to  do list",
                "remind-me later",
                "what's on my schedule?",
                "-remind me",
                "email_me",
                "REMIND ME_",
                "Ünd Hausaufgabe!",
                "hausaufgaben",
                "",
                "-",
                "买牛奶 添加到待办",
            ]
            .map(str::to_string),
        );
        let mut found = 0;
        for text in &texts {
            let expected = reference
                .iter()
                .find(|(_, re)| re.is_match(text))
                .map(|(w, _)| w.as_str());
            assert_eq!(m.find(text), expected, "{text:?}");
            found += usize::from(expected.is_some());
        }
        // The set holds both kinds, so agreement is not trivially "none".
        assert!(
            found > 30 && found < texts.len() - 30,
            "{found} of {}",
            texts.len()
        );
    }

    #[test]
    fn substrings_are_not_keywords() {
        let m = matcher();
        for text in [
            "tell me about mastodons",
            "what is a todolist in haskell", // no boundary after todo
            "the reminderless life",
            "rescheduled flights are annoying",
            "calendars of the maya",
            "give me a report on the repo",
            "annotation tools",
            "tasks are hard", // "task list" needs both words
        ] {
            assert_eq!(m.find(text), None, "{text}");
        }
    }

    #[test]
    fn non_english_entries_match() {
        let m = matcher();
        assert!(m.find("añade leche a mi lista de tareas").is_some());
        assert!(m.find("Recuérdame llamar a mamá").is_some());
        assert!(m.find("crie um lembrete para amanhã").is_some());
        assert!(m.find("lembre-me de comprar pão").is_some());
    }

    #[test]
    fn mail_words_match_whole_words_only() {
        let m = matcher();
        assert_eq!(m.find("read my newest email"), Some("email"));
        assert_eq!(m.find("anything in my inbox?"), Some("inbox"));
        assert_eq!(m.find("any mail from Priya today"), Some("mail"));
        for text in [
            "the mailman came",
            "emailing is boring",
            "a mailbox-shaped cake",
            "voicemail",
        ] {
            assert_eq!(m.find(text), None, "{text}");
        }
    }

    #[test]
    fn reference_substring_false_positives_do_not_fire() {
        let m = matcher();
        // Each of these contains a reference keyword as a substring only.
        for text in [
            "tell me about mastodons",                      // todo
            "who is the system admin",                      // dm (not a keyword here either)
            "the livestock of mongolia",                    // stock
            "a cryptographic hash function",                // crypto
            "notional value of a bond",                     // notion
            "she was very productive",                      // product
            "the schedules of trains in 1900 were printed", // schedule
        ] {
            assert_eq!(m.find(text), None, "{text}");
        }
        assert_eq!(m.find("what's the bitcoin price"), Some("bitcoin"));
        assert_eq!(m.find("S&P 500 today"), Some("s&p 500"));
        assert_eq!(m.find("帮我添加一个待办事项"), Some("待办"));
        assert_eq!(m.find("今天的股价怎么样"), Some("股价"));
    }

    #[test]
    fn hyphenated_keyword_is_exact() {
        let m = matcher();
        assert!(m.find("my to-do items").is_some());
        assert!(m.find("to-dos for today").is_some());
    }

    #[test]
    fn llm_output_is_normalised() {
        assert_eq!(normalise_label("Context"), Route::Context);
        assert_eq!(normalise_label("  persona.\n"), Route::Persona);
        assert_eq!(
            normalise_label("<think>maybe context</think>simple"),
            Route::Simple
        );
        assert_eq!(normalise_label("**CONTEXT**"), Route::Context);
        assert_eq!(normalise_label("I think it's context"), Route::Simple);
        assert_eq!(normalise_label(""), Route::Simple);
        assert_eq!(normalise_label("weather"), Route::Simple);
    }

    struct Fixed(Option<(String, f32)>);
    impl Classifier for Fixed {
        fn classify(&self, _: &str) -> Option<(String, f32)> {
            self.0.clone()
        }
    }

    #[test]
    fn classifier_above_threshold_decides_below_falls_back() {
        let cancel = CancelToken::new();
        let sure = Router::new(
            &[],
            Some(Arc::new(Fixed(Some(("persona".into(), 0.9))))),
            0.65,
            None,
        );
        let d = sure.decide("talk like a pirate", &cancel);
        assert_eq!(
            (d.route, d.by, d.confidence),
            (Route::Persona, DecidedBy::Classifier, Some(0.9))
        );
        let unsure = Router::new(
            &[],
            Some(Arc::new(Fixed(Some(("context".into(), 0.5))))),
            0.65,
            None,
        );
        let d = unsure.decide("hmm", &cancel);
        assert_eq!((d.route, d.by), (Route::Simple, DecidedBy::Default));
        assert!(d.note.unwrap().contains("below"));
        let kw = unsure.decide("add a task: call mum", &cancel);
        assert_eq!((kw.route, kw.by), (Route::Context, DecidedBy::Keyword));
    }

    /// Answers every routing question with "context", counting them.
    struct Counting {
        asked: std::sync::atomic::AtomicUsize,
        here: bool,
        /// Every request fails (the server is down).
        fails: bool,
    }
    impl ChatModel for Counting {
        fn chat(
            &self,
            _: &ChatRequest,
            _: &mut dyn FnMut(&str),
            _: &CancelToken,
        ) -> Result<crate::llm::ChatResponse, LlmError> {
            self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.fails {
                return Err(LlmError::Server { status: 503 });
            }
            Ok(crate::llm::ChatResponse {
                content: "context".into(),
                ..Default::default()
            })
        }
        fn computes_here(&self) -> bool {
            self.here
        }
    }

    #[test]
    fn a_model_that_failed_to_route_the_words_is_not_asked_again_at_once() {
        let model = Arc::new(Counting {
            asked: Default::default(),
            here: false,
            fails: true,
        });
        let unsure = Some(Arc::new(Fixed(Some(("simple".into(), 0.4)))) as Arc<dyn Classifier>);
        let router = Router::new(&[], unsure, 0.65, Some((model.clone(), "m".into())));
        let asked = || model.asked.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            router.decide_ahead("population of canada"),
            Some(Route::Simple)
        );
        // The failed model's route is the default, the guess's: the same.
        assert!(!router.confirm_ahead("population of canada"));
        assert_eq!(asked(), 1);
        let d = router.decide("population of canada", &CancelToken::new());
        assert_eq!((d.route, d.by), (Route::Simple, DecidedBy::Default));
        assert!(d.note.unwrap_or_default().contains("just before"));
        assert_eq!(asked(), 1, "the turn asked the failing model again");
        // Other words are asked.
        router.decide("population of france", &CancelToken::new());
        assert_eq!(asked(), 2);
    }

    #[test]
    fn a_route_asked_ahead_of_the_turn_is_not_asked_again() {
        let unsure = || Some(Arc::new(Fixed(Some(("simple".into(), 0.4)))) as Arc<dyn Classifier>);
        let remote = Arc::new(Counting {
            asked: Default::default(),
            here: false,
            fails: false,
        });
        let router = Router::new(&[], unsure(), 0.65, Some((remote.clone(), "m".into())));
        let asked = || remote.asked.load(std::sync::atomic::Ordering::SeqCst);
        // Unsure: the classifier's label is the guess, and the model is
        // asked only once the guessed answer has begun.
        assert_eq!(
            router.decide_ahead("who invented the telephone"),
            Some(Route::Simple)
        );
        assert_eq!(asked(), 0);
        assert!(!router.confirm_ahead("other words"));
        assert_eq!(asked(), 0, "asked about words not guessed");
        // The model says context where the guess was simple: what was
        // begun on the guess is not the turn's.
        assert!(router.confirm_ahead("who invented the telephone"));
        assert_eq!(asked(), 1);
        // Known now: the model's route, not asked again.
        assert_eq!(
            router.decide_ahead("who invented the telephone"),
            Some(Route::Context)
        );
        assert!(!router.confirm_ahead("who invented the telephone"));
        assert_eq!(asked(), 1);
        let d = router.decide("who invented the telephone", &CancelToken::new());
        assert_eq!((d.route, d.by), (Route::Context, DecidedBy::Llm));
        assert_eq!(asked(), 1, "the turn asked again");
        // Other words are asked about.
        router.decide("who painted the mona lisa", &CancelToken::new());
        assert_eq!(asked(), 2);
        // A sure classifier needs no model, ahead or not.
        let sure = Router::new(
            &[],
            Some(Arc::new(Fixed(Some(("persona".into(), 0.9))))),
            0.65,
            Some((remote.clone(), "m".into())),
        );
        assert_eq!(
            sure.decide_ahead("talk like a pirate"),
            Some(Route::Persona)
        );
        assert_eq!(asked(), 2);
        // A model on this device is not asked ahead: the route is unknown.
        let local = Arc::new(Counting {
            asked: Default::default(),
            here: true,
            fails: false,
        });
        let router = Router::new(&[], unsure(), 0.65, Some((local.clone(), "m".into())));
        assert_eq!(router.decide_ahead("who invented the telephone"), None);
        assert_eq!(local.asked.load(std::sync::atomic::Ordering::SeqCst), 0);
    }
}
