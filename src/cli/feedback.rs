//! `earshot feedback TURN not_helpful|error [NOTE…]`.

use std::path::Path;

use anyhow::{anyhow, Result};

use crate::review::{add_feedback, FeedbackKind};

#[derive(Debug, clap::Args)]
pub struct FeedbackArgs {
    /// The turn id (from `earshot log`).
    pub turn: i64,
    /// not_helpful (a UX problem) or error (wrong information: priority review).
    pub kind: String,
    /// An optional note.
    pub note: Vec<String>,
}

pub fn run(config_path: Option<&Path>, args: FeedbackArgs) -> Result<bool> {
    let config = super::load_config(config_path)?.config;
    let store = crate::store::Store::open(&config.database_path())?;
    let kind = FeedbackKind::parse(&args.kind).ok_or_else(|| {
        anyhow!(
            "feedback kind must be not_helpful or error (got {:?})",
            args.kind
        )
    })?;
    let note = args.note.join(" ");
    let id = add_feedback(&store, args.turn, kind, Some(&note))?;
    println!(
        "Feedback {id} recorded on turn {} as {}{}.",
        args.turn,
        kind.as_str(),
        if kind == FeedbackKind::Error {
            "; it is first in `earshot review queue`"
        } else {
            ""
        }
    );
    Ok(true)
}
