//! `earshot history [ID] [--json]`: past conversations, or one in full.

use std::path::Path;

use anyhow::{anyhow, Result};
use serde_json::json;

pub fn run(config: Option<&Path>, id: Option<i64>, json: bool) -> Result<()> {
    let loaded = super::load_config(config)?;
    let store = crate::store::Store::open(&loaded.config.database_path())?;
    match id {
        None => {
            let list = store.conversations(&loaded.config.user_id, 100)?;
            if json {
                super::print_json(&serde_json::to_value(&list)?);
            } else if list.is_empty() {
                println!("No conversations yet. Start one with: earshot chat \"hello\"");
            } else {
                for c in list {
                    println!(
                        "{:>5}  {}  {:>3} messages  {}",
                        c.id,
                        c.updated_at,
                        c.messages,
                        listed_as(&c)
                    );
                }
            }
        }
        Some(id) => {
            let conversation = store.conversation(id)?.ok_or_else(|| {
                anyhow!("conversation {id} does not exist; `earshot history` lists them")
            })?;
            let messages = store.messages(id)?;
            if json {
                super::print_json(&json!({"conversation": conversation, "messages": messages}));
            } else {
                println!(
                    "conversation {id}: {} · mode {}",
                    listed_as(&conversation),
                    match &conversation.mode {
                        Some(mode) => mode.clone(),
                        None => format!("{} (the default)", loaded.config.mode.name()),
                    }
                );
                for m in messages {
                    println!("[{}] {}: {}", m.timestamp, m.role, m.content);
                }
            }
        }
    }
    Ok(())
}

/// Its title once the summary exists; before that the first words of its
/// first message, quoted; "(untitled)" for a conversation with none.
fn listed_as(c: &crate::store::Conversation) -> String {
    match (&c.title, &c.preview) {
        (Some(title), _) => title.clone(),
        (None, Some(preview)) => format!("\"{preview}\""),
        (None, None) => "(untitled)".into(),
    }
}
