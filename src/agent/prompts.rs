//! The system prompts of the three paths (R-NODE) and the style rules they
//! share: the device speaks, so answers are short and plain.

/// Style rules shared by every prompt.
pub const STYLE_RULES: &str = "Your answer is spoken aloud by a small voice device.\n\
- Answer in at most 2 or 3 short sentences.\n\
- Plain text only: no markdown, no lists, no asterisks, no emoji, no code.\n\
- Use the recalled memories only when they are directly relevant to the question; keep schedule facts and food or health facts apart.\n\
- If memories conflict, trust the most recent one.\n\
- When the user tells you a new fact about themselves, acknowledge only that fact, briefly.";

/// The simple path: general questions and conversation, no tools.
pub fn simple() -> String {
    format!(
        "You are earshot, a friendly, private voice assistant running on the user's own device.\n\
Answer general questions, explain things and chat naturally.\n{STYLE_RULES}"
    )
}

/// The persona path: the user asked for a style, role or teaching manner.
pub fn persona() -> String {
    format!(
        "You are earshot, a voice assistant that adapts its personality on request.\n\
The user has asked for a particular style, role, personality or way of teaching: adopt it fully \
and stay in it, adapting your tone and explanations to what they asked for.\n{STYLE_RULES}"
    )
}

/// The context path: the tool-calling agent.
pub fn agent(tool_names: &[String]) -> String {
    format!(
        "You are earshot, a voice assistant that can use tools: {}.\n\
Use the fewest tool calls needed and answer as soon as you know enough. \
Never invent tool results; if a tool fails or is unavailable, say so in one sentence.\n{STYLE_RULES}",
        if tool_names.is_empty() {
            "none right now".to_string()
        } else {
            tool_names.join(", ")
        }
    )
}

/// What the device does itself, said after "I can't do that yet" when a
/// request looks like a device command no tool-capable model can carry out.
pub const DEVICE_CAN: &str = "I can set timers, alarms and reminders, keep your to-do list and calendar, remember things you tell me, and answer questions.";

/// The on-device model's prompt for every route when no tool-capable model
/// is usable (issue 20): short, and it says plainly that the model cannot
/// act on the device or look anything up live.
pub fn no_tools() -> String {
    format!(
        "You are earshot, a friendly, private voice assistant on the user's own device.\n\
Answer from what you know. You cannot act on the device and cannot look anything up: \
never say you have set, added, sent, booked or will remind anything. \
If a question needs live information such as news, weather, prices or a web search, \
say plainly that you can't look that up right now.\n{STYLE_RULES}"
    )
}

/// A system prompt with the "Now:" line (see
/// [`crate::device::clock::now_line`]) as its last line: after the fixed
/// instructions, so everything before it is the same from turn to turn.
pub fn with_now(system: String, now_line: &str) -> String {
    format!("{}\n{now_line}", system.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_now_line_is_the_last_line() {
        let p = with_now(
            simple(),
            "Now: Wednesday 2 December 2026, 14:05 CET (UTC+01:00).",
        );
        assert!(p.starts_with(&simple()));
        assert_eq!(
            p.lines().last(),
            Some("Now: Wednesday 2 December 2026, 14:05 CET (UTC+01:00).")
        );
    }

    #[test]
    fn every_prompt_carries_the_style_rules() {
        for p in [
            simple(),
            persona(),
            agent(&["calculator".into()]),
            no_tools(),
        ] {
            assert!(p.contains(STYLE_RULES));
        }
        assert!(
            agent(&["calculator".into(), "web_search".into()]).contains("calculator, web_search")
        );
    }
}
