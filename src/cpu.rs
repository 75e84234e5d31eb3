//! The processor as the live turn sees it (issue 21, point 3): how many
//! cores are free right now, a lower priority for background threads, and
//! a gate that keeps background work out of a live turn's STT and TTS.
//!
//! **Free cores.** ggml's worker threads meet at a barrier after every
//! operation, so one worker descheduled by an unrelated busy process stalls
//! the others: with one of this machine's two cores held by a busy loop,
//! whisper with 2 threads took 1.2–2.0 s for a 1 s clip and with 1 thread
//! 0.55–0.88 s (notes/latency.md). [`free_cores`] reads `/proc/stat` and
//! this process's own `/proc/self/stat` over the last second, subtracts
//! our own use, and says how many cores the rest of the system leaves us;
//! callers that choose a thread count per call take at most that many.
//!
//! **Background work.** [`lower_this_thread`] renices the calling thread
//! (Linux nice is per thread), and [`wait_until_quiet`] blocks a
//! background job while any [`LiveWork`] guard is held: STT decodes and
//! TTS synthesis hold one, so a summary, an index upsert or a calendar
//! sync never starts beside them.

use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How often the sampler reads the counters.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Samples averaged (one second).
const WINDOW: usize = 4;
/// Other processes' use (in cores) below this fraction of a core leaves
/// the core free: a shell prompt or a log writer is not load.
const BUSY_FRACTION: f64 = 0.5;
/// Nice value for background threads (0 is normal, 19 the lowest).
pub const BACKGROUND_NICE: i32 = 10;

/// CPU time counters at one instant, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Counters {
    /// Busy ticks summed over every CPU of the host.
    busy: u64,
    /// All ticks (busy + idle + iowait) summed over every CPU.
    total: u64,
    /// This process's user + system ticks (all its threads).
    own: u64,
}

/// The `cpu ` line of `/proc/stat`: (busy, total) ticks.
fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    if fields.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest is in user).
    let idle = fields[3] + fields.get(4).copied().unwrap_or(0);
    let busy = fields[0]
        + fields[1]
        + fields[2]
        + fields.get(5).copied().unwrap_or(0)
        + fields.get(6).copied().unwrap_or(0)
        + fields.get(7).copied().unwrap_or(0);
    Some((busy, busy + idle))
}

/// utime + stime of `/proc/self/stat` (fields 14 and 15; the command name
/// in parentheses may hold spaces, so count from its closing parenthesis).
fn parse_self_stat(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3, so utime (14) is index 11, stime index 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn read_counters() -> Option<Counters> {
    let (busy, total) = parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)?;
    let own = parse_self_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
    Some(Counters { busy, total, own })
}

/// Host CPUs as `/proc/stat` counts them (its `cpuN` lines).
fn host_cpus() -> usize {
    std::fs::read_to_string("/proc/stat")
        .map(|t| {
            t.lines()
                .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
                .count()
        })
        .unwrap_or(0)
        .max(1)
}

/// Cores this process may use (affinity and cgroup quota).
pub fn usable_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Other processes' use between two readings, in cores.
fn others_busy(a: Counters, b: Counters, host_cpus: usize) -> f64 {
    let total = b.total.saturating_sub(a.total);
    if total == 0 {
        return 0.0;
    }
    let busy = b.busy.saturating_sub(a.busy);
    let own = b.own.saturating_sub(a.own);
    let others = busy.saturating_sub(own) as f64;
    others / total as f64 * host_cpus as f64
}

/// Cores left when others use `others` cores of `host` on a process that
/// may use `usable`.
fn free_of(others: f64, host: usize, usable: usize) -> usize {
    let taken = (others + (1.0 - BUSY_FRACTION)).floor().max(0.0) as usize;
    host.saturating_sub(taken).clamp(1, usable.max(1))
}

struct Sampler {
    /// The last [`WINDOW`] readings of others' use, in cores.
    recent: Mutex<Vec<f64>>,
    host: usize,
}

fn sampler() -> &'static Sampler {
    static SAMPLER: OnceLock<Sampler> = OnceLock::new();
    SAMPLER.get_or_init(|| {
        let s = Sampler {
            recent: Mutex::new(Vec::new()),
            host: host_cpus(),
        };
        // A first reading now, so the first caller has one.
        if let Some(a) = read_counters() {
            std::thread::sleep(Duration::from_millis(50));
            if let Some(b) = read_counters() {
                if let Ok(mut r) = s.recent.lock() {
                    r.push(others_busy(a, b, s.host));
                }
            }
        }
        let host = s.host;
        let _ = std::thread::Builder::new()
            .name("cpu-sampler".into())
            .spawn(move || {
                let Some(mut last) = read_counters() else {
                    return;
                };
                loop {
                    std::thread::sleep(SAMPLE_EVERY);
                    let Some(now) = read_counters() else {
                        return;
                    };
                    let busy = others_busy(last, now, host);
                    last = now;
                    let Some(s) = SAMPLER.get() else { continue };
                    let mut r = s.recent.lock().unwrap_or_else(|p| p.into_inner());
                    r.push(busy);
                    if r.len() > WINDOW {
                        r.remove(0);
                    }
                }
            });
        s
    })
}

/// Start sampling now (a service calls this at start-up, so the first
/// turn's [`free_cores`] sees a whole second of history).
pub fn start_sampling() {
    let _ = sampler();
}

/// Other processes' use over the last second, in cores.
pub fn others_load() -> f64 {
    let s = sampler();
    let r = s.recent.lock().unwrap_or_else(|p| p.into_inner());
    if r.is_empty() {
        return 0.0;
    }
    r.iter().sum::<f64>() / r.len() as f64
}

/// How many cores other processes leave this one right now (at least 1,
/// at most [`usable_cores`]).
pub fn free_cores() -> usize {
    free_of(others_load(), sampler().host, usable_cores())
}

/// Threads for a compute call that wants `wanted` (0 = as many as there
/// are cores): never more than the cores free right now.
pub fn threads_for(wanted: usize) -> usize {
    let free = free_cores();
    if wanted == 0 {
        free
    } else {
        wanted.min(free).max(1)
    }
}

/// Renice the calling thread to [`BACKGROUND_NICE`] (never raising it: a
/// process started nicer stays so), so a background job yields the cores
/// to a live turn. Failing (a sandbox may forbid it) is harmless and
/// silent.
pub fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    {
        let target = this_thread_nice().map_or(BACKGROUND_NICE, |n| n.max(BACKGROUND_NICE));
        // SAFETY: gettid has no preconditions; setpriority on our own
        // thread id only changes this thread's nice value.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            let _ = libc::setpriority(libc::PRIO_PROCESS, tid, target);
        }
    }
}

/// This thread's nice value (tests and `doctor`).
pub fn this_thread_nice() -> Option<i32> {
    #[cfg(target_os = "linux")]
    // SAFETY: as above; getpriority only reads.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, tid);
        if n == -1 && *libc::__errno_location() != 0 {
            return None;
        }
        Some(n)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

struct Live {
    count: Mutex<usize>,
    quiet: Condvar,
}

fn live() -> &'static Live {
    static LIVE: OnceLock<Live> = OnceLock::new();
    LIVE.get_or_init(|| Live {
        count: Mutex::new(0),
        quiet: Condvar::new(),
    })
}

/// Held while a live turn's STT or TTS runs; background jobs wait for
/// every guard to drop before they start ([`wait_until_quiet`]).
#[must_use = "the work is live only while the guard is held"]
pub struct LiveWork(());

impl LiveWork {
    pub fn begin() -> LiveWork {
        let l = live();
        *l.count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        LiveWork(())
    }
}

impl Drop for LiveWork {
    fn drop(&mut self) {
        let l = live();
        let mut n = l.count.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(1);
        if *n == 0 {
            l.quiet.notify_all();
        }
    }
}

/// Whether a live turn's STT or TTS is running now.
pub fn is_live() -> bool {
    *live().count.lock().unwrap_or_else(|p| p.into_inner()) > 0
}

/// Block until no [`LiveWork`] is held, at most `max` (a background job
/// that waited that long runs anyway: a device talking without pause
/// still gets its summaries). Returns how long it waited.
pub fn wait_until_quiet(max: Duration) -> Duration {
    let start = Instant::now();
    let l = live();
    let mut n = l.count.lock().unwrap_or_else(|p| p.into_inner());
    while *n > 0 {
        let left = max.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        n = match l.quiet.wait_timeout(n, left) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        };
    }
    start.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_counts_busy_and_idle_ticks() {
        let text = "cpu  100 5 50 800 20 3 2 1 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\n";
        assert_eq!(parse_proc_stat(text), Some((161, 981)));
        assert_eq!(parse_proc_stat("intr 1 2 3\n"), None);
    }

    #[test]
    fn self_stat_reads_past_a_command_name_with_spaces() {
        let text = "1234 (earshot (run) x) S 1 1234 1234 0 -1 4194304 100 0 0 0 \
                    250 40 0 0 20 0 7 0 12345 1000 100";
        assert_eq!(parse_self_stat(text), Some(290));
        assert_eq!(parse_self_stat("garbage"), None);
    }

    #[test]
    fn our_own_use_is_not_load() {
        let a = Counters {
            busy: 0,
            total: 0,
            own: 0,
        };
        // Two host CPUs over 100 ticks each: 150 busy, 100 of them ours.
        let b = Counters {
            busy: 150,
            total: 200,
            own: 100,
        };
        let others = others_busy(a, b, 2);
        assert!((others - 0.5).abs() < 1e-9, "{others}");
    }

    #[test]
    fn a_busy_core_leaves_one_of_two() {
        assert_eq!(free_of(0.0, 2, 2), 2);
        assert_eq!(free_of(0.3, 2, 2), 2);
        assert_eq!(free_of(0.95, 2, 2), 1);
        assert_eq!(free_of(2.0, 2, 2), 1, "never fewer than one");
        // A host with more CPUs than we may use.
        assert_eq!(free_of(1.0, 8, 2), 2);
    }

    #[test]
    fn background_waits_for_live_work_to_end() {
        let guard = LiveWork::begin();
        assert!(is_live());
        let waiter = std::thread::spawn(|| wait_until_quiet(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(100));
        drop(guard);
        let waited = waiter.join().unwrap();
        assert!(waited >= Duration::from_millis(90), "{waited:?}");
        assert!(waited < Duration::from_secs(10), "{waited:?}");
        // Bounded when it never ends.
        let _held = LiveWork::begin();
        let waited = wait_until_quiet(Duration::from_millis(150));
        assert!(waited >= Duration::from_millis(150), "{waited:?}");
    }

    #[test]
    fn a_lowered_thread_is_reniced() {
        let before = this_thread_nice().unwrap();
        let nice = std::thread::spawn(|| {
            lower_this_thread();
            this_thread_nice()
        })
        .join()
        .unwrap();
        assert_eq!(nice, Some(before.max(BACKGROUND_NICE)));
        // Only that thread: this one keeps its own.
        assert_eq!(this_thread_nice(), Some(before));
    }
}
