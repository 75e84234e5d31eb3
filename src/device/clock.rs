//! The device's clock as the user lives by it: the local time with its
//! zone (for the line every LLM prompt carries, so "what day is Friday"
//! and "in two hours" are answered right), the zone's name (for `doctor`),
//! and whether the kernel's clock has been synced by NTP (`adjtimex`).
//!
//! The local zone is the C library's (`TZ`, else `/etc/localtime`), read
//! through `localtime_r` because it is the only source of the zone's short
//! name ("CET", "BST") that chrono does not give.

use std::ffi::CStr;
use std::path::Path;

use chrono::{DateTime, FixedOffset, TimeZone, Utc};

/// A moment in local time, with the zone's abbreviation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalTime {
    /// The local time with its UTC offset.
    pub time: DateTime<FixedOffset>,
    /// The zone's short name ("CET", "UTC"); may be a numeric "+0530"
    /// where the zone has no abbreviation.
    pub abbrev: String,
}

/// `at` in the process's local time zone (`TZ`, else `/etc/localtime`).
/// Falls back to UTC when the C library cannot convert it.
pub fn local(at: DateTime<Utc>) -> LocalTime {
    let utc = |at: DateTime<Utc>| LocalTime {
        time: at.fixed_offset(),
        abbrev: "UTC".into(),
    };
    // time_t is 32 bits on some ARM boards.
    #[allow(clippy::useless_conversion)]
    let secs: libc::time_t = match at.timestamp().try_into() {
        Ok(s) => s,
        Err(_) => return utc(at),
    };
    // SAFETY: `tm` is plain old data, zeroed, then filled by localtime_r;
    // `tm_zone` points into the C library's static zone table (valid for
    // the process's life) or is null, which is checked.
    let (offset, abbrev) = unsafe {
        tzset();
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return utc(at);
        }
        let abbrev = if tm.tm_zone.is_null() {
            String::new()
        } else {
            CStr::from_ptr(tm.tm_zone).to_string_lossy().into_owned()
        };
        (tm.tm_gmtoff, abbrev)
    };
    let Some(zone) = i32::try_from(offset).ok().and_then(FixedOffset::east_opt) else {
        return utc(at);
    };
    let time = zone.from_utc_datetime(&at.naive_utc());
    let abbrev = if abbrev.is_empty() {
        offset_text(zone)
    } else {
        abbrev
    };
    LocalTime { time, abbrev }
}

extern "C" {
    /// POSIX `tzset`: (re)reads `TZ` so `localtime_r` uses the current zone.
    fn tzset();
}

/// "+01:00", "-03:30".
pub fn offset_text(zone: FixedOffset) -> String {
    let secs = zone.local_minus_utc();
    let sign = if secs < 0 { '-' } else { '+' };
    let secs = secs.unsigned_abs();
    format!("{sign}{:02}:{:02}", secs / 3600, secs % 3600 / 60)
}

/// The line every LLM prompt ends with: "Now: Wednesday 2 December 2026,
/// 14:05 CET (UTC+01:00)." Date, weekday, time to the minute and zone, so
/// the model can answer "what day is Friday" and "in two hours".
pub fn now_line(now: &LocalTime) -> String {
    let zone = offset_text(*now.time.offset());
    let abbrev = if now.abbrev.is_empty() || now.abbrev == zone {
        String::new()
    } else {
        format!(" {}", now.abbrev)
    };
    format!(
        "Now: {}{abbrev} (UTC{zone}).",
        now.time.format("%A %-d %B %Y, %H:%M")
    )
}

/// The prompt line for the system's current time.
pub fn now_line_system() -> String {
    now_line(&local(Utc::now()))
}

/// The name of the local time zone and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneName {
    /// "Europe/Berlin", or what `TZ` says.
    pub name: String,
    /// "TZ", "/etc/timezone" or "/etc/localtime".
    pub source: &'static str,
}

/// The zone's name: `TZ` (without a leading ':'), else `/etc/timezone`,
/// else the target of the `/etc/localtime` link below `zoneinfo/`.
/// `None` when none of them says (the C library then uses UTC).
pub fn zone_name() -> Option<ZoneName> {
    zone_name_from(std::env::var("TZ").ok(), Path::new("/etc"))
}

fn zone_name_from(tz: Option<String>, etc: &Path) -> Option<ZoneName> {
    if let Some(tz) = tz {
        let name = tz.trim().trim_start_matches(':').trim();
        if !name.is_empty() {
            return Some(ZoneName {
                name: name.to_string(),
                source: "TZ",
            });
        }
    }
    if let Ok(text) = std::fs::read_to_string(etc.join("timezone")) {
        let name = text.lines().next().unwrap_or("").trim();
        if !name.is_empty() {
            return Some(ZoneName {
                name: name.to_string(),
                source: "/etc/timezone",
            });
        }
    }
    let target = std::fs::read_link(etc.join("localtime")).ok()?;
    let target = target.to_string_lossy();
    let name = target.rsplit_once("zoneinfo/")?.1;
    (!name.is_empty()).then(|| ZoneName {
        name: name.to_string(),
        source: "/etc/localtime",
    })
}

/// Whether the kernel's clock has been synced by NTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NtpSync {
    /// The kernel says it is synced; its estimated error bound.
    Synced { max_error_us: i64 },
    /// `STA_UNSYNC` is set or `adjtimex` returned `TIME_ERROR`: no NTP
    /// daemon has disciplined the clock (yet).
    NotSynced,
    /// The kernel's status could not be read or does not describe this
    /// system's clock (a container); why.
    Unknown(String),
}

/// Read the kernel's clock status with a read-only `adjtimex` (modes = 0:
/// changes nothing, needs no privilege). In a container the status is the
/// host's, so it is reported as unknown.
pub fn ntp_sync() -> NtpSync {
    if let Some(why) = container() {
        return NtpSync::Unknown(format!("in a container ({why}): the host keeps the clock"));
    }
    // SAFETY: `timex` is plain old data; modes = 0 only reads.
    let (ret, status, maxerror) = unsafe {
        let mut tx: libc::timex = std::mem::zeroed();
        let ret = libc::adjtimex(&mut tx);
        (ret, tx.status, tx.maxerror)
    };
    if ret < 0 {
        let err = std::io::Error::last_os_error();
        return NtpSync::Unknown(format!("adjtimex failed: {err}"));
    }
    #[allow(clippy::unnecessary_cast)] // c_long is 32 bits on armv7
    classify(ret, status, maxerror as i64)
}

/// The verdict from `adjtimex`'s return value and status word.
fn classify(ret: libc::c_int, status: libc::c_int, max_error_us: i64) -> NtpSync {
    if ret == libc::TIME_ERROR || status & libc::STA_UNSYNC != 0 {
        NtpSync::NotSynced
    } else {
        NtpSync::Synced { max_error_us }
    }
}

/// Why this looks like a container, if it does.
fn container() -> Option<String> {
    if let Ok(kind) = std::env::var("container") {
        if !kind.is_empty() {
            return Some(format!("container={kind}"));
        }
    }
    for marker in ["/.dockerenv", "/run/.containerenv"] {
        if Path::new(marker).exists() {
            return Some(marker.to_string());
        }
    }
    let cgroup = std::fs::read_to_string("/proc/1/cgroup").unwrap_or_default();
    ["docker", "kubepods", "lxc", "containerd", "libpod"]
        .into_iter()
        .find(|k| cgroup.contains(k))
        .map(|k| format!("/proc/1/cgroup names {k}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str, abbrev: &str) -> LocalTime {
        LocalTime {
            time: DateTime::parse_from_rfc3339(rfc3339).unwrap(),
            abbrev: abbrev.into(),
        }
    }

    #[test]
    fn the_prompt_line_has_weekday_date_minute_and_zone() {
        assert_eq!(
            now_line(&at("2026-12-02T14:05:59+01:00", "CET")),
            "Now: Wednesday 2 December 2026, 14:05 CET (UTC+01:00)."
        );
        assert_eq!(
            now_line(&at("2027-03-28T03:00:00+02:00", "CEST")),
            "Now: Sunday 28 March 2027, 03:00 CEST (UTC+02:00)."
        );
        // A zone with no abbreviation is not named twice.
        assert_eq!(
            now_line(&at("2026-01-01T00:00:00-03:30", "-03:30")),
            "Now: Thursday 1 January 2026, 00:00 (UTC-03:30)."
        );
    }

    #[test]
    fn local_time_keeps_the_instant() {
        let now = Utc::now();
        let l = local(now);
        assert_eq!(l.time.timestamp(), now.timestamp());
        assert!(!l.abbrev.is_empty());
    }

    #[test]
    fn zone_names_come_from_tz_then_etc_timezone_then_the_link() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            zone_name_from(Some(":Europe/Berlin".into()), dir.path()),
            Some(ZoneName {
                name: "Europe/Berlin".into(),
                source: "TZ"
            })
        );
        assert_eq!(zone_name_from(None, dir.path()), None);
        std::os::unix::fs::symlink(
            "/usr/share/zoneinfo/America/New_York",
            dir.path().join("localtime"),
        )
        .unwrap();
        assert_eq!(
            zone_name_from(Some(String::new()), dir.path()).map(|z| z.name),
            Some("America/New_York".into())
        );
        std::fs::write(dir.path().join("timezone"), "Europe/London\n").unwrap();
        assert_eq!(
            zone_name_from(None, dir.path()),
            Some(ZoneName {
                name: "Europe/London".into(),
                source: "/etc/timezone"
            })
        );
    }

    #[test]
    fn adjtimex_status_is_read() {
        assert_eq!(
            classify(libc::TIME_OK, 0, 1200),
            NtpSync::Synced { max_error_us: 1200 }
        );
        assert_eq!(
            classify(libc::TIME_OK, libc::STA_UNSYNC, 16_000_000),
            NtpSync::NotSynced
        );
        assert_eq!(classify(libc::TIME_ERROR, 0, 0), NtpSync::NotSynced);
        // The real call answers something and never panics.
        let _ = ntp_sync();
    }
}
