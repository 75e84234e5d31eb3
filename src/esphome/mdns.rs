//! Announcing `earshot esphome serve` over mDNS as `_esphomelib._tcp`, the
//! way ESPHome firmware does, so Home Assistant discovers it — only on the
//! interfaces the server is bound to: nothing at all when bound to
//! loopback (no daemon, no socket), only that address's interface when
//! bound to one address, every non-loopback interface for `0.0.0.0`/`::`.
//! `mdns-sd` runs its own thread (no async runtime).

use std::net::SocketAddr;

use mdns_sd::{IfKind, ServiceDaemon, ServiceInfo};

/// The service type ESPHome devices announce.
pub const SERVICE: &str = "_esphomelib._tcp.local.";

/// A running announcement; dropping it withdraws it.
pub struct Announcer {
    daemon: ServiceDaemon,
}

impl Drop for Announcer {
    fn drop(&mut self) {
        let _ = self.daemon.shutdown();
    }
}

/// The TXT properties ESPHome announces (what Home Assistant reads).
pub fn properties(name: &str, mac: &str) -> Vec<(&'static str, String)> {
    vec![
        ("friendly_name", name.to_string()),
        ("version", super::server::ESPHOME_VERSION.to_string()),
        ("mac", mac.replace(':', "").to_lowercase()),
        ("platform", "earshot".to_string()),
        ("board", "earshot".to_string()),
        ("network", "ethernet".to_string()),
        (
            "api_encryption",
            "Noise_NNpsk0_25519_ChaChaPoly_SHA256".to_string(),
        ),
    ]
}

/// Whether a bound address is announced at all.
pub fn announces(bound: &SocketAddr) -> bool {
    !bound.ip().is_loopback()
}

/// Announce `name` on the interfaces of `bound`; `Ok(None)` on loopback.
pub fn announce(bound: SocketAddr, name: &str, mac: &str) -> Result<Option<Announcer>, String> {
    if !announces(&bound) {
        return Ok(None);
    }
    let daemon = ServiceDaemon::new().map_err(|e| format!("mDNS: {e}"))?;
    let host = format!("{name}.local.");
    let info = if bound.ip().is_unspecified() {
        daemon
            .disable_interface(vec![IfKind::LoopbackV4, IfKind::LoopbackV6])
            .map_err(|e| format!("mDNS: {e}"))?;
        ServiceInfo::new(
            SERVICE,
            name,
            &host,
            "",
            bound.port(),
            properties(name, mac).as_slice(),
        )
        .map(ServiceInfo::enable_addr_auto)
    } else {
        daemon
            .disable_interface(IfKind::All)
            .map_err(|e| format!("mDNS: {e}"))?;
        daemon
            .enable_interface(IfKind::Addr(bound.ip()))
            .map_err(|e| format!("mDNS: {e}"))?;
        ServiceInfo::new(
            SERVICE,
            name,
            &host,
            bound.ip(),
            bound.port(),
            properties(name, mac).as_slice(),
        )
    }
    .map_err(|e| format!("mDNS: {e}"))?;
    daemon.register(info).map_err(|e| format!("mDNS: {e}"))?;
    Ok(Some(Announcer { daemon }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_never_announced() {
        for addr in ["127.0.0.1:6053", "[::1]:6053"] {
            let bound: SocketAddr = addr.parse().unwrap();
            assert!(!announces(&bound));
            assert!(announce(bound, "earshot", "02:00:00:00:00:01")
                .unwrap()
                .is_none());
        }
        assert!(announces(&"0.0.0.0:6053".parse().unwrap()));
        assert!(announces(&"192.168.1.5:6053".parse().unwrap()));
    }

    #[test]
    fn txt_records_carry_what_home_assistant_reads() {
        let props = properties("kitchen", "02:AB:CD:EF:00:11");
        let get = |k: &str| {
            props
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("mac").as_deref(), Some("02abcdef0011"));
        assert_eq!(get("friendly_name").as_deref(), Some("kitchen"));
        assert!(get("version").is_some());
    }
}
