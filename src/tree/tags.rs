//! Action tags an LLM may write in its answer (R-TREE `execute_tags`):
//! `[[todo.add: milk]]`, `[[volume.up]]`. They are applied as device
//! actions and removed from what is stored and spoken.

use std::sync::OnceLock;

use regex::Regex;

/// One tag found in an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub name: String,
    pub arg: String,
}

fn tag_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"\[\[\s*([A-Za-z_]+(?:\.[A-Za-z_]+)*)\s*(?::\s*([^\[\]]*?))?\s*\]\]")
            .expect("static regex")
    })
}

/// The answer without its tags (spaces tidied) and the tags in order.
pub fn extract(text: &str) -> (String, Vec<Tag>) {
    let tags = tag_re()
        .captures_iter(text)
        .map(|c| Tag {
            name: c[1].to_ascii_lowercase(),
            arg: c
                .get(2)
                .map(|m| m.as_str().trim().to_string())
                .unwrap_or_default(),
        })
        .collect();
    let stripped = tag_re().replace_all(text, " ");
    let clean = stripped
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" .", ".")
        .replace(" ,", ",");
    (clean.trim().to_string(), tags)
}

/// The device action a tag runs and the argument name it fills.
pub fn action_for(tag: &str) -> Option<(&'static str, &'static str)> {
    Some(match tag {
        "todo.add" => ("todo_add", "item"),
        "todo.complete" => ("todo_complete", "item"),
        "todo.delete" => ("todo_delete_request", "item"),
        "memory.remember" => ("memory_remember", "fact"),
        "volume.up" => ("volume_up", "level"),
        "volume.down" => ("volume_down", "level"),
        "dnd.on" => ("dnd_on", ""),
        "dnd.off" => ("dnd_off", ""),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_and_strips() {
        let (clean, tags) = extract("Sure, I added it [[todo.add: buy milk]]. [[volume.up]] Done!");
        assert_eq!(clean, "Sure, I added it. Done!");
        assert_eq!(
            tags,
            vec![
                Tag {
                    name: "todo.add".into(),
                    arg: "buy milk".into()
                },
                Tag {
                    name: "volume.up".into(),
                    arg: String::new()
                },
            ]
        );
        let (clean, tags) = extract("No tags [here] at all.");
        assert_eq!((clean.as_str(), tags.len()), ("No tags [here] at all.", 0));
        assert_eq!(action_for("todo.add"), Some(("todo_add", "item")));
        assert_eq!(action_for("rm.rf"), None);
    }
}
