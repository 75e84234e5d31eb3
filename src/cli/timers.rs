//! `earshot timers list|add|cancel|watch`: timers, alarms and reminders
//! from the terminal (issue 15).
//!
//! `list --json` prints the contract's array
//! `[{"id","kind","label","due","remaining_s","repeat"}]`; `add --json`
//! one such object. `watch` runs the scheduler here (when `earshot run`
//! is not running) and prints each event, `--json` as the contract's
//! `{"type":"timer","event",…}` lines. Bad input is one line, exit 2.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::timers::{self, parse, Kind, NewTimer, Timer, TimerEvent, Timers, When};

/// The `timers` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TimersCommand {
    /// What is set (and ringing), soonest first.
    List {
        /// Only timers, alarms or reminders.
        #[arg(long)]
        kind: Option<String>,
        /// Print the JSON array [{"id","kind","label","due","remaining_s","repeat"}].
        #[arg(long)]
        json: bool,
    },
    /// Set one: --in 5m (a timer) or --at 07:00 (an alarm).
    Add {
        /// After this long: 90s, 5m, 1h30m, "20 minutes".
        #[arg(long = "in", value_name = "LENGTH")]
        delay: Option<String>,
        /// At this local time: 07:00 (the next one), "tomorrow 06:30", 2026-12-24T18:00, RFC 3339.
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
        /// Its name (a timer) or what to say (a reminder).
        #[arg(long)]
        label: Option<String>,
        /// timer (default with --in), alarm (default with --at) or reminder.
        #[arg(long)]
        kind: Option<String>,
        /// Ring again: daily, weekdays, weekends, or days like mon,wed (with --at HH:MM).
        #[arg(long)]
        repeat: Option<String>,
        /// Print the object set.
        #[arg(long)]
        json: bool,
    },
    /// Cancel one by id (`timers list` shows ids).
    Cancel {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Ring them here until Ctrl-C: print each event (missed ones first).
    Watch {
        /// One {"type":"timer","event",…} object per line.
        #[arg(long)]
        json: bool,
    },
}

/// Run one subcommand.
pub fn run(config: Option<&Path>, command: TimersCommand) -> Result<bool> {
    let loaded = super::load_config(config)?;
    let timers = crate::app::timers(&loaded.config)?;
    match command {
        TimersCommand::List { kind, json } => {
            let all = timers.list(kind_of(kind.as_deref())?)?;
            if json {
                super::print_json(&serde_json::to_value(&all)?);
            } else if all.is_empty() {
                println!("Nothing is set.");
            } else {
                for t in &all {
                    println!("{}", line(t));
                }
            }
            Ok(true)
        }
        TimersCommand::Add {
            delay,
            at,
            label,
            kind,
            repeat,
            json,
        } => {
            let today = chrono::Local::now().date_naive();
            let repeat = repeat.as_deref().map(parse::repeat).transpose()?;
            let (when, default_kind) = match (delay, at) {
                (Some(d), None) => (When::In(parse::duration(&d)?), Kind::Timer),
                (None, Some(a)) => (parse::at(&a, today)?, Kind::Alarm),
                _ => bail!("give one of --in LENGTH (e.g. 5m) or --at TIME (e.g. 07:00)"),
            };
            let kind = kind_of(kind.as_deref())?.unwrap_or(default_kind);
            if repeat.is_some() && !matches!(when, When::Next { .. }) {
                bail!("--repeat needs --at with a clock time like 07:00");
            }
            let t = timers.add(NewTimer {
                kind,
                label,
                when,
                repeat,
            })?;
            if json {
                super::print_json(&serde_json::to_value(&t)?);
            } else {
                println!("Set {}", line(&t));
            }
            Ok(true)
        }
        TimersCommand::Cancel { id, json } => {
            let t = timers.cancel(id)?;
            if json {
                super::print_json(&serde_json::to_value(&t)?);
            } else {
                println!("Cancelled {} {}", t.kind, t.id);
            }
            Ok(true)
        }
        TimersCommand::Watch { json } => watch(&timers, json),
    }
}

/// `--kind`, read here so a bad one is one line (clap's own error is
/// several).
fn kind_of(text: Option<&str>) -> Result<Option<Kind>> {
    Ok(text.map(str::parse::<Kind>).transpose()?)
}

/// `id  kind  label  due  left  repeat` for people.
fn line(t: &Timer) -> String {
    let left = if t.state == timers::State::Ringing {
        "ringing".to_string()
    } else {
        format!("{} left", timers::spoken_length(t.remaining_s))
    };
    let mut s = format!(
        "{} {} {}due {} ({left})",
        t.id,
        t.kind,
        if t.label.is_empty() {
            String::new()
        } else {
            format!("\"{}\" ", t.label)
        },
        t.due.format("%Y-%m-%d %H:%M:%S %:z"),
    );
    if let Some(r) = &t.repeat {
        s.push_str(&format!(", repeats {r}"));
    }
    s
}

fn event_line(e: &TimerEvent) -> String {
    let label = if e.label.is_empty() {
        String::new()
    } else {
        format!(" \"{}\"", e.label)
    };
    format!(
        "{} {} {}{label} (due {})",
        e.event,
        e.kind,
        e.id,
        e.due.format("%H:%M:%S")
    )
}

/// Run the scheduler here and print events until SIGINT/SIGTERM.
fn watch(timers: &Timers, json: bool) -> Result<bool> {
    let events = timers.subscribe();
    let scheduler = timers.start_scheduler()?;
    let cancel = crate::cancel::CancelToken::new();
    super::install_interrupt(&cancel);
    eprintln!("earshot: watching timers (Ctrl-C stops)");
    while !cancel.is_cancelled() {
        match events.recv_timeout(Duration::from_millis(200)) {
            Ok(e) if json => super::print_json(&serde_json::to_value(&e)?),
            Ok(e) => println!("{}", event_line(&e)),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        }
    }
    scheduler.stop();
    // What the scheduler told before it stopped is printed too.
    for e in events.try_iter() {
        if json {
            super::print_json(&serde_json::to_value(&e)?);
        } else {
            println!("{}", event_line(&e));
        }
    }
    Ok(true)
}
