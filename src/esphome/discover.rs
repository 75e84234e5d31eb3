//! Finding ESPHome voice devices on the LAN over mDNS (`[esphome]
//! discover = true`): browse `_esphomelib._tcp`, the service every ESPHome
//! firmware announces, and hand each new device to the hosts exactly as if
//! it were a `[[esphome.devices]]` entry.
//!
//! `mdns-sd` runs its own thread; ours only turns its events into
//! [`DeviceEntry`]s, so no async runtime is involved. The browse never uses
//! a loopback interface (ESPHome devices are never on one): a machine with
//! only loopback sends no mDNS query at all.
//!
//! What decides whether a resolved service becomes a device ([`decide`]):
//! - once per instance name (case-insensitive): re-announcements, a second
//!   interface or a later TXT update add nothing;
//! - not earshot's own announcement (`[esphome] serve`: TXT
//!   `platform=earshot` under our name), so it never hosts itself;
//! - not a device already configured with an address (the same `ip:port`,
//!   its mDNS host name, or an entry with that name and an address);
//! - the key and password come from the `[[esphome.devices]]` entry with
//!   no address whose `name` is the instance name; a device announcing
//!   `api_encryption` without such a key is named in one log line saying
//!   how to add it, and not hosted (it would only fail the handshake
//!   forever).

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::thread::JoinHandle;
use std::time::Duration;

use mdns_sd::{IfKind, ServiceDaemon, ServiceEvent};

use super::mdns::SERVICE;
use super::{DeviceEntry, EsphomeConfig};
use crate::cancel::CancelToken;

/// Start hosting one device (given by discovery).
pub type AddDevice = Box<dyn Fn(DeviceEntry) -> Result<(), String> + Send + Sync>;

/// How often the browse thread looks at the shutdown token.
const POLL: Duration = Duration::from_millis(200);

/// A running browse; dropping it stops the browse and the mDNS daemon.
pub struct Discovery {
    daemon: ServiceDaemon,
    stop: CancelToken,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Discovery {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = self.daemon.shutdown();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One resolved `_esphomelib._tcp` service, as plain data (what
/// [`decide`] needs; `mdns_sd::ResolvedService` cannot be built in tests).
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// The instance name: the device's ESPHome node name ("kitchen").
    pub instance: String,
    /// Its mDNS host name without the trailing dot ("kitchen.local").
    pub host: String,
    pub port: u16,
    pub addresses: Vec<IpAddr>,
    /// TXT properties (keys lower-cased).
    pub txt: BTreeMap<String, String>,
}

impl Found {
    /// From the daemon's resolved service (`None`: not one of ours, or no
    /// address yet).
    fn from_resolved(service: &mdns_sd::ResolvedService) -> Option<Found> {
        let suffix = format!(".{SERVICE}");
        let instance = service.fullname.strip_suffix(suffix.as_str())?;
        let addresses = service
            .addresses
            .iter()
            .map(|a| a.to_ip_addr())
            .collect::<Vec<_>>();
        Some(Found {
            instance: instance.to_string(),
            host: service.host.trim_end_matches('.').to_string(),
            port: service.port,
            addresses,
            txt: service
                .txt_properties
                .iter()
                .map(|p| (p.key().to_lowercase(), p.val_str().to_string()))
                .collect(),
        })
    }

    /// The address to dial: a routable IPv4 address first (no zone to get
    /// wrong), then a global IPv6 one, then whatever is left that is not
    /// loopback or unspecified.
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        let rank = |ip: &IpAddr| match ip {
            IpAddr::V4(v4) if v4.is_loopback() || v4.is_unspecified() => None,
            IpAddr::V4(v4) if v4.is_link_local() => Some(2),
            IpAddr::V4(_) => Some(0),
            IpAddr::V6(v6) if v6.is_loopback() || v6.is_unspecified() => None,
            // fe80::/10 needs a zone the host thread cannot express.
            IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80 => None,
            IpAddr::V6(_) => Some(1),
        };
        self.addresses
            .iter()
            .filter_map(|ip| rank(ip).map(|r| (r, *ip)))
            .min_by_key(|(r, ip)| (*r, *ip))
            .map(|(_, ip)| SocketAddr::new(ip, self.port))
    }

    /// Whether the device says its API is encrypted.
    pub fn encrypted(&self) -> bool {
        self.txt
            .get("api_encryption")
            .is_some_and(|v| !v.trim().is_empty())
    }
}

/// Instance names decided (lower case) → the address an added one has.
pub type Seen = HashMap<String, Option<SocketAddr>>;

/// What to do with one resolved service.
#[derive(Debug)]
pub enum Decision {
    /// Host it.
    Add(DeviceEntry),
    /// Already handled (seen, ours, configured): nothing to say again.
    Skip(&'static str),
    /// Not hosted, for a reason the user should read once.
    Refuse(String),
}

/// Decide what one resolved service becomes; `seen` holds the lower-cased
/// instance names already decided (added, refused or skipped for good),
/// with the address an added one was given: the same device at a new
/// address (DHCP) is added again, which moves it (the hosts keep one
/// thread per name).
pub fn decide(cfg: &EsphomeConfig, found: &Found, seen: &mut Seen) -> Decision {
    let name = found.instance.trim();
    let lower = name.to_lowercase();
    if name.is_empty() {
        return Decision::Skip("no instance name");
    }
    if let Some(before) = seen.get(&lower) {
        match (before, found.socket_addr()) {
            (Some(old), Some(new)) if *old != new => {}
            _ => return Decision::Skip("already seen"),
        }
    }
    let platform = found.txt.get("platform").map(|p| p.to_lowercase());
    if platform.as_deref() == Some("earshot") && lower == cfg.name.trim().to_lowercase() {
        seen.insert(lower, None);
        return Decision::Skip("earshot's own announcement");
    }
    let Some(addr) = found.socket_addr() else {
        // Not final: the next resolution may bring an address.
        return Decision::Skip("no usable address yet");
    };
    if configured(cfg, found, &lower, addr) {
        seen.insert(lower, None);
        return Decision::Skip("configured by address");
    }
    let keyed = cfg
        .devices
        .iter()
        .find(|d| d.address.trim().is_empty() && d.name.trim().to_lowercase() == lower);
    let encryption_key = keyed.map(|d| d.encryption_key.clone()).unwrap_or_default();
    let password = keyed.map(|d| d.password.clone()).unwrap_or_default();
    if found.encrypted() && encryption_key.trim().is_empty() {
        seen.insert(lower, None);
        return Decision::Refuse(format!(
            "esphome: discovered {name:?} at {addr}, but it is encrypted and no key is configured; \
             to host it add [[esphome.devices]] with name = \"{name}\" and encryption_key = \"<its api encryption key>\""
        ));
    }
    seen.insert(lower, Some(addr));
    Decision::Add(DeviceEntry {
        address: addr.to_string(),
        name: name.to_string(),
        encryption_key,
        password,
    })
}

/// Whether a `[[esphome.devices]]` entry with an address already names
/// this device: the same `ip:port` (an address without a port means
/// 6053), its mDNS host name, or its instance name with an address.
/// Configured names are never looked up (no blocking DNS here).
fn configured(cfg: &EsphomeConfig, found: &Found, lower: &str, addr: SocketAddr) -> bool {
    cfg.devices
        .iter()
        .filter(|d| !d.address.trim().is_empty())
        .any(|d| {
            if d.name.trim().to_lowercase() == lower {
                return true;
            }
            let text = d.address.trim();
            if let Ok(sock) = text.parse::<SocketAddr>() {
                return sock == addr;
            }
            if let Ok(ip) = text.trim_matches(['[', ']']).parse::<IpAddr>() {
                return SocketAddr::new(ip, 6053) == addr;
            }
            let (host, port) = match text.rsplit_once(':') {
                Some((h, p)) => match p.parse::<u16>() {
                    Ok(p) => (h, p),
                    Err(_) => return false,
                },
                None => (text, 6053),
            };
            let host = host.trim_end_matches('.').to_lowercase();
            port == found.port
                && (host == found.host.to_lowercase() || host == format!("{lower}.local"))
        })
}

/// Start browsing `_esphomelib._tcp` on every non-loopback interface;
/// `add` is called once per new device from the browse thread. Stops when
/// the returned [`Discovery`] is dropped or `shutdown` is cancelled.
pub fn start(
    cfg: &EsphomeConfig,
    shutdown: &CancelToken,
    add: AddDevice,
) -> Result<Discovery, String> {
    let daemon = ServiceDaemon::new().map_err(|e| format!("esphome.discover: mDNS: {e}"))?;
    daemon
        .disable_interface(vec![IfKind::LoopbackV4, IfKind::LoopbackV6])
        .map_err(|e| format!("esphome.discover: mDNS: {e}"))?;
    let events = daemon
        .browse(SERVICE)
        .map_err(|e| format!("esphome.discover: mDNS: {e}"))?;
    let stop = CancelToken::new();
    let thread = {
        let cfg = cfg.clone();
        let shutdown = shutdown.clone();
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("esphome discover".into())
            .spawn(move || browse(&cfg, &events, &add, &shutdown, &stop))
            .map_err(|e| format!("esphome.discover: cannot start its thread: {e}"))?
    };
    tracing::info!("esphome: looking for devices over mDNS ({SERVICE})");
    Ok(Discovery {
        daemon,
        stop,
        thread: Some(thread),
    })
}

/// The browse thread: one decision per resolved service.
fn browse(
    cfg: &EsphomeConfig,
    events: &mdns_sd::Receiver<ServiceEvent>,
    add: &AddDevice,
    shutdown: &CancelToken,
    stop: &CancelToken,
) {
    let mut seen = Seen::new();
    while !shutdown.is_cancelled() && !stop.is_cancelled() {
        let event = match events.recv_timeout(POLL) {
            Ok(event) => event,
            Err(mdns_sd::RecvTimeoutError::Timeout) => continue,
            // The daemon shut down.
            Err(mdns_sd::RecvTimeoutError::Disconnected) => break,
        };
        let ServiceEvent::ServiceResolved(service) = event else {
            continue;
        };
        let Some(found) = Found::from_resolved(&service) else {
            continue;
        };
        match decide(cfg, &found, &mut seen) {
            Decision::Add(entry) => {
                if shutdown.is_cancelled() {
                    break;
                }
                let (name, address) = (entry.name.clone(), entry.address.clone());
                let encrypted = !entry.encryption_key.trim().is_empty();
                match add(entry) {
                    Ok(()) => tracing::info!(
                        "esphome: discovered {name:?} at {address}{}; hosting it",
                        if encrypted { " (encrypted)" } else { "" }
                    ),
                    Err(e) => {
                        tracing::warn!("esphome: discovered {name:?} at {address}, but: {e}")
                    }
                }
            }
            Decision::Refuse(line) => tracing::info!("{line}"),
            Decision::Skip(why) => {
                tracing::debug!("esphome: mDNS {:?} skipped: {why}", found.instance)
            }
        }
    }
    tracing::debug!("esphome: mDNS discovery stopped");
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "px7tsbK3C7bpXHr2OevEV2ZMg/FrNBw2+O2pNPbedtA=";

    fn found(instance: &str, ip: &str, txt: &[(&str, &str)]) -> Found {
        Found {
            instance: instance.into(),
            host: format!("{instance}.local"),
            port: 6053,
            addresses: vec![ip.parse().unwrap()],
            txt: txt
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn entry(address: &str, name: &str, key: &str) -> DeviceEntry {
        DeviceEntry {
            address: address.into(),
            name: name.into(),
            encryption_key: key.into(),
            password: String::new(),
        }
    }

    fn added(d: Decision) -> DeviceEntry {
        match d {
            Decision::Add(e) => e,
            other => panic!("not added: {other:?}"),
        }
    }

    const NOISE: (&str, &str) = ("api_encryption", "Noise_NNpsk0_25519_ChaChaPoly_SHA256");

    #[test]
    fn a_plain_device_becomes_an_entry_once() {
        let cfg = EsphomeConfig::default();
        let mut seen = Seen::new();
        let f = found("kitchen", "192.168.1.40", &[("mac", "aabbccddeeff")]);
        let e = added(decide(&cfg, &f, &mut seen));
        assert_eq!(e.address, "192.168.1.40:6053");
        assert_eq!(e.name, "kitchen");
        assert!(e.encryption_key.is_empty() && e.password.is_empty());
        // Re-announced at the same address (any case): once.
        let again = found("Kitchen", "192.168.1.40", &[]);
        assert!(matches!(decide(&cfg, &again, &mut seen), Decision::Skip(_)));
        // At a new address (DHCP): added again, which moves it.
        let moved = found("kitchen", "192.168.1.41", &[]);
        assert_eq!(
            added(decide(&cfg, &moved, &mut seen)).address,
            "192.168.1.41:6053"
        );
        assert!(matches!(decide(&cfg, &moved, &mut seen), Decision::Skip(_)));
    }

    #[test]
    fn the_key_comes_from_the_name_only_entry_matching_case_insensitively() {
        let cfg = EsphomeConfig {
            devices: vec![
                entry("", "Other", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="),
                DeviceEntry {
                    password: "pw".into(),
                    ..entry("", "KITCHEN", KEY)
                },
            ],
            ..Default::default()
        };
        let f = found("kitchen", "10.0.0.7", &[NOISE]);
        let e = added(decide(&cfg, &f, &mut Seen::new()));
        assert_eq!(e.encryption_key, KEY);
        assert_eq!(e.password, "pw");
        assert_eq!(e.address, "10.0.0.7:6053");
    }

    #[test]
    fn an_encrypted_device_without_a_key_is_named_once_and_not_added() {
        let cfg = EsphomeConfig::default();
        let mut seen = Seen::new();
        let f = found("porch", "10.0.0.8", &[NOISE]);
        match decide(&cfg, &f, &mut seen) {
            Decision::Refuse(line) => {
                assert!(line.contains("\"porch\""), "{line}");
                assert!(line.contains("encryption_key"), "{line}");
                assert!(!line.contains('\n'));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(decide(&cfg, &f, &mut seen), Decision::Skip(_)));
    }

    #[test]
    fn configured_devices_and_our_own_announcement_are_skipped() {
        let cfg = EsphomeConfig {
            name: "earshot".into(),
            devices: vec![
                entry("10.0.0.9:6053", "", ""),
                entry("hall.local:6053", "", ""),
                entry("10.0.0.11", "", ""),
                entry("10.0.0.99:6053", "garage", ""),
            ],
            ..Default::default()
        };
        for f in [
            found("study", "10.0.0.9", &[]),
            found("hall", "10.0.0.10", &[]),
            found("attic", "10.0.0.11", &[]),
            found("garage", "10.0.0.12", &[]),
            found("EARSHOT", "10.0.0.13", &[("platform", "earshot"), NOISE]),
        ] {
            let d = decide(&cfg, &f, &mut Seen::new());
            assert!(matches!(d, Decision::Skip(_)), "{}: {d:?}", f.instance);
        }
        // Another port on a configured address is another device; another
        // earshot (not our name) is a device like any.
        let mut other_port = found("study2", "10.0.0.9", &[]);
        other_port.port = 6054;
        assert_eq!(
            added(decide(&cfg, &other_port, &mut Seen::new())).address,
            "10.0.0.9:6054"
        );
        let other = found("den", "10.0.0.14", &[("platform", "earshot")]);
        added(decide(&cfg, &other, &mut Seen::new()));
    }

    #[test]
    fn the_dialled_address_prefers_ipv4_and_never_loopback_or_link_local_v6() {
        let mut f = found("x", "fe80::1", &[]);
        assert_eq!(f.socket_addr(), None);
        // No address yet is not final.
        let mut seen = Seen::new();
        assert!(matches!(
            decide(&EsphomeConfig::default(), &f, &mut seen),
            Decision::Skip(_)
        ));
        assert!(seen.is_empty());
        f.addresses = vec![
            "2001:db8::5".parse().unwrap(),
            "127.0.0.1".parse().unwrap(),
            "192.168.0.5".parse().unwrap(),
        ];
        assert_eq!(f.socket_addr().unwrap().to_string(), "192.168.0.5:6053");
        f.addresses.pop();
        assert_eq!(f.socket_addr().unwrap().to_string(), "[2001:db8::5]:6053");
        assert_eq!(
            added(decide(&EsphomeConfig::default(), &f, &mut seen)).address,
            "[2001:db8::5]:6053"
        );
    }

    #[test]
    fn an_empty_encryption_txt_is_plaintext() {
        let f = found("x", "10.1.1.1", &[("api_encryption", "")]);
        assert!(!f.encrypted());
        assert!(found("x", "10.1.1.1", &[NOISE]).encrypted());
    }
}
