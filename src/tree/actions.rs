//! What `action` nodes run: small, named device actions with a timeout.
//!
//! An action gets the utterance, its node's `args` (templates already
//! filled), the conversation's phase and state, and answers with a sentence
//! to say, whether it succeeded (→ `on_success` / `on_fail`) and the state
//! it wants changed. Actions never write the conversation's tree state or
//! device settings themselves: they return the change, the interpreter
//! applies it to the walk and the turn saves it in its transaction, so a
//! dry-run, a timed-out action or a turn that is not saved changes nothing.
//!
//! Groups, one file each: [`clock`], [`math`], [`todo`], [`device`],
//! [`memory`], [`timers`].

pub mod announce;
pub mod calendar;
pub mod clock;
pub mod device;
pub mod mail;
pub mod math;
pub mod memory;
pub mod timers;
pub mod todo;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::store::Store;
use crate::tools::todos::{LocalTodos, TodoBackend};

/// What an action may use: the database (device state), the to-do list,
/// memories, and whose data it is.
#[derive(Clone)]
pub struct ActionEnv {
    pub store: Store,
    pub user_id: String,
    /// The device's one to-do backend (local or Notion), the same object
    /// the agent's todo tools use, so a spoken todo and the agent's
    /// `add_todo` land in the same list.
    pub todos: Arc<dyn TodoBackend>,
    /// Long-term memory operations, when the memory module provides them.
    pub memory: Option<Arc<dyn memory::MemoryOps>>,
    /// The device's one timers service (the agent's tools and `earshot
    /// timers` use the same); `None` where there is none (`tree run`
    /// without a device, tests).
    pub timers: Option<crate::timers::Timers>,
    /// The device's calendar (the same one the agent's tools use).
    pub calendar: crate::calendar::Calendar,
    /// Issue 18: the configured mailbox (the agent's email tools read the
    /// same), `None` without `[email]`.
    pub mail: Option<crate::tools::email::Mailbox>,
    /// Issue 22: the speakers of other rooms ("tell the kitchen …"); the
    /// same hub the agent's `announce` tool and the ESPHome hosts use.
    pub announcements: crate::device::announce::Announcements,
    /// Whether the tree answers mail itself: no model that can call tools
    /// is there (else the agent does, with the tools).
    pub mail_by_tree: bool,
}

impl ActionEnv {
    /// The local to-do list in `store`, no memory (tests, `tree run`).
    pub fn local(store: Store, user_id: &str) -> ActionEnv {
        ActionEnv {
            todos: Arc::new(LocalTodos::new(store.clone(), user_id.to_string())),
            calendar: crate::calendar::Calendar::new(&Default::default(), store.clone()),
            store,
            user_id: user_id.to_string(),
            memory: None,
            timers: None,
            mail: None,
            announcements: Default::default(),
            mail_by_tree: true,
        }
    }
}

/// One call of an action.
#[derive(Debug, Clone, Default)]
pub struct ActionCall {
    /// The user's utterance.
    pub text: String,
    /// The node's `args`, templates filled (always an object).
    pub args: Value,
    pub phase: String,
    /// The conversation's tree state (read-only here).
    pub state: Map<String, Value>,
    /// Device settings changed earlier in this walk, not saved yet (they
    /// are saved with the turn): read them through [`ActionCall::device_state`].
    pub device: BTreeMap<String, Option<String>>,
}

impl ActionCall {
    /// A string argument, or the utterance when the argument is absent.
    pub fn arg_or_text(&self, name: &str) -> String {
        match self.args.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => self.text.clone(),
        }
    }

    pub fn arg(&self, name: &str) -> Option<&Value> {
        self.args.get(name)
    }

    /// A device setting as this walk sees it: its own unsaved change, else
    /// the stored value.
    pub fn device_state(
        &self,
        env: &ActionEnv,
        key: &str,
    ) -> Result<Option<String>, crate::store::StoreError> {
        match self.device.get(key) {
            Some(pending) => Ok(pending.clone()),
            None => env.store.device_state(key),
        }
    }
}

/// What an action produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActionOutput {
    /// A sentence to say (may be empty).
    pub say: String,
    /// Which branch: `on_success` or `on_fail`.
    pub ok: bool,
    /// Conversation-state changes (`null` removes the key).
    pub set_state: Map<String, Value>,
    /// A new phase for the conversation.
    pub phase: Option<String>,
    pub recommendations: Vec<String>,
    /// Device-setting changes (`None` removes the key). Actions never write
    /// device state themselves: the turn saves these in its transaction.
    pub device_state: BTreeMap<String, Option<String>>,
}

impl ActionOutput {
    /// Success with a sentence.
    pub fn said(say: impl Into<String>) -> Self {
        Self {
            say: say.into(),
            ok: true,
            ..Default::default()
        }
    }

    /// Failure with a sentence (empty = say nothing, let `on_fail` decide).
    pub fn failed(say: impl Into<String>) -> Self {
        Self {
            say: say.into(),
            ok: false,
            ..Default::default()
        }
    }

    pub fn with_state(mut self, key: &str, value: Value) -> Self {
        self.set_state.insert(key.into(), value);
        self
    }

    pub fn with_phase(mut self, phase: &str) -> Self {
        self.phase = Some(phase.into());
        self
    }

    pub fn with_device(mut self, key: &str, value: impl Into<String>) -> Self {
        self.device_state.insert(key.into(), Some(value.into()));
        self
    }
}

/// Why an action gave no answer. The walk takes the node's `on_fail`,
/// notes the error and says its message, so every message is one sentence
/// for the user. An answer the user should hear as a normal reply ("I
/// couldn't find \"milk\" on your to-do list.") is not an error: it is
/// [`ActionOutput::failed`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ActionError {
    /// No answer within the node's timeout (`tree.action_timeout_ms`); the
    /// action may still finish in the background, its output is dropped.
    #[error("That took too long ({action} gave no answer within {:.0} s), so I stopped waiting.", .after.as_secs_f64())]
    Timeout {
        action: &'static str,
        after: Duration,
    },
    /// The node's `args` lack what the action needs: the tree file is
    /// wrong. `reason` completes "This tree's ACTION node has …".
    #[error("This tree's {action} node has {reason}.")]
    BadArgument {
        action: &'static str,
        name: &'static str,
        reason: String,
    },
    /// Reading or writing the device settings (the `device_state` table)
    /// failed; `0` is the store's one-line error.
    #[error("I couldn't update the device settings: {0}.")]
    DeviceState(String),
    /// The to-do backend (local list or Notion) failed; `0` is its
    /// one-line error.
    #[error("I couldn't use the to-do list: {0}.")]
    Todos(String),
    /// The timers could not be read or saved; `0` is their one-line error.
    #[error("I couldn't use the timers: {0}")]
    Timers(String),
    /// The memory module failed.
    #[error(transparent)]
    Memory(#[from] memory::MemoryOpsError),
    /// The action's thread could not be started (the system is out of
    /// threads or memory).
    #[error("I couldn't start {action}: {reason}.")]
    Spawn {
        action: &'static str,
        reason: String,
    },
    /// The action panicked.
    #[error("Something went wrong inside {action}.")]
    Crashed { action: &'static str },
}

/// One named device action.
pub trait Action: Send + Sync {
    fn name(&self) -> &'static str;
    /// Whether it changes anything stored (todos, device state, memories):
    /// such actions are skipped under dry-run.
    fn changes_state(&self) -> bool;
    /// What `run` would answer, found without changing anything, for a
    /// preview walk ([`crate::tree::WalkInput::preview`]: the voice
    /// prepares the answer while a command's pause completes); `None`
    /// when that can't be known without acting. Only its words matter: a
    /// preview's changes are never applied. An action whose `run` writes
    /// nothing itself (its changes travel in its output, for the turn's
    /// save to write) may simply run.
    fn preview(
        &self,
        _call: &ActionCall,
        _env: &ActionEnv,
    ) -> Option<Result<ActionOutput, ActionError>> {
        None
    }
    /// Run it. An error's message is said to the user and the walk takes
    /// `on_fail`.
    fn run(&self, call: &ActionCall, env: &ActionEnv) -> Result<ActionOutput, ActionError>;
}

/// The actions a tree may name.
#[derive(Clone, Default)]
pub struct ActionRegistry {
    actions: BTreeMap<String, Arc<dyn Action>>,
}

impl ActionRegistry {
    /// Every shipped device action.
    pub fn device() -> Self {
        let mut reg = Self::default();
        let all: Vec<Arc<dyn Action>> = vec![
            Arc::new(clock::TimeNow),
            Arc::new(clock::DateToday),
            Arc::new(math::Calculate),
            Arc::new(todo::TodoAdd),
            Arc::new(todo::TodoList),
            Arc::new(todo::TodoComplete),
            Arc::new(todo::TodoDeleteRequest),
            Arc::new(todo::TodoDeleteConfirm),
            Arc::new(device::Say),
            Arc::new(device::Stop),
            Arc::new(device::Repeat),
            Arc::new(device::DoNotDisturb { on: true }),
            Arc::new(device::DoNotDisturb { on: false }),
            Arc::new(device::Volume { step: 10 }),
            Arc::new(device::Volume { step: -10 }),
            Arc::new(memory::MemoryList),
            Arc::new(memory::MemoryRemember),
            Arc::new(memory::MemoryForget),
            Arc::new(timers::TimerSet),
            Arc::new(timers::AlarmSet),
            Arc::new(timers::ReminderSet),
            Arc::new(timers::TimerList),
            Arc::new(timers::TimerRemaining),
            Arc::new(timers::TimerExtend),
            Arc::new(timers::TimerCancel),
            Arc::new(timers::TimerCancelAllRequest),
            Arc::new(timers::TimerCancelAllConfirm),
            Arc::new(timers::TimerSnooze),
            Arc::new(timers::TimeAnswer),
            Arc::new(calendar::CalendarRead),
            Arc::new(calendar::CalendarWrite),
            Arc::new(mail::MailRead),
            Arc::new(announce::AnnounceRead),
            Arc::new(announce::AnnounceSend),
        ];
        for action in all {
            reg.register(action);
        }
        reg
    }

    pub fn register(&mut self, action: Arc<dyn Action>) {
        self.actions.insert(action.name().to_string(), action);
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Action>> {
        self.actions.get(name).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        self.actions.keys().cloned().collect()
    }
}

/// Run `action` on its own thread, giving up after `timeout` (R-TREE: 5 s).
/// A timed-out action may still finish in the background; its output is
/// dropped, so it cannot change the walk.
pub fn run_bounded(
    action: Arc<dyn Action>,
    call: ActionCall,
    env: ActionEnv,
    timeout: Duration,
) -> Result<ActionOutput, ActionError> {
    let name = action.name();
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name(format!("action-{name}"))
        .spawn(move || {
            let _ = tx.send(action.run(&call, &env));
        })
        .map_err(|e| ActionError::Spawn {
            action: name,
            reason: e.to_string(),
        })?;
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(crossbeam_channel::RecvTimeoutError::Timeout) => Err(ActionError::Timeout {
            action: name,
            after: timeout,
        }),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
            Err(ActionError::Crashed { action: name })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Slow;
    impl Action for Slow {
        fn name(&self) -> &'static str {
            "slow"
        }
        fn changes_state(&self) -> bool {
            false
        }
        fn run(&self, _: &ActionCall, _: &ActionEnv) -> Result<ActionOutput, ActionError> {
            std::thread::sleep(Duration::from_secs(3));
            Ok(ActionOutput::said("late"))
        }
    }

    #[test]
    fn a_slow_action_times_out_with_a_sentence() {
        let dir = tempfile::tempdir().unwrap();
        let env = ActionEnv::local(Store::open_in(dir.path()).unwrap(), "user-1");
        let started = std::time::Instant::now();
        let err = run_bounded(
            Arc::new(Slow),
            ActionCall::default(),
            env,
            Duration::from_millis(100),
        )
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(
            matches!(err, ActionError::Timeout { action: "slow", .. }),
            "{err:?}"
        );
        let said = err.to_string();
        assert!(
            said.contains("took too long") && said.contains("slow"),
            "{said}"
        );
    }

    #[test]
    fn the_device_registry_names_are_unique_and_complete() {
        let names = ActionRegistry::device().names();
        for n in [
            "time_now",
            "date_today",
            "calculate",
            "todo_add",
            "todo_list",
            "todo_complete",
            "todo_delete_request",
            "todo_delete_confirm",
            "say",
            "stop",
            "repeat",
            "dnd_on",
            "dnd_off",
            "volume_up",
            "volume_down",
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
            "timer_cancel_all_request",
            "timer_cancel_all_confirm",
            "timer_snooze",
            "time_answer",
            "calendar_read",
            "calendar_write",
            "mail_read",
            "announce_read",
            "announce_send",
        ] {
            assert!(names.contains(&n.to_string()), "{n} missing from {names:?}");
        }
        assert_eq!(names.len(), 34);
    }
}
