//! Conversation summaries (R-VEC write path): the main LLM writes
//! `Title:` / `Overview:` / `Action items:`, stored on the conversation;
//! "title\n\noverview" is embedded and upserted under the stable key
//! (user, conversation). Also the read path's SQL.

use anyhow::Result;
use rusqlite::{params, params_from_iter, OptionalExtension};

use super::{Memory, CONVERSATIONS};
use crate::cancel::CancelToken;
use crate::llm::LlmConfig;
use crate::llm::{ChatMessage, ChatModel, ChatRequest};
use crate::store::vector::{self, VectorHit};
use crate::store::Store;
use crate::tools::search_conversations::ConversationHit;

/// Messages of a conversation shown to the summariser (the latest ones).
const MAX_MESSAGES: usize = 40;
const MAX_MESSAGE_CHARS: usize = 1000;

const SUMMARY_PROMPT: &str = "Summarize this conversation between a user and their voice assistant so it can be found again later. Answer in exactly this format, nothing else:\n\
Title: <a short title, at most 8 words>\n\
Overview: <one or two sentences on what was discussed or decided>\n\
Action items: <things the user still has to do, separated by semicolons, or none>";

/// A parsed summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub title: String,
    pub overview: String,
    pub action_items: Vec<String>,
}

fn first_chars(text: &str, n: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(n) {
        Some((i, _)) => text[..i].to_string(),
        None => text.to_string(),
    }
}

fn label<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let l = line.trim().trim_start_matches(['*', '#', '-', ' ']);
    let lower = l.to_lowercase();
    if !lower.starts_with(name) {
        return None;
    }
    let rest = l.get(name.len()..)?.trim_start_matches(['*', ' ']);
    rest.strip_prefix(':')
        .map(|r| r.trim().trim_start_matches(['*', ' ']).trim())
}

/// Parse the LLM's reply. Defaults when a line is missing: title
/// "Conversation", overview the first 200 characters of the reply (or of
/// `fallback` — the transcript — when the reply is empty).
pub fn parse_summary(reply: &str, fallback: &str) -> Summary {
    let mut title = None;
    let mut overview: Option<String> = None;
    let mut items: Vec<String> = Vec::new();
    let mut in_items = false;
    for line in reply.lines() {
        if let Some(t) = label(line, "title") {
            title = Some(t.trim_matches('"').to_string());
            in_items = false;
        } else if let Some(o) = label(line, "overview") {
            overview = Some(o.to_string());
            in_items = false;
        } else if let Some(a) = label(line, "action items") {
            in_items = true;
            items.extend(a.split(';').map(str::to_string));
        } else if in_items {
            items.push(line.to_string());
        } else if let Some(o) = overview.as_mut() {
            if !line.trim().is_empty() {
                o.push(' ');
                o.push_str(line.trim());
            }
        }
    }
    let items = items
        .into_iter()
        .map(|i| {
            i.trim()
                .trim_start_matches(['-', '*', '•', ' '])
                .trim()
                .to_string()
        })
        .filter(|i| {
            !i.is_empty()
                && !matches!(
                    i.to_lowercase().trim_end_matches('.'),
                    "none" | "n/a" | "no"
                )
        })
        .collect();
    let title = title
        .filter(|t| !t.is_empty())
        .map(|t| first_chars(&t, 200))
        .unwrap_or_else(|| "Conversation".to_string());
    let overview = overview
        .filter(|o| !o.is_empty())
        .map(|o| first_chars(&o, 2000))
        .unwrap_or_else(|| {
            let source = if reply.trim().is_empty() {
                fallback
            } else {
                reply
            };
            first_chars(source, 200)
        });
    Summary {
        title,
        overview,
        action_items: items,
    }
}

/// What a summarize job did.
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryOutcome {
    /// Fewer user turns than the minimum: nothing to do.
    Skipped,
    Indexed(Summary),
    /// The conversation no longer exists.
    Gone,
}

/// Summarise one conversation and upsert its vector.
pub fn summarize(
    memory: &Memory,
    llm: &dyn ChatModel,
    llm_config: &LlmConfig,
    conversation_id: i64,
) -> Result<SummaryOutcome, super::extract::ExtractError> {
    use super::extract::ExtractError;
    let store = memory.store();
    let Some(conversation) = store
        .conversation(conversation_id)
        .map_err(|e| ExtractError::Store(e.into()))?
    else {
        return Ok(SummaryOutcome::Gone);
    };
    let messages = store
        .recent_messages(conversation_id, MAX_MESSAGES)
        .map_err(|e| ExtractError::Store(e.into()))?;
    let all_user_turns = store
        .with_conn(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM messages WHERE conversation_id = ?1 AND role = 'user'",
                [conversation_id],
                |r| r.get::<_, i64>(0),
            )
        })
        .map_err(|e| ExtractError::Store(e.into()))?;
    if (all_user_turns as usize) < memory.config().min_summary_turns {
        return Ok(SummaryOutcome::Skipped);
    }
    let transcript = messages
        .iter()
        .map(|m| format!("{}: {}", m.role, first_chars(&m.content, MAX_MESSAGE_CHARS)))
        .collect::<Vec<_>>()
        .join("\n");
    let request = ChatRequest {
        model: llm_config.model.clone(),
        messages: vec![
            // The date and time last, so action items like "call the
            // dentist tomorrow" can be dated; the fixed prompt stays a prefix.
            ChatMessage::system(format!(
                "{SUMMARY_PROMPT}\n{}",
                crate::device::clock::now_line_system()
            )),
            ChatMessage::user(transcript.clone()),
        ],
        temperature: 0.0,
        max_completion_tokens: llm_config.max_completion_tokens,
        top_p: llm_config.top_p,
        tools: Vec::new(),
        stream: false,
    };
    let reply = llm
        .chat(&request, &mut |_| {}, &CancelToken::new())
        .map_err(ExtractError::Llm)?;
    let summary = parse_summary(&reply.content, &transcript);
    let embedding = match memory.conversation_index() {
        Some(_) => Some(
            memory
                .embed(&[&format!("{}\n\n{}", summary.title, summary.overview)])
                .map_err(ExtractError::Store)?
                .remove(0),
        ),
        None => None,
    };
    let model = memory.model();
    let items = serde_json::to_string(&summary.action_items).unwrap_or_else(|_| "[]".into());
    store
        .with_tx(|tx| {
            let n = tx.execute(
                "UPDATE conversations SET title = ?2, overview = ?3, action_items = ?4 WHERE id = ?1",
                params![conversation_id, summary.title, summary.overview, items],
            )?;
            if n == 1 {
                if let Some(v) = &embedding {
                    vector::put_in(tx, CONVERSATIONS, &conversation.user_id, conversation_id, &model, v)?;
                }
            }
            Ok(())
        })
        .map_err(|e| ExtractError::Store(e.into()))?;
    if let Some(index) = memory.conversation_index() {
        if let Err(e) = index.sync() {
            tracing::warn!(error = %format!("{e:#}"), "conversation index could not catch up; it will on the next search");
        }
        index.flush_if_due();
    }
    Ok(SummaryOutcome::Indexed(summary))
}

/// Embed summaries stored without a current-model vector.
pub fn backfill(memory: &Memory) -> Result<usize> {
    let model = memory.model();
    let store = memory.store();
    let mut done = 0;
    loop {
        let batch: Vec<(i64, String, String, String)> = store.with_conn(|c| {
            let mut stmt = c.prepare(
                "SELECT c.id, c.user_id, c.title, c.overview FROM conversations c
                 WHERE c.title IS NOT NULL AND c.overview IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.collection = 'conversations'
                     AND v.item_id = c.id AND v.model = ?1 AND v.embedding IS NOT NULL)
                 ORDER BY c.id LIMIT 32",
            )?;
            let rows = stmt.query_map([&model], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?;
            rows.collect()
        })?;
        if batch.is_empty() {
            return Ok(done);
        }
        let texts: Vec<String> = batch
            .iter()
            .map(|(_, _, t, o)| format!("{t}\n\n{o}"))
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = memory.embed(&refs)?;
        store.with_tx(|tx| {
            for ((id, user, _, _), v) in batch.iter().zip(&vectors) {
                vector::put_in(tx, CONVERSATIONS, user, *id, &model, v)?;
            }
            Ok(())
        })?;
        done += batch.len();
    }
}

/// Summaries of the hits (still present and owned by the user), best first.
pub fn fetch_hits(
    store: &Store,
    user_id: &str,
    hits: &[VectorHit],
) -> Result<Vec<ConversationHit>> {
    if hits.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders = vec!["?"; hits.len()].join(",");
    let sql = format!(
        "SELECT id, COALESCE(title, ''), COALESCE(overview, ''), updated_at FROM conversations
         WHERE user_id = ? AND id IN ({placeholders})"
    );
    let rows: Vec<(i64, String, String, String)> = store.with_conn(|c| {
        let mut stmt = c.prepare(&sql)?;
        let mut values: Vec<rusqlite::types::Value> = vec![user_id.to_string().into()];
        values.extend(hits.iter().map(|h| rusqlite::types::Value::from(h.item_id)));
        let rows = stmt.query_map(params_from_iter(values), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?;
        rows.collect()
    })?;
    Ok(hits
        .iter()
        .filter_map(|h| {
            rows.iter()
                .find(|r| r.0 == h.item_id)
                .map(|(id, title, overview, updated)| ConversationHit {
                    conversation_id: *id,
                    title: title.clone(),
                    summary: overview.clone(),
                    score: h.score,
                    updated_at: Some(updated.clone()),
                })
        })
        .collect())
}

/// A newer summarize job for the same conversation makes this one redundant.
pub fn superseded(store: &Store, job_id: i64, conversation_id: i64) -> Result<bool> {
    Ok(store
        .with_conn(|c| {
            c.query_row(
                "SELECT 1 FROM jobs WHERE kind = 'summarize' AND id > ?1
                 AND json_extract(payload, '$.conversation_id') = ?2 LIMIT 1",
                params![job_id, conversation_id],
                |_| Ok(()),
            )
            .optional()
        })?
        .is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lines_and_defaults() {
        let s = parse_summary(
            "Title: Trip to Lisbon\nOverview: Planned a weekend in Lisbon.\nIt is in May.\nAction items: book hotel; renew passport",
            "",
        );
        assert_eq!(s.title, "Trip to Lisbon");
        assert_eq!(s.overview, "Planned a weekend in Lisbon. It is in May.");
        assert_eq!(s.action_items, vec!["book hotel", "renew passport"]);
        let s = parse_summary(
            "**Title:** Dentist\n**Overview:** Moved it.\nAction items:\n- call them\n- none",
            "",
        );
        assert_eq!(
            (s.title.as_str(), s.overview.as_str()),
            ("Dentist", "Moved it.")
        );
        assert_eq!(s.action_items, vec!["call them"]);
        let s = parse_summary("Action items: none", "");
        assert_eq!(s.title, "Conversation");
        assert_eq!(s.overview, "Action items: none");
        assert!(s.action_items.is_empty());
        let long = "z".repeat(500);
        let s = parse_summary(&long, "");
        assert_eq!(s.overview.len(), 200);
        let s = parse_summary("", "user: hi\nassistant: hello");
        assert_eq!(s.overview, "user: hi\nassistant: hello");
    }
}
