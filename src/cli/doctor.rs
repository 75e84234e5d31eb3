//! `earshot doctor [--json]`: every part of the device checked, one line
//! each with its fix. The probes live in the library
//! ([`crate::app::doctor`]); this file renders them.

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::app::doctor::{checks, Status};

pub use crate::app::doctor::{Check, PINNED_MODELS};

/// Run every check and print the report. Returns whether nothing failed.
pub fn run(config: Option<&Path>, json_out: bool) -> Result<bool> {
    let loaded = super::load_config(config)?;
    let checks = checks(&loaded);
    let ok = !checks.iter().any(|c| c.status == Status::Fail);
    if json_out {
        super::print_json(&json!({ "checks": checks, "ok": ok }));
    } else {
        for c in &checks {
            println!("{:<4}  {:<36} {}", c.status.label(), c.name, c.detail);
            if !c.fix.is_empty() {
                println!("      {:<36} fix: {}", "", c.fix);
            }
        }
        let (warn, fail) = (
            checks.iter().filter(|c| c.status == Status::Warn).count(),
            checks.iter().filter(|c| c.status == Status::Fail).count(),
        );
        println!("{} checks: {fail} failed, {warn} warnings", checks.len());
    }
    Ok(ok)
}
