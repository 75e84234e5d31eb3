//! A language-model request begun before the turn asks for it (issue 21).
//!
//! An open question keeps the long hang-over (a pause after "What's the
//! weather" may be followed by "in Paris"), but its words are known
//! earlier: the voice loop transcribes them at the first short pause. The
//! request the turn would send for those words can then start while the
//! hang-over runs out, so the model's first sentence is on its way (or
//! here) when the turn asks.
//!
//! [`Speculative`] wraps the device's model. [`Speculative::begin`] starts
//! one request in the background ("a flight") and keeps what streams in;
//! the turn's own [`ChatModel::chat`] with *the same request* (same model,
//! messages and settings, compared as the JSON sent) adopts the flight:
//! it replays what already arrived and follows the rest. Any other
//! request goes to the model as before, and leaves the flight alone (the
//! memory worker's extraction is not the turn). A flight nobody adopts is
//! cancelled when the next one begins, when the voice loop says the turn
//! is about other words ([`Speculative::keep_only`]), or after
//! [`UNCLAIMED_LIMIT`]. Only the request is speculative: a reply with
//! tool calls is returned to the turn, which runs them as it would have.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{ChatModel, ChatRequest, ChatResponse, LlmError};
use crate::cancel::CancelToken;

/// A flight not adopted within this long is cancelled: the turn it was
/// for asked something else, or never came.
pub const UNCLAIMED_LIMIT: Duration = Duration::from_secs(8);

/// The device's model, able to start the turn's request early.
pub struct Speculative {
    inner: Arc<dyn ChatModel>,
    current: Mutex<Option<Arc<Flight>>>,
    /// Moves on at every [`Speculative::abandon`] and
    /// [`Speculative::keep_only`]: words heard before then are too late
    /// to begin a request (their turn may already have sent its own).
    epoch: std::sync::atomic::AtomicU64,
}

/// One request under way in the background.
struct Flight {
    /// The request as sent (`ChatRequest::to_json`), to match the turn's.
    key: String,
    /// The user's words it answers (for [`Speculative::keep_only`]).
    words: String,
    started: Instant,
    cancel: CancelToken,
    state: Mutex<FlightState>,
    changed: Condvar,
}

#[derive(Default)]
struct FlightState {
    tokens: Vec<String>,
    done: Option<Result<ChatResponse, LlmError>>,
    claimed: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Flight {
    fn unclaimed(&self) -> bool {
        !lock(&self.state).claimed
    }
}

/// What [`Speculative::begin`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begun {
    /// A new flight started.
    Started,
    /// The same request is already under way.
    AlreadyFlying,
    /// The model is not usable (no key, no server): nothing was sent.
    NotConfigured,
    /// No thread could be started.
    Failed,
    /// The words' turn began (or the speech went on) since they were
    /// heard: nothing was sent.
    TooLate,
}

impl Speculative {
    pub fn new(inner: Arc<dyn ChatModel>) -> Self {
        Self {
            inner,
            current: Mutex::new(None),
            epoch: Default::default(),
        }
    }

    /// Where things stand now, to pass to [`Speculative::begin`] for words
    /// just heard.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn move_on(&self) {
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Start `request` (for the user's `words`, heard at `epoch`) in the
    /// background. A different flight nobody adopted is cancelled first.
    pub fn begin(&self, request: ChatRequest, words: &str, epoch: u64) -> Begun {
        if self.inner.check_configured().is_err() {
            return Begun::NotConfigured;
        }
        let key = request.to_json().to_string();
        let mut current = lock(&self.current);
        if self.epoch() != epoch {
            return Begun::TooLate;
        }
        if let Some(flight) = current.as_ref() {
            if flight.key == key && flight.unclaimed() {
                return Begun::AlreadyFlying;
            }
            if flight.unclaimed() {
                flight.cancel.cancel();
            }
        }
        let flight = Arc::new(Flight {
            key,
            words: words.trim().to_string(),
            started: Instant::now(),
            cancel: CancelToken::new(),
            state: Mutex::new(FlightState::default()),
            changed: Condvar::new(),
        });
        let inner = self.inner.clone();
        let running = flight.clone();
        let spawned = std::thread::Builder::new()
            .name("llm-speculation".into())
            .spawn(move || {
                let f = &running;
                let result = inner.chat(
                    &request,
                    &mut |token| {
                        let mut state = lock(&f.state);
                        state.tokens.push(token.to_string());
                        if !state.claimed && f.started.elapsed() > UNCLAIMED_LIMIT {
                            f.cancel.cancel();
                        }
                        drop(state);
                        f.changed.notify_all();
                    },
                    &f.cancel,
                );
                lock(&f.state).done = Some(result);
                f.changed.notify_all();
            });
        match spawned {
            Ok(_) => {
                *current = Some(flight);
                Begun::Started
            }
            Err(e) => {
                tracing::debug!("could not start a speculative request: {e}");
                Begun::Failed
            }
        }
    }

    /// Cancel a flight nobody adopted (speech goes on: the next pause's
    /// look or the utterance's own transcription is about to run, and an
    /// on-device model must not compute beside it).
    pub fn abandon(&self) {
        let mut current = lock(&self.current);
        self.move_on();
        if current.as_ref().is_some_and(|f| f.unclaimed()) {
            if let Some(flight) = current.take() {
                flight.cancel.cancel();
            }
        }
    }

    /// The turn is about `words`: a flight for other words nobody adopted
    /// is cancelled (the speech went on after the pause it was begun at).
    pub fn keep_only(&self, words: &str) {
        let mut current = lock(&self.current);
        self.move_on();
        if let Some(flight) = current.as_ref() {
            if flight.unclaimed() && flight.words != words.trim() {
                flight.cancel.cancel();
                *current = None;
            }
        }
    }

    /// What of the flight's answer to `words` has arrived (whole tokens),
    /// once `enough` says so of it or the answer is complete; `None` if
    /// there is no such flight, it failed, or `wait` passed. For
    /// synthesising the first sentence before the turn asks.
    pub fn first_text(
        &self,
        words: &str,
        enough: &dyn Fn(&str) -> bool,
        wait: Duration,
    ) -> Option<String> {
        let flight = lock(&self.current)
            .as_ref()
            .filter(|f| f.words == words.trim())
            .cloned()?;
        let deadline = Instant::now() + wait;
        let mut state = lock(&flight.state);
        loop {
            let text: String = state.tokens.concat();
            match &state.done {
                Some(Ok(_)) => return Some(text),
                Some(Err(_)) => return None,
                None if enough(&text) => return Some(text),
                None => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || flight.cancel.is_cancelled() {
                return None;
            }
            state = flight
                .changed
                .wait_timeout(state, left)
                .map(|(s, _)| s)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Take the flight for exactly this request, if one is under way and
    /// not yet adopted.
    fn adopt(&self, request: &ChatRequest) -> Option<Arc<Flight>> {
        let key = request.to_json().to_string();
        let mut current = lock(&self.current);
        if let Some(other) = current.as_ref().filter(|f| f.key != key && f.unclaimed()) {
            // Where the two requests part, to tell a speculation that
            // could not have matched (other words) from one that should.
            let same = other
                .key
                .bytes()
                .zip(key.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            tracing::debug!(
                parted_at = same,
                begun_len = other.key.len(),
                turn_len = key.len(),
                begun = %other.key.get(same.saturating_sub(40)..(same + 80).min(other.key.len())).unwrap_or(""),
                turn = %key.get(same.saturating_sub(40)..(same + 80).min(key.len())).unwrap_or(""),
                "the request begun early is not the turn's"
            );
        }
        let flight = current.as_ref().filter(|f| f.key == key)?.clone();
        {
            let mut state = lock(&flight.state);
            if state.claimed || flight.cancel.is_cancelled() {
                return None;
            }
            if matches!(state.done, Some(Err(_))) {
                // It failed before the turn asked: the turn sends its own
                // (a blip then costs nothing; a lasting failure repeats).
                drop(state);
                *current = None;
                return None;
            }
            state.claimed = true;
        }
        *current = None;
        Some(flight)
    }

    /// Follow an adopted flight to its end, passing its tokens on.
    fn follow(
        flight: &Flight,
        on_token: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<ChatResponse, LlmError> {
        let adopted = Instant::now();
        let begun_early_ms = adopted.duration_since(flight.started).as_secs_f64() * 1000.0;
        let mut first_token_ms = None;
        let mut sent = 0;
        let mut state = lock(&flight.state);
        loop {
            let fresh: Vec<String> = state.tokens[sent..].to_vec();
            sent = state.tokens.len();
            let done = state.done.clone();
            if !fresh.is_empty() || done.is_some() {
                drop(state);
                for token in &fresh {
                    if first_token_ms.is_none() && !token.is_empty() {
                        first_token_ms = Some(adopted.elapsed().as_secs_f64() * 1000.0);
                    }
                    on_token(token);
                }
                if let Some(done) = done {
                    return done.map(|mut response| {
                        // Counted from when the turn asked, as for a request
                        // it sent itself.
                        response.first_token_ms = first_token_ms;
                        response.begun_early_ms = Some(begun_early_ms);
                        response
                    });
                }
                state = lock(&flight.state);
                continue;
            }
            if cancel.is_cancelled() {
                flight.cancel.cancel();
                return Err(LlmError::Cancelled);
            }
            state = flight
                .changed
                .wait_timeout(state, Duration::from_millis(50))
                .map(|(s, _)| s)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

impl ChatModel for Speculative {
    fn chat(
        &self,
        request: &ChatRequest,
        on_token: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<ChatResponse, LlmError> {
        match self.adopt(request) {
            Some(flight) => {
                tracing::debug!(
                    begun_ms_ago = flight.started.elapsed().as_millis() as u64,
                    "the turn's request was begun early; following it"
                );
                Self::follow(&flight, on_token, cancel)
            }
            None => self.inner.chat(request, on_token, cancel),
        }
    }

    fn check_configured(&self) -> Result<(), LlmError> {
        self.inner.check_configured()
    }

    fn can_use_tools(&self) -> bool {
        self.inner.can_use_tools()
    }

    fn computes_here(&self) -> bool {
        self.inner.computes_here()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatMessage;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Streams "Hello" then " there." after `delay`; counts its calls.
    struct Slow {
        delay: Duration,
        calls: AtomicUsize,
    }

    impl ChatModel for Slow {
        fn chat(
            &self,
            request: &ChatRequest,
            on_token: &mut dyn FnMut(&str),
            cancel: &CancelToken,
        ) -> Result<ChatResponse, LlmError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let started = Instant::now();
            while started.elapsed() < self.delay {
                if cancel.is_cancelled() {
                    return Err(LlmError::Cancelled);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let words = request
                .messages
                .last()
                .and_then(|m| m.content.clone())
                .unwrap_or_default();
            let answer = format!("Hello. You said {words}.");
            for part in answer.split_inclusive(' ') {
                on_token(part);
            }
            Ok(ChatResponse {
                content: answer,
                model: "slow".into(),
                first_token_ms: Some(1.0),
                ..Default::default()
            })
        }
    }

    fn request(text: &str) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::system("s"), ChatMessage::user(text)],
            temperature: 0.5,
            max_completion_tokens: 100,
            top_p: 1.0,
            tools: Vec::new(),
            stream: true,
        }
    }

    fn model(delay_ms: u64) -> (Arc<Slow>, Speculative) {
        let slow = Arc::new(Slow {
            delay: Duration::from_millis(delay_ms),
            calls: AtomicUsize::new(0),
        });
        (slow.clone(), Speculative::new(slow))
    }

    #[test]
    fn the_same_request_adopts_the_flight_and_gets_every_token() {
        let (slow, spec) = model(150);
        assert_eq!(
            spec.begin(request("why"), "why", spec.epoch()),
            Begun::Started
        );
        assert_eq!(
            spec.begin(request("why"), "why", spec.epoch()),
            Begun::AlreadyFlying
        );
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        let mut streamed = String::new();
        let reply = spec
            .chat(
                &request("why"),
                &mut |t| streamed.push_str(t),
                &CancelToken::new(),
            )
            .expect("answer");
        assert_eq!(streamed, "Hello. You said why.");
        assert_eq!(reply.content, streamed);
        assert_eq!(slow.calls.load(Ordering::SeqCst), 1, "one request, not two");
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "it was already here"
        );
        // Adopted once: the next identical request is sent anew.
        spec.chat(&request("why"), &mut |_| {}, &CancelToken::new())
            .expect("answer");
        assert_eq!(slow.calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn another_request_leaves_the_flight_and_other_words_cancel_it() {
        let (slow, spec) = model(100);
        spec.begin(request("why"), "why", spec.epoch());
        // The memory worker's request: sent as it is, the flight kept.
        let reply = spec
            .chat(&request("extract"), &mut |_| {}, &CancelToken::new())
            .expect("answer");
        assert_eq!(reply.content, "Hello. You said extract.");
        assert_eq!(
            spec.first_text("why", &|t| t.ends_with('.'), Duration::from_secs(2))
                .as_deref(),
            Some("Hello. You said why.")
        );
        // Abandoned (a look at the next pause is about to run), begun again.
        spec.abandon();
        assert_eq!(
            spec.first_text("why", &|_| true, Duration::from_millis(50)),
            None
        );
        assert_eq!(
            spec.begin(request("why"), "why", spec.epoch()),
            Begun::Started
        );
        // The speech went on: the turn is about other words.
        spec.keep_only("why is the sky blue");
        assert_eq!(
            spec.first_text("why", &|_| true, Duration::from_millis(50)),
            None
        );
        spec.chat(&request("why"), &mut |_| {}, &CancelToken::new())
            .expect("answer");
        assert_eq!(
            slow.calls.load(Ordering::SeqCst),
            4,
            "the turn sent its own"
        );
    }

    /// Fails its first request, answers the next.
    struct FailsOnce {
        calls: AtomicUsize,
    }

    impl ChatModel for FailsOnce {
        fn chat(
            &self,
            _: &ChatRequest,
            on_token: &mut dyn FnMut(&str),
            _: &CancelToken,
        ) -> Result<ChatResponse, LlmError> {
            if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(LlmError::Server { status: 503 });
            }
            on_token("Fine.");
            Ok(ChatResponse {
                content: "Fine.".into(),
                ..Default::default()
            })
        }
    }

    #[test]
    fn a_flight_that_failed_before_the_turn_asked_is_not_adopted() {
        let failing = Arc::new(FailsOnce {
            calls: AtomicUsize::new(0),
        });
        let spec = Speculative::new(failing.clone());
        spec.begin(request("why"), "why", spec.epoch());
        // Returns once the flight ended (in failure: nothing to say).
        assert_eq!(
            spec.first_text("why", &|_| false, Duration::from_secs(5)),
            None
        );
        assert_eq!(failing.calls.load(Ordering::SeqCst), 1);
        let reply = spec
            .chat(&request("why"), &mut |_| {}, &CancelToken::new())
            .expect("the turn's own request answers");
        assert_eq!(reply.content, "Fine.");
        assert_eq!(reply.begun_early_ms, None);
        assert_eq!(failing.calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn words_whose_turn_has_begun_begin_nothing() {
        let (slow, spec) = model(10);
        let heard = spec.epoch();
        spec.keep_only("why");
        assert_eq!(spec.begin(request("why"), "why", heard), Begun::TooLate);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(slow.calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_cancelled_turn_cancels_the_flight_it_adopted() {
        let (_, spec) = model(2_000);
        spec.begin(request("why"), "why", spec.epoch());
        let cancel = CancelToken::new();
        let stopper = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            stopper.cancel();
        });
        let started = Instant::now();
        let reply = spec.chat(&request("why"), &mut |_| {}, &cancel);
        assert_eq!(reply, Err(LlmError::Cancelled));
        assert!(started.elapsed() < Duration::from_millis(500));
    }
}
