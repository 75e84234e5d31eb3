//! The local to-do list by voice: add, list, complete, and delete with a
//! yes/no confirmation (phase `confirm_delete`).
//!
//! The item is taken from the utterance: "remind me to buy milk" adds "buy
//! milk"; "mark the milk one as done" completes the item matching "milk"
//! (by name or keyword, [`crate::tools::todos::pick`]). Deleting never
//! happens on the first turn: `todo_delete_request` finds the item, stores
//! it as `pending_delete` and moves the conversation to `confirm_delete`;
//! the next turn's yes runs `todo_delete_confirm`.

use serde_json::{json, Value};

use super::{Action, ActionCall, ActionEnv, ActionError, ActionOutput};
use crate::tools::todos::{clean_title, describe_list, TodoBackend, TodoError};

/// The pending title of a deletion of the whole list (the state's `all`
/// flag is what decides).
const WHOLE_LIST_TITLE: &str = "every item on the list";

/// The phase a deletion waits in for the user's yes/no.
pub const CONFIRM_PHASE: &str = "confirm_delete";
/// State key holding the item awaiting confirmation.
pub const PENDING_KEY: &str = "pending_delete";

pub struct TodoAdd;
pub struct TodoList;
pub struct TodoComplete;
pub struct TodoDeleteRequest;
pub struct TodoDeleteConfirm;

fn backend(env: &ActionEnv) -> &dyn TodoBackend {
    env.todos.as_ref()
}

/// "remind me to buy milk" → "buy milk"; empty when the utterance does
/// not fit an add (the gate's frame, [`crate::tree::fit`]).
pub fn item_to_add(text: &str) -> String {
    crate::tree::fit::todo_item("todo_add", text).unwrap_or_default()
}

/// "mark the milk one as done" → "the milk one"; "the eggs are done" →
/// "the eggs"; empty when the utterance does not fit.
pub fn item_to_complete(text: &str) -> String {
    crate::tree::fit::todo_item("todo_complete", text).unwrap_or_default()
}

/// "remove eggs from my list" → "eggs"; empty when it does not fit.
pub fn item_to_delete(text: &str) -> String {
    crate::tree::fit::todo_item("todo_delete", text).unwrap_or_default()
}

fn not_found_or_ambiguous(e: TodoError) -> Result<ActionOutput, ActionError> {
    match e {
        TodoError::NotFound(q) => Ok(ActionOutput::failed(format!(
            "I couldn't find \"{q}\" on your to-do list."
        ))),
        TodoError::Ambiguous(titles) => Ok(ActionOutput::failed(format!(
            "Several items match: {}. Which one do you mean?",
            titles.join("; ")
        ))),
        TodoError::AlreadyDone(t) => Ok(ActionOutput::failed(format!("\"{t}\" is already done."))),
        TodoError::PartOf(t) => Ok(ActionOutput::failed(format!(
            "\"{t}\" is one item on your list, so I left it as it is. Say \"cross off {t}\" when all of it is done."
        ))),
        TodoError::EmptyTitle => Ok(ActionOutput::failed("Which item do you mean?")),
        TodoError::TitleTooLong => Ok(ActionOutput::failed(
            "That's too long for a to-do item; say it in a few words.",
        )),
        TodoError::Backend(e) => Err(ActionError::Todos(e)),
    }
}

impl Action for TodoAdd {
    fn name(&self) -> &'static str {
        "todo_add"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let item = item_arg_or(call, item_to_add);
        if item.is_empty() {
            return Ok(ActionOutput::failed(ASK_ITEM));
        }
        let items = list_items(&item);
        // Every title is checked before any is added, so a bad one adds
        // nothing.
        if let Some(Err(e)) = items.iter().map(|i| clean_title(i)).find(Result::is_err) {
            return not_found_or_ambiguous(e);
        }
        let mut added = Vec::new();
        for one in &items {
            match backend(env).add(one) {
                Ok(item) => added.push(item.title),
                Err(e) if added.is_empty() => return not_found_or_ambiguous(e),
                Err(e) => {
                    let failed = not_found_or_ambiguous(e)?;
                    return Ok(ActionOutput::failed(format!(
                        "I added {} but not the rest: {}",
                        quoted_list(&added),
                        failed.say
                    )));
                }
            }
        }
        Ok(added_reply(&added))
    }
    fn preview(
        &self,
        call: &ActionCall,
        _env: &ActionEnv,
    ) -> Option<Result<ActionOutput, ActionError>> {
        let item = item_arg_or(call, item_to_add);
        if item.is_empty() {
            return Some(Ok(ActionOutput::failed(ASK_ITEM)));
        }
        // The title every backend stores; a backend that then fails
        // answers differently, and the prepared words go unused.
        list_items(&item)
            .iter()
            .map(|i| clean_title(i).ok())
            .collect::<Option<Vec<_>>>()
            .map(|titles| Ok(added_reply(&titles)))
    }
}

/// The items of a list said with commas: "bread, milk and eggs" is three
/// items, as a person writing it down would take it. Without a comma the
/// words are one item ("salt and pepper", "mac and cheese").
pub fn list_items(item: &str) -> Vec<String> {
    if !item.contains(',') {
        return vec![item.trim().to_string()];
    }
    let mut parts: Vec<String> = item
        .split(',')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    // The last one carries the "and": "milk and eggs", ", and eggs".
    if let Some(last) = parts.pop() {
        let last = last
            .strip_prefix("and ")
            .or_else(|| last.strip_prefix("or "))
            .unwrap_or(&last)
            .to_string();
        match last
            .rsplit_once(" and ")
            .or_else(|| last.rsplit_once(" or "))
        {
            Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() => {
                parts.push(a.trim().to_string());
                parts.push(b.trim().to_string());
            }
            _ => parts.push(last),
        }
    }
    if parts.is_empty() {
        vec![item.trim().to_string()]
    } else {
        parts
    }
}

/// "\"bread\"", "\"bread\" and \"milk\"", "\"bread\", \"milk\" and \"eggs\"".
fn quoted_list(titles: &[String]) -> String {
    let quoted: Vec<String> = titles.iter().map(|t| format!("\"{t}\"")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

/// What `todo_add` asks when it heard no item.
const ASK_ITEM: &str = "What should I add to your list?";

fn added_reply(titles: &[String]) -> ActionOutput {
    ActionOutput::said(format!("Added {} to your to-do list.", quoted_list(titles)))
}

impl Action for TodoList {
    fn name(&self) -> &'static str {
        "todo_list"
    }
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        // "Is bread on my list?" is answered yes or no, not with the list.
        if let Some(asked) = crate::tree::fit::todo_item("todo_list", &call.text) {
            return match backend(env).find(&asked) {
                Ok(item) => Ok(ActionOutput::said(format!(
                    "Yes, \"{}\" is on your to-do list.",
                    item.title
                ))),
                Err(TodoError::NotFound(q)) => Ok(ActionOutput::said(format!(
                    "No, \"{q}\" isn't on your to-do list."
                ))),
                Err(TodoError::Ambiguous(titles)) => Ok(ActionOutput::said(format!(
                    "Yes, several items match: {}.",
                    titles.join("; ")
                ))),
                Err(e) => not_found_or_ambiguous(e),
            };
        }
        match backend(env).list(false) {
            Ok(items) => Ok(ActionOutput::said(describe_list(&items))),
            Err(e) => not_found_or_ambiguous(e),
        }
    }
}

/// The node's `item` argument when the tree gives one, else the item
/// parsed out of the utterance.
fn item_arg_or(call: &ActionCall, parse: fn(&str) -> String) -> String {
    match call.arg("item").and_then(Value::as_str) {
        Some(item) => item.trim().to_string(),
        None => parse(&call.text),
    }
}

impl Action for TodoComplete {
    fn name(&self) -> &'static str {
        "todo_complete"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let query = item_arg_or(call, item_to_complete);
        match backend(env).complete(&query) {
            Ok(item) => Ok(ActionOutput::said(format!(
                "Marked \"{}\" as done.",
                item.title
            ))),
            Err(e) => not_found_or_ambiguous(e),
        }
    }
}

impl Action for TodoDeleteRequest {
    fn name(&self) -> &'static str {
        "todo_delete_request"
    }
    /// Only reads the list; the deletion waits for the confirmation.
    fn changes_state(&self) -> bool {
        false
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let query = item_arg_or(call, item_to_delete);
        if query == crate::tree::fit::WHOLE_LIST {
            let n = match backend(env).list(false) {
                Ok(items) => items.len(),
                Err(e) => return not_found_or_ambiguous(e),
            };
            if n == 0 {
                return Ok(ActionOutput::said("Your to-do list is already empty."));
            }
            let what = if n == 1 {
                "the 1 item".to_string()
            } else {
                format!("all {n} items")
            };
            return Ok(ActionOutput::said(format!(
                "Delete {what} on your to-do list? Say yes or no."
            ))
            .with_state(PENDING_KEY, json!({"all": true, "title": WHOLE_LIST_TITLE}))
            .with_phase(CONFIRM_PHASE));
        }
        match backend(env).find(&query) {
            Ok(item) => Ok(ActionOutput::said(format!(
                "Delete \"{}\" from your to-do list? Say yes or no.",
                item.title
            ))
            .with_state(PENDING_KEY, json!({"id": item.id, "title": item.title}))
            .with_phase(CONFIRM_PHASE)),
            Err(e) => not_found_or_ambiguous(e),
        }
    }
}

impl Action for TodoDeleteConfirm {
    fn name(&self) -> &'static str {
        "todo_delete_confirm"
    }
    fn changes_state(&self) -> bool {
        true
    }
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError> {
        let Some(title) = call
            .state
            .get(PENDING_KEY)
            .and_then(|p| p.get("title"))
            .and_then(Value::as_str)
        else {
            return Ok(
                ActionOutput::failed("There's nothing waiting to be deleted.").with_phase("idle"),
            );
        };
        let done = |out: ActionOutput| out.with_state(PENDING_KEY, Value::Null).with_phase("idle");
        let all = call
            .state
            .get(PENDING_KEY)
            .and_then(|p| p.get("all"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if all {
            return match backend(env).clear() {
                Ok(0) => Ok(done(ActionOutput::said(
                    "Your to-do list was already empty.",
                ))),
                Ok(1) => Ok(done(ActionOutput::said("Deleted the 1 item on your list."))),
                Ok(n) => Ok(done(ActionOutput::said(format!(
                    "Deleted all {n} items on your list."
                )))),
                Err(e) => not_found_or_ambiguous(e).map(done),
            };
        }
        match backend(env).delete(title) {
            Ok(item) => Ok(done(ActionOutput::said(format!(
                "Deleted \"{}\".",
                item.title
            )))),
            Err(TodoError::NotFound(_)) => Ok(done(ActionOutput::failed(format!(
                "\"{title}\" is no longer on your list."
            )))),
            Err(e) => not_found_or_ambiguous(e).map(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn items_are_taken_from_speech() {
        assert_eq!(item_to_add("remind me to buy milk"), "buy milk");
        assert_eq!(item_to_add("Add eggs to my shopping list."), "eggs");
        assert_eq!(
            item_to_add("add buy oat milk to my to do list"),
            "buy oat milk"
        );
        assert_eq!(item_to_add("please put call mom on the list"), "call mom");
        assert_eq!(
            item_to_add("I need to call the plumber"),
            "call the plumber"
        );
        assert_eq!(item_to_add("new task water the plants"), "water the plants");
        assert_eq!(item_to_complete("mark buy milk as done"), "buy milk");
        assert_eq!(item_to_complete("check off eggs from my list"), "eggs");
        assert_eq!(item_to_complete("I finished the laundry"), "the laundry");
        assert_eq!(item_to_delete("delete the milk item"), "milk");
        assert_eq!(item_to_delete("remove eggs from my to do list"), "eggs");
        assert_eq!(item_to_delete("take call mom off my list"), "call mom");
    }

    #[test]
    fn a_preview_says_what_adding_would_and_adds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        for text in [
            "Add eggs to my shopping list.",
            "remind me to  call mom.",
            "add",
        ] {
            let call = ActionCall {
                text: text.into(),
                ..Default::default()
            };
            let preview = TodoAdd.preview(&call, &env).unwrap().unwrap();
            assert!(
                backend(&env).list(true).unwrap().is_empty(),
                "{text}: added"
            );
            let other = tempfile::tempdir().unwrap();
            let fresh = ActionEnv::local(Store::open_in(other.path()).unwrap(), "user-1");
            let real = TodoAdd.run(&call, &fresh).unwrap();
            assert_eq!(preview.say, real.say, "{text}");
            assert_eq!(preview.ok, real.ok, "{text}");
        }
    }

    #[test]
    fn delete_asks_first_then_confirms() {
        let dir = tempfile::tempdir().unwrap();
        let env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        let call = |text: &str| ActionCall {
            text: text.into(),
            args: json!({}),
            ..Default::default()
        };
        TodoAdd.run(&call("remind me to buy milk"), &env).unwrap();
        let ask = TodoDeleteRequest
            .run(&call("delete the milk item"), &env)
            .unwrap();
        assert!(ask.ok && ask.say.contains("buy milk"), "{ask:?}");
        assert_eq!(ask.phase.as_deref(), Some(CONFIRM_PHASE));
        assert_eq!(
            backend(&env).list(true).unwrap().len(),
            1,
            "nothing deleted yet"
        );
        let mut confirm = call("yes");
        confirm.state = ask.set_state.clone();
        let done = TodoDeleteConfirm.run(&confirm, &env).unwrap();
        assert!(done.ok && done.say.contains("Deleted"), "{done:?}");
        assert_eq!(done.set_state.get(PENDING_KEY), Some(&Value::Null));
        assert!(backend(&env).list(true).unwrap().is_empty());
        let missing = TodoDeleteRequest
            .run(&call("delete the eggs"), &env)
            .unwrap();
        assert!(!missing.ok && missing.say.contains("couldn't find"));
    }

    #[test]
    fn clearing_the_list_asks_first_then_deletes_every_open_item() {
        let dir = tempfile::tempdir().unwrap();
        let env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        let call = |text: &str| ActionCall {
            text: text.into(),
            args: json!({}),
            ..Default::default()
        };
        for item in ["bread", "eggs", "bread"] {
            TodoAdd
                .run(&call(&format!("add {item} to my shopping list")), &env)
                .unwrap();
        }
        let ask = TodoDeleteRequest
            .run(&call("Clear my shopping list."), &env)
            .unwrap();
        assert_eq!(
            ask.say,
            "Delete all 3 items on your to-do list? Say yes or no."
        );
        assert_eq!(backend(&env).list(true).unwrap().len(), 3, "nothing yet");
        let mut confirm = call("yes");
        confirm.state = ask.set_state.clone();
        let done = TodoDeleteConfirm.run(&confirm, &env).unwrap();
        assert_eq!(done.say, "Deleted all 3 items on your list.");
        assert!(backend(&env).list(true).unwrap().is_empty());
        let empty = TodoDeleteRequest
            .run(&call("delete everything from my list"), &env)
            .unwrap();
        assert_eq!(empty.say, "Your to-do list is already empty.");
        assert!(empty.phase.is_none());
    }

    #[test]
    fn a_list_said_with_commas_adds_each_item() {
        assert_eq!(
            list_items("bread, milk and eggs"),
            ["bread", "milk", "eggs"]
        );
        assert_eq!(
            list_items("bread, milk, and eggs"),
            ["bread", "milk", "eggs"]
        );
        assert_eq!(list_items("salt and pepper"), ["salt and pepper"]);
        assert_eq!(
            list_items("tea, salt and pepper"),
            ["tea", "salt", "pepper"]
        );
        let dir = tempfile::tempdir().unwrap();
        let env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        let call = ActionCall {
            text: "Add bread, milk and eggs to the list.".into(),
            args: json!({}),
            ..Default::default()
        };
        let preview = TodoAdd.preview(&call, &env).unwrap().unwrap();
        let out = TodoAdd.run(&call, &env).unwrap();
        assert_eq!(
            out.say,
            "Added \"bread\", \"milk\" and \"eggs\" to your to-do list."
        );
        assert_eq!(preview.say, out.say);
        let titles: Vec<String> = backend(&env)
            .list(false)
            .unwrap()
            .into_iter()
            .map(|i| i.title)
            .collect();
        assert_eq!(titles, ["bread", "milk", "eggs"]);
    }

    #[test]
    fn whether_an_item_is_on_the_list_is_answered_yes_or_no() {
        let dir = tempfile::tempdir().unwrap();
        let env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        let call = |text: &str| ActionCall {
            text: text.into(),
            args: json!({}),
            ..Default::default()
        };
        TodoAdd
            .run(&call("add bread to my shopping list"), &env)
            .unwrap();
        TodoAdd
            .run(&call("add eggs to my shopping list"), &env)
            .unwrap();
        let yes = TodoList.run(&call("Is bread on my list?"), &env).unwrap();
        assert_eq!(yes.say, "Yes, \"bread\" is on your to-do list.");
        let no = TodoList
            .run(&call("are bananas on the shopping list"), &env)
            .unwrap();
        assert!(no.say.starts_with("No,"), "{no:?}");
        let all = TodoList.run(&call("What's on my list?"), &env).unwrap();
        assert!(
            all.say.contains("bread") && all.say.contains("eggs"),
            "{all:?}"
        );
    }
}
