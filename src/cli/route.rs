//! `earshot route "TEXT" [--json]`: how the router would decide.

use std::path::Path;

use anyhow::Result;

use crate::cancel::CancelToken;

pub fn run(config: Option<&Path>, text: &str, json: bool) -> Result<()> {
    let services = super::services(config)?;
    let decision = services.router.decide(text, &CancelToken::new());
    if json {
        super::print_json(&serde_json::to_value(&decision)?);
    } else {
        let conf = decision
            .confidence
            .map(|c| format!(" ({c:.2})"))
            .unwrap_or_default();
        println!(
            "{} by {}{conf}",
            decision.route.as_str(),
            serde_json::to_value(decision.by)?
                .as_str()
                .unwrap_or_default()
        );
        if let Some(note) = decision.note {
            eprintln!("note: {note}");
        }
    }
    Ok(())
}
