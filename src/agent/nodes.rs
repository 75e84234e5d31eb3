//! The router graph's nodes: simple, persona, context (R-NODE).

use std::time::Instant;

use super::cleanup::StreamCleaner;
use super::dispatcher::DispatchError;
use super::prompts;
use super::turn::TurnContext;
use crate::events::{Event, EventSink};
use crate::llm::{ChatMessage, ChatRequest, LlmError};
use crate::nlu::router::Route;

/// What a node produced.
#[derive(Debug, Clone, Default)]
pub struct NodeAnswer {
    /// The raw answer (cleaned for speech by the turn).
    pub text: String,
    pub model: String,
    pub route: String,
    pub intent: Option<String>,
    pub actions: Vec<String>,
    pub recommendations: Vec<String>,
}

/// Messages for a main-LLM node: system (its fixed instructions, then the
/// local date and time as its last line, so the fixed part stays a
/// cacheable prefix), history in order, user (memory block + text).
pub fn build_messages(system: String, ctx: &TurnContext<'_>) -> Vec<ChatMessage> {
    let mut messages = Vec::with_capacity(ctx.history.len() + 2);
    let now = crate::device::clock::local((ctx.services.clock)());
    let system = match &ctx.tag_rules {
        Some(rules) => format!("{}\n{rules}", system.trim_end()),
        None => system,
    };
    messages.push(ChatMessage::system(prompts::with_now(
        system,
        &crate::device::clock::now_line(&now),
    )));
    messages.extend(ctx.history.iter().cloned());
    messages.push(ChatMessage::user(ctx.user_message()));
    messages
}

/// The request [`main_llm`] sends with this system prompt.
pub fn main_request(ctx: &TurnContext<'_>, system: String) -> ChatRequest {
    let cfg = &ctx.services.settings.llm;
    ChatRequest {
        model: cfg.model.clone(),
        messages: build_messages(system, ctx),
        temperature: cfg.temperature,
        max_completion_tokens: cfg.max_completion_tokens,
        top_p: cfg.top_p,
        tools: Vec::new(),
        stream: cfg.stream,
    }
}

/// The system prompt [`run`] answers `route` with through [`main_llm`],
/// or `None` when its node answers another way (the agent's tool loop, or
/// a fixed sentence for a model that cannot act). `agent::predict` begins
/// that request before the turn; [`run`] takes its prompts from here too.
pub fn main_llm_system(ctx: &TurnContext<'_>, route: Route) -> Option<String> {
    if without_tools(ctx) {
        if looks_like_device_command(&ctx.text) || needs_live_lookup(&ctx.text) {
            return None;
        }
        return Some(no_tools_system(route));
    }
    match route {
        Route::Simple => Some(prompts::simple()),
        Route::Persona => Some(prompts::persona()),
        Route::Context => None,
    }
}

/// The first request [`run`] sends for `route`: the main model's with
/// [`main_llm_system`], or the agent's first ask on the context route
/// (`tool_loop::first_request`); `None` when the answer is a fixed
/// sentence. `agent::predict` begins it before the turn.
pub fn first_request(ctx: &TurnContext<'_>, route: Route) -> Option<ChatRequest> {
    match main_llm_system(ctx, route) {
        Some(system) => Some(main_request(ctx, system)),
        None if route == Route::Context && !without_tools(ctx) => {
            Some(super::tool_loop::first_request(ctx))
        }
        None => None,
    }
}

/// Only a model that cannot call tools is usable (issue 20).
fn without_tools(ctx: &TurnContext<'_>) -> bool {
    !ctx.services.llm.can_use_tools() && ctx.services.llm.check_configured().is_ok()
}

/// Every route's system prompt for a model that cannot act.
fn no_tools_system(route: Route) -> String {
    match route {
        Route::Persona => format!("{}\n{}", prompts::persona(), NO_ACTIONS),
        Route::Simple | Route::Context => prompts::no_tools(),
    }
}

/// Stream an answer from the main LLM with the given system prompt.
pub fn main_llm(
    ctx: &mut TurnContext<'_>,
    system: String,
    route: Route,
    sink: &mut dyn EventSink,
) -> Result<NodeAnswer, LlmError> {
    let request = main_request(ctx, system);
    let started = Instant::now();
    let mut cleaner = StreamCleaner::new();
    let response = ctx.services.llm.chat(
        &request,
        &mut |token| {
            let shown = cleaner.push(token);
            if !shown.is_empty() {
                sink.emit(&Event::Content { data: shown });
            }
        },
        &ctx.cancel,
    )?;
    if let Some(ms) = response.first_token_ms {
        ctx.record.set_ms("first_token", ms);
    }
    if let Some(ms) = response.begun_early_ms {
        // Sent that long before the turn asked (begun at a pause).
        ctx.record.set_ms("llm_begun_early", ms);
    }
    ctx.record.stage("llm", started);
    Ok(NodeAnswer {
        text: response.content,
        model: if response.model.is_empty() {
            request.model
        } else {
            response.model
        },
        route: route.as_str().into(),
        ..Default::default()
    })
}

/// Run the node for a route.
pub fn run(
    ctx: &mut TurnContext<'_>,
    route: Route,
    sink: &mut dyn EventSink,
) -> Result<NodeAnswer, DispatchError> {
    // Issue 20: with no model that can call tools (only the on-device one),
    // a device command is declined plainly and every route answers with
    // the no-tools prompt.
    if without_tools(ctx) {
        if looks_like_device_command(&ctx.text) {
            ctx.record
                .note("looks like a device command; no tool-capable model is usable");
            let text = format!("I can't do that yet. {}", prompts::DEVICE_CAN);
            sink.emit(&Event::Content { data: text.clone() });
            return Ok(NodeAnswer {
                text,
                model: "none".into(),
                route: route.as_str().into(),
                ..Default::default()
            });
        }
        if let Some(text) = fixed_answer(&ctx.text) {
            ctx.record
                .note("answered with a fixed sentence; no tool-capable model is usable");
            sink.emit(&Event::Content { data: text.into() });
            return Ok(NodeAnswer {
                text: text.into(),
                model: "none".into(),
                route: route.as_str().into(),
                ..Default::default()
            });
        }
        if needs_live_lookup(&ctx.text) {
            ctx.record
                .note("needs a live tool (web search); no tool-capable model is usable");
            let text = LIVE_LOOKUP_ANSWER.to_string();
            sink.emit(&Event::Content { data: text.clone() });
            return Ok(NodeAnswer {
                text,
                model: "none".into(),
                route: route.as_str().into(),
                ..Default::default()
            });
        }
        let system = no_tools_system(route);
        if route == Route::Context {
            ctx.record
                .note("context route answered without tools: no tool-capable model is usable");
            ctx.record.node = Some("simple".into());
        }
        return main_llm(ctx, system, route, sink).map_err(|e| sentence(&mut ctx.record, e));
    }
    match (route, main_llm_system(ctx, route)) {
        (Route::Simple | Route::Persona, Some(system)) => {
            main_llm(ctx, system, route, sink).map_err(|e| sentence(&mut ctx.record, e))
        }
        _ => match super::tool_loop::run(ctx, sink) {
            Some(result) => result,
            None => {
                ctx.record
                    .note("context route answered by the simple node: no agent on this build");
                ctx.record.node = Some("simple".into());
                main_llm(ctx, prompts::simple(), route, sink)
                    .map_err(|e| sentence(&mut ctx.record, e))
            }
        },
    }
}

/// Said when a question needs live information and only the on-device
/// model (no tools) can answer.
pub const LIVE_LOOKUP_ANSWER: &str = "I can't look that up right now: live information like that needs web search, which needs an online language model. Set GROQ_API_KEY to turn it on.";

/// A question that only a live tool can answer (news, weather, prices,
/// scores, "search the web"): the small model would invent an answer.
pub fn needs_live_lookup(text: &str) -> bool {
    static LIVE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        crate::small_regex::new(
            r"(?i)\b(?:search\s+(?:the\s+)?(?:web|internet|online)|look\s+(?:it\s+)?up|google|news|headlines?|weather\s+(?:today|tomorrow|tonight|like|in|outside|this|now|for|be)|(?:the|today'?s|tomorrow'?s)\s+weather$|(?:will|is)\s+it\s+(?:going\s+to\s+|gonna\s+)?(?:rain|snow|be\s+(?:sunny|cold|hot|warm|windy|wet))|temperature\s+(?:outside|today|tomorrow|tonight)|(?:today'?s|tomorrow'?s)\s+weather|forecast|stock\s+price|share\s+price|exchange\s+rate|bitcoin|(?:latest|current|today'?s|tonight'?s|live)\s+(?:news|scores?|prices?|results?|events?|headlines?|rates?|standings)|score\s+of|who\s+won|traffic|sun\s*(?:set|rise)|(?:does|will)\s+the\s+sun\s+(?:set|rise|come\s+up|go\s+down)|do\s+i\s+need\s+(?:an?\s+|my\s+)?(?:umbrella|coat|jacket|raincoat|brolly|sunscreen|sun\s*cream|gloves|scarf|sunglasses)|(?:dollars?|euros?|pounds?|yen|yuan|rupees?|pesos?|francs?|kronor|krona|won|rubles?|bucks|quid)\s+(?:in|to|into)\s+(?:dollars?|euros?|pounds?|yen|yuan|rupees?|pesos?|francs?|kronor|krona|won|rubles?|bucks|quid|us\s+dollars|sterling))\b",
        )
        .expect("static regex")
    });
    LIVE.is_match(text.trim().trim_end_matches(['?', '.', '!']))
}

/// Said to "who are you?" without a model.
const WHO_I_AM: &str = "I'm earshot, a voice assistant that runs here on this device.";

/// What to say, without a model, to "what can you do?", "who are you?"
/// and "thank you":
/// the on-device model invents capabilities and rambles on thanks, and
/// these have one right answer.
pub fn fixed_answer(text: &str) -> Option<&'static str> {
    static HELP: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        crate::small_regex::new(
            r"(?i)^\s*(?:(?:hey|ok|okay)\s+earshot[,\s]+)?(?:so\s+)?(?:what\s+(?:else\s+)?(?:things\s+)?(?:can|could)\s+you\s+do|what\s+are\s+you\s+able\s+to\s+do|what\s+do\s+you\s+do|how\s+can\s+you\s+help(?:\s+me)?|what\s+can\s+i\s+(?:ask|say\s+to)\s+you|help(?:\s+me)?|what\s+are\s+your\s+(?:skills|features|abilities))(?:\s+(?:for\s+me|here|earshot))?\s*[?.!]*\s*$",
        )
        .expect("static regex")
    });
    static THANKS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        crate::small_regex::new(
            r"(?i)^\s*(?:ok(?:ay)?[,\s]+|great[,\s]+|perfect[,\s]+)?(?:thank\s+you|thanks|thank\s+u|cheers|many\s+thanks)(?:\s+(?:very|so)\s+much|\s+a\s+lot|\s+a\s+bunch)?(?:[,\s]+earshot)?\s*[.!]*\s*$",
        )
        .expect("static regex")
    });
    static WHO: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        crate::small_regex::new(
            r"(?i)^\s*(?:(?:hey|ok|okay)\s+earshot[,\s]+)?(?:who\s+are\s+you|what\s+are\s+you|what'?s\s+your\s+name|what\s+is\s+your\s+name|who\s+am\s+i\s+talking\s+to)\s*[?.!]*\s*$",
        )
        .expect("static regex")
    });
    static HERE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        crate::small_regex::new(
            r"(?i)^\s*(?:(?:hey|ok|okay|hello)\s+earshot[,\s]+)?(?:hello[,\s]+)?(?:are\s+you\s+(?:there|listening|awake|on|working)|can\s+you\s+hear\s+me|do\s+you\s+hear\s+me|is\s+this\s+(?:thing\s+)?(?:on|working)|you\s+there)\s*[?.!]*\s*$",
        )
        .expect("static regex")
    });
    if HERE.is_match(text) {
        Some("Yes, I'm here.")
    } else if WHO.is_match(text) {
        Some(WHO_I_AM)
    } else if HELP.is_match(text) {
        Some(prompts::DEVICE_CAN)
    } else if THANKS.is_match(text) {
        Some("You're welcome.")
    } else {
        None
    }
}

/// Added to the persona prompt for a model that cannot act.
const NO_ACTIONS: &str = "You cannot act on the device or look anything up: never say you have set, added, sent or will remind anything.";

/// An imperative asking the device to do something (set, add, remind,
/// turn on, call, play…) rather than a question: without a model that can
/// call tools the answer is "I can't do that yet", never a claimed action.
pub fn looks_like_device_command(text: &str) -> bool {
    static COMMAND: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        crate::small_regex::new(
            r"(?ix)^\s*(?:(?:hey|ok|okay)\s+earshot[,\s]+)?(?:please\s+|can\s+you\s+|could\s+you\s+|would\s+you\s+|i\s+want\s+you\s+to\s+|go\s+ahead\s+and\s+)?
            (?:turn\s+(?:on|off|up|down)|switch\s+(?:on|off)|set\s+(?:a|an|the|my|up)?\b|remind\s+me|add\b|put\b.*\bon\s+my|call\b|phone\b|text\b|send\b|email\b|message\b|play\b|pause\b|resume\b|skip\b|open\b|close\b|lock\b|unlock\b|dim\b|brighten\b|start\s+(?:a|the|my)\b|stop\s+(?:the|my)\b|book\b|order\b|buy\b|schedule\b|reschedule\b|change\s+(?:my|the)\s+(?:alarm|timer|reminder|appointment|meeting)|move\s+my\b|cancel\b|delete\b|remove\b|create\b|wake\s+me|navigate\b|record\b|mute\b|unmute\b|volume\b|increase\b|decrease\b|raise\b|lower\b|water\s+the|feed\s+the)",
        )
        .expect("static regex")
    });
    COMMAND.is_match(text)
}

/// Keep the technical error in the turn log; the error says the sentence.
fn sentence(record: &mut crate::telemetry::TurnRecord, e: LlmError) -> DispatchError {
    record.error = Some(e.to_string());
    DispatchError::Llm(e)
}

#[cfg(test)]
mod tests {
    use super::looks_like_device_command as cmd;

    #[test]
    fn help_and_thanks_have_fixed_answers_and_other_speech_does_not() {
        use super::fixed_answer;
        for help in [
            "What can you do?",
            "what else can you do",
            "Help.",
            "how can you help me",
        ] {
            assert_eq!(
                fixed_answer(help),
                Some(super::prompts::DEVICE_CAN),
                "{help}"
            );
        }
        assert_eq!(fixed_answer("Who are you?"), Some(super::WHO_I_AM));
        assert_eq!(fixed_answer("who are you voting for"), None);
        assert_eq!(fixed_answer("Are you there?"), Some("Yes, I'm here."));
        assert_eq!(fixed_answer("can you hear me"), Some("Yes, I'm here."));
        assert_eq!(fixed_answer("can you hear me sing"), None);
        for thanks in ["Thank you.", "thanks a lot", "OK, thank you very much!"] {
            assert_eq!(fixed_answer(thanks), Some("You're welcome."), "{thanks}");
        }
        for other in [
            "what can you do about the noise",
            "help me write a poem",
            "thank you for the music is a song",
            "what can dogs do",
        ] {
            assert_eq!(fixed_answer(other), None, "{other}");
        }
        assert!(super::needs_live_lookup("What's the weather?"));
        assert!(super::needs_live_lookup("is it going to rain"));
        assert!(!super::needs_live_lookup("how does the weather work"));
        // The weather asked without the word, and prices of the day: the
        // small model answered "No, you do not need an umbrella" and
        // "20 dollars is equivalent to €1.20".
        for live in [
            "Do I need an umbrella today?",
            "do i need a coat",
            "how much is 20 dollars in euros",
            "convert 50 pounds to dollars",
            "what's a hundred yen in us dollars",
            "what time does the sun set",
            "when is sunrise tomorrow",
        ] {
            assert!(super::needs_live_lookup(live), "{live}");
        }
        for not_live in [
            "do i need a passport for france",
            "how many dollars are in a pound of gold",
            "why is the dollar called a buck",
        ] {
            assert!(!super::needs_live_lookup(not_live), "{not_live}");
        }
    }

    #[test]
    fn device_commands_are_told_apart_from_open_questions() {
        for c in [
            "turn on the kitchen lights",
            "Please set the thermostat to 20 degrees",
            "can you call mum",
            "send a message to Alex",
            "play some jazz",
            "add eggs to my shopping list",
            "remind me to water the plants",
            "lock the front door",
            "order a pizza",
        ] {
            assert!(cmd(c), "{c}");
        }
        for q in [
            "what is the capital of France",
            "why is the sky blue",
            "how do I set up a fish tank",
            "tell me a joke",
            "who wrote Pride and Prejudice",
            "is it healthy to drink coffee every day",
            "explain how a rainbow forms",
        ] {
            assert!(!cmd(q), "{q}");
        }
    }

    #[test]
    fn live_questions_are_told_apart_from_what_a_model_knows() {
        use super::needs_live_lookup as live;
        for q in [
            "what's the weather like tomorrow",
            "search the web for cheap flights",
            "what are today's headlines",
            "who won the match last night",
            "what's the latest news about Mars",
        ] {
            assert!(live(q), "{q}");
        }
        for q in [
            "why is the sky blue",
            "what is the capital of France",
            "how do bees make honey",
        ] {
            assert!(!live(q), "{q}");
        }
    }
}
