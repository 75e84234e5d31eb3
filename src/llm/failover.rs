//! `[llm] order`: the language models tried in turn (issue 20). The first
//! usable one answers; one that fails before saying a word hands the
//! request to the next (logged at info: the answer is all the user sees).
//! A request with tools that reaches a member that cannot call them goes
//! without its tools and with the no-tools system prompt the composition
//! root gives, so the small model neither invents tool results nor claims
//! a device action.

use std::sync::Arc;

use super::{ChatMessage, ChatModel, ChatRequest, ChatResponse, LlmError, Source};
use crate::cancel::CancelToken;

/// One model in the order.
#[derive(Clone)]
pub struct Member {
    pub source: Source,
    pub model: Arc<dyn ChatModel>,
}

/// The models of `llm.order`, tried in turn.
pub struct Failover {
    members: Vec<Member>,
    no_tools_system: String,
}

impl Failover {
    /// `no_tools_system` replaces the fixed part of the system prompt (all
    /// but its last "Now:" line) when a tool request goes to a member that
    /// cannot use tools.
    pub fn new(members: Vec<Member>, no_tools_system: String) -> Failover {
        Failover {
            members,
            no_tools_system,
        }
    }

    /// Which member would answer now: the first whose files or key are in
    /// place (`doctor` shows it). `None`: none is usable.
    pub fn first_usable(&self) -> Option<Source> {
        self.members
            .iter()
            .find(|m| m.model.check_configured().is_ok())
            .map(|m| m.source)
    }

    /// The members in order.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    fn without_tools(&self, request: &ChatRequest) -> ChatRequest {
        let mut r = request.clone();
        r.tools.clear();
        r.messages
            .retain(|m| m.role != "tool" && m.tool_calls.is_empty());
        if let Some(first) = r.messages.first_mut().filter(|m| m.role == "system") {
            let old = first.content.clone().unwrap_or_default();
            let now = old
                .lines()
                .last()
                .filter(|l| l.starts_with("Now:"))
                .map(|l| format!("\n{l}"))
                .unwrap_or_default();
            *first = ChatMessage::system(format!("{}{now}", self.no_tools_system.trim_end()));
        }
        r
    }
}

impl ChatModel for Failover {
    fn chat(
        &self,
        request: &ChatRequest,
        on_token: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<ChatResponse, LlmError> {
        let mut first_error: Option<(Source, LlmError)> = None;
        for member in &self.members {
            if let Err(e) = member.model.check_configured() {
                tracing::debug!(source = %member.source, error = %e, "language model not usable; skipped");
                if first_error.is_none() {
                    first_error = Some((member.source, e));
                }
                continue;
            }
            let stripped;
            let req = if !request.tools.is_empty() && !member.model.can_use_tools() {
                stripped = self.without_tools(request);
                &stripped
            } else {
                request
            };
            let mut emitted = false;
            let result = member.model.chat(
                req,
                &mut |t| {
                    emitted = true;
                    on_token(t)
                },
                cancel,
            );
            match result {
                Ok(response) => {
                    if let Some((failed, e)) = &first_error {
                        if !matches!(e, LlmError::NotConfigured(_)) {
                            tracing::info!(from = %failed, to = %member.source, model = %response.model, error = %e, "language model failed; answered by the next in llm.order");
                        }
                    }
                    return Ok(response);
                }
                Err(LlmError::Cancelled) => return Err(LlmError::Cancelled),
                // Words already went out: another model would repeat them.
                Err(e) if emitted => return Err(e),
                Err(e) => {
                    tracing::info!(source = %member.source, error = %e, "language model failed; trying the next in llm.order");
                    match &first_error {
                        Some((_, LlmError::NotConfigured(_))) | None => {
                            first_error = Some((member.source, e))
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        match first_error {
            // None could run: say every member's fix.
            Some((_, LlmError::NotConfigured(_))) | None => Err(self
                .check_configured()
                .err()
                .unwrap_or_else(|| LlmError::NotConfigured("Check llm.order.".into()))),
            Some((_, e)) => Err(e),
        }
    }

    fn check_configured(&self) -> Result<(), LlmError> {
        let mut fixes = Vec::new();
        for member in &self.members {
            match member.model.check_configured() {
                Ok(()) => return Ok(()),
                Err(LlmError::NotConfigured(fix)) => fixes.push(fix),
                Err(e) => fixes.push(e.to_string()),
            }
        }
        Err(LlmError::NotConfigured(if fixes.is_empty() {
            "Add \"remote\" or \"local\" to llm.order.".into()
        } else {
            fixes.join(" Or: ")
        }))
    }

    fn can_use_tools(&self) -> bool {
        self.members
            .iter()
            .any(|m| m.model.can_use_tools() && m.model.check_configured().is_ok())
    }

    /// The member that would answer now decides.
    fn computes_here(&self) -> bool {
        self.members
            .iter()
            .find(|m| m.model.check_configured().is_ok())
            .is_some_and(|m| m.model.computes_here())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Fake {
        configured: bool,
        tools: bool,
        reply: Result<&'static str, LlmError>,
        emit_then_fail: bool,
        here: bool,
        seen: Mutex<Vec<ChatRequest>>,
    }

    impl Fake {
        fn new(reply: Result<&'static str, LlmError>) -> Arc<Fake> {
            Arc::new(Fake {
                configured: true,
                tools: true,
                reply,
                emit_then_fail: false,
                here: false,
                seen: Mutex::new(Vec::new()),
            })
        }
    }

    impl ChatModel for Fake {
        fn chat(
            &self,
            request: &ChatRequest,
            on_token: &mut dyn FnMut(&str),
            _cancel: &CancelToken,
        ) -> Result<ChatResponse, LlmError> {
            self.seen.lock().unwrap().push(request.clone());
            if self.emit_then_fail {
                on_token("Half ");
            }
            match &self.reply {
                Ok(text) => {
                    on_token(text);
                    Ok(ChatResponse {
                        content: text.to_string(),
                        model: format!("m-{text}"),
                        ..Default::default()
                    })
                }
                Err(e) => Err(e.clone()),
            }
        }
        fn check_configured(&self) -> Result<(), LlmError> {
            if self.configured {
                Ok(())
            } else {
                Err(LlmError::NotConfigured("Set GROQ_API_KEY.".into()))
            }
        }
        fn can_use_tools(&self) -> bool {
            self.tools
        }
        fn computes_here(&self) -> bool {
            self.here
        }
    }

    fn request(tools: bool) -> ChatRequest {
        ChatRequest {
            model: "big".into(),
            messages: vec![
                ChatMessage::system("Use tools.\nNow: Monday."),
                ChatMessage::user("weather?"),
            ],
            temperature: 0.0,
            max_completion_tokens: 10,
            top_p: 1.0,
            tools: if tools {
                vec![crate::llm::ToolSpec {
                    name: "web_search".into(),
                    description: String::new(),
                    parameters: serde_json::json!({}),
                }]
            } else {
                Vec::new()
            },
            stream: true,
        }
    }

    fn chain(remote: Arc<Fake>, local: Arc<Fake>) -> Failover {
        Failover::new(
            vec![
                Member {
                    source: Source::Remote,
                    model: remote,
                },
                Member {
                    source: Source::Local,
                    model: local,
                },
            ],
            "No tools here.".into(),
        )
    }

    #[test]
    fn the_member_that_would_answer_says_whether_it_computes_here() {
        let on_device = || {
            Arc::new(Fake {
                here: true,
                ..Arc::try_unwrap(Fake::new(Ok("local"))).ok().unwrap()
            })
        };
        assert!(!chain(Fake::new(Ok("remote")), on_device()).computes_here());
        let no_key = Arc::new(Fake {
            configured: false,
            ..Arc::try_unwrap(Fake::new(Ok("remote"))).ok().unwrap()
        });
        assert!(chain(no_key, on_device()).computes_here());
    }

    #[test]
    fn a_failing_remote_hands_over_and_the_answer_names_the_local_model() {
        let remote = Fake::new(Err(LlmError::Unreachable {
            url: "http://x".into(),
            reason: "refused".into(),
        }));
        let local = Fake::new(Ok("local"));
        let c = chain(remote.clone(), local.clone());
        let r = c
            .chat(&request(false), &mut |_| {}, &CancelToken::new())
            .unwrap();
        assert_eq!(r.model, "m-local");
        assert_eq!(remote.seen.lock().unwrap().len(), 1);
    }

    #[test]
    fn an_unconfigured_remote_is_skipped_and_words_already_said_are_not_repeated() {
        let remote = Arc::new(Fake {
            configured: false,
            ..Arc::try_unwrap(Fake::new(Ok("remote"))).ok().unwrap()
        });
        let local = Fake::new(Ok("local"));
        let c = chain(remote.clone(), local.clone());
        assert_eq!(c.first_usable(), Some(Source::Local));
        assert!(c
            .chat(&request(false), &mut |_| {}, &CancelToken::new())
            .is_ok());
        assert!(remote.seen.lock().unwrap().is_empty());

        let half = Arc::new(Fake {
            emit_then_fail: true,
            ..Arc::try_unwrap(Fake::new(Err(LlmError::Timeout)))
                .ok()
                .unwrap()
        });
        let local = Fake::new(Ok("local"));
        let c = chain(half, local.clone());
        assert_eq!(
            c.chat(&request(false), &mut |_| {}, &CancelToken::new()),
            Err(LlmError::Timeout)
        );
        assert!(local.seen.lock().unwrap().is_empty());
    }

    #[test]
    fn tools_are_dropped_for_a_model_that_cannot_call_them() {
        let remote = Arc::new(Fake {
            configured: false,
            ..Arc::try_unwrap(Fake::new(Ok("remote"))).ok().unwrap()
        });
        let local = Arc::new(Fake {
            tools: false,
            ..Arc::try_unwrap(Fake::new(Ok("local"))).ok().unwrap()
        });
        let c = chain(remote, local.clone());
        assert!(!c.can_use_tools());
        c.chat(&request(true), &mut |_| {}, &CancelToken::new())
            .unwrap();
        let seen = local.seen.lock().unwrap();
        assert!(seen[0].tools.is_empty());
        assert_eq!(
            seen[0].messages[0].content.as_deref(),
            Some("No tools here.\nNow: Monday.")
        );
    }

    #[test]
    fn with_neither_usable_the_fixes_of_both_are_said() {
        let none = |fix: &'static str| {
            Arc::new(Fake {
                configured: false,
                reply: Err(LlmError::NotConfigured(fix.into())),
                ..Arc::try_unwrap(Fake::new(Ok(""))).ok().unwrap()
            })
        };
        let c = chain(none("a"), none("b"));
        let e = c.check_configured().unwrap_err();
        assert!(e.user_sentence().contains("Set GROQ_API_KEY."), "{e}");
        assert!(matches!(
            c.chat(&request(false), &mut |_| {}, &CancelToken::new()),
            Err(LlmError::NotConfigured(_))
        ));
    }
}
