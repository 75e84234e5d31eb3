//! `earshot calendar list|add|remove|sync`: the device's calendar from the
//! terminal. Times are local with their offset; `list` defaults to the
//! start of today through the next 30 days, recurring events expanded.

use std::path::Path;

use anyhow::{anyhow, Result};
use chrono::{DateTime, Duration, Local, Utc};
use serde_json::json;

use crate::calendar::{self, NewEvent, Occurrence};

/// The `calendar` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum CalendarCommand {
    /// Events in a window (default: today through the next 30 days).
    List {
        /// First day (YYYY-MM-DD, or a date and time).
        #[arg(long, value_name = "DATE")]
        from: Option<String>,
        /// Last day, included (YYYY-MM-DD, or a date and time: excluded).
        #[arg(long, value_name = "DATE")]
        to: Option<String>,
        /// Print a JSON array of {"id","title","start","end","location","uid"}.
        #[arg(long)]
        json: bool,
    },
    /// Add an event: earshot calendar add "Haircut" --start "2026-12-03 11:00" --duration 30m
    Add {
        title: String,
        /// Start, local time: YYYY-MM-DD HH:MM.
        #[arg(long)]
        start: String,
        /// End, local time (or give --duration; default one hour).
        #[arg(long, conflicts_with = "duration")]
        end: Option<String>,
        /// Length: 30m, 1h, 1h30m.
        #[arg(long)]
        duration: Option<String>,
        #[arg(long, default_value = "")]
        location: String,
        #[arg(long)]
        json: bool,
    },
    /// Remove an event (every occurrence) by id, UID or title words.
    Remove {
        key: String,
        #[arg(long)]
        json: bool,
    },
    /// Sync with the CalDAV server now and print what moved.
    Sync {
        #[arg(long)]
        json: bool,
    },
}

fn window(from: Option<&str>, to: Option<&str>) -> Result<(DateTime<Utc>, DateTime<Utc>)> {
    let (default_from, _) = calendar::default_window(Local::now());
    let bare_date = |s: &str| !s.contains([' ', 'T', ':']);
    let from = match from {
        Some(f) => calendar::parse_when(f)?,
        None => default_from,
    };
    let to = match to {
        // A bare date is included: up to its end.
        Some(t) if bare_date(t) => {
            let day = calendar::parse_when(t)?.with_timezone(&Local).date_naive();
            calendar::day_start(day + Duration::days(1))
        }
        Some(t) => calendar::parse_when(t)?,
        None => {
            let day = from.with_timezone(&Local).date_naive();
            calendar::day_start(day + Duration::days(31))
        }
    };
    if to <= from {
        return Err(anyhow!("--to must be after --from"));
    }
    Ok((from, to))
}

fn line(o: &Occurrence) -> String {
    let when = if o.all_day {
        format!("{} (all day)", o.start.format("%a %Y-%m-%d"))
    } else {
        format!(
            "{}–{}",
            o.start.format("%a %Y-%m-%d %H:%M"),
            o.end.format("%H:%M")
        )
    };
    let place = if o.location.is_empty() {
        String::new()
    } else {
        format!(" @ {}", o.location)
    };
    format!("{:>4}  {when}  {}{place}", o.id, o.title)
}

/// Run one subcommand; `Ok(false)` = ran, but the answer is no (a failed
/// sync) for the exit code.
pub fn run(config: Option<&Path>, command: CalendarCommand) -> Result<bool> {
    let loaded = super::load_config(config)?;
    let cal = crate::app::calendar(&loaded.config)?;
    match command {
        CalendarCommand::List { from, to, json } => {
            let (from, to) = window(from.as_deref(), to.as_deref())?;
            let events = cal.list(from, to)?;
            if json {
                super::print_json(&serde_json::to_value(&events)?);
            } else if events.is_empty() {
                println!("No events.");
            } else {
                for o in &events {
                    println!("{}", line(o));
                }
            }
            Ok(true)
        }
        CalendarCommand::Add {
            title,
            start,
            end,
            duration,
            location,
            json,
        } => {
            let start = calendar::parse_when(&start)?;
            let end = match (end, duration) {
                (Some(e), _) => calendar::parse_when(&e)?,
                (None, Some(d)) => start + calendar::parse_length(&d)?,
                (None, None) => start + Duration::hours(1),
            };
            let added = cal.add(&NewEvent {
                title,
                start,
                end,
                location,
            })?;
            if json {
                super::print_json(&serde_json::to_value(&added)?);
            } else {
                println!("Added: {}", line(&added));
            }
            Ok(true)
        }
        CalendarCommand::Remove { key, json } => {
            let (id, title) = cal.remove(&key)?;
            if json {
                super::print_json(&json!({"id": id, "title": title, "removed": true}));
            } else {
                println!("Removed: {title}");
            }
            Ok(true)
        }
        CalendarCommand::Sync { json } => match cal.sync() {
            Ok(report) => {
                let lines = report.lines();
                if json {
                    super::print_json(&json!({"ok": true, "changes": lines}));
                } else if lines.is_empty() {
                    println!("In sync: nothing moved.");
                } else {
                    for l in &lines {
                        println!("{l}");
                    }
                }
                Ok(true)
            }
            Err(e) => {
                let queued = cal.sync_state().map(|s| s.queued).unwrap_or(0);
                if json {
                    super::print_json(
                        &json!({"ok": false, "error": e.to_string(), "queued": queued}),
                    );
                } else {
                    eprintln!("earshot: calendar sync failed: {e}");
                }
                Ok(false)
            }
        },
    }
}
