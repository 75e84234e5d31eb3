//! What a browser page could send, refused: the `Host` and `Origin` checks
//! and the JSON-only rule for state-changing routes.
//!
//! A loopback API without a token trusts everything that can reach it, and
//! a web page can: a `text/plain` POST goes out without a CORS preflight,
//! and a DNS-rebinding page talks to 127.0.0.1 under its own name. So the
//! `Host` must be the bound address, `localhost` or a name from
//! `[api] allowed_hosts` (a rebinding page sends its own name); an `Origin`
//! (which browsers add to cross-site and to all POST requests) must be in
//! `[api] allowed_origins`; and bodies must be `application/json` (or
//! multipart for /api/voice), which a page can only send after a preflight
//! this API does not grant to unknown origins.

use std::net::{IpAddr, SocketAddr};

use anyhow::{anyhow, Result};

use super::{ApiConfig, ApiError};

/// The checked `[api] allowed_hosts` / `allowed_origins` and the bound
/// address.
#[derive(Debug, Clone)]
pub struct Policy {
    bound: IpAddr,
    hosts: Vec<String>,
    origins: Vec<String>,
}

impl Policy {
    /// Normalise and check the lists; a malformed entry is a start-up
    /// error that names it.
    pub fn new(bound: SocketAddr, config: &ApiConfig) -> Result<Policy> {
        let mut hosts = Vec::new();
        for entry in &config.allowed_hosts {
            let name = entry.trim().trim_end_matches('.').to_ascii_lowercase();
            // A port is allowed in the entry but not compared.
            let name = match split_host(&name) {
                Some((host, _)) => host.to_string(),
                None => name,
            };
            if name.is_empty() || name.contains(['/', ' ', '*', '@']) {
                return Err(anyhow!(
                    "[api] allowed_hosts entry {entry:?} is not a host name; write names like \"earshot.local\""
                ));
            }
            hosts.push(name);
        }
        let mut origins = Vec::new();
        for entry in &config.allowed_origins {
            let origin = normalize_origin(entry);
            let scheme_ok = origin.starts_with("http://") || origin.starts_with("https://");
            let rest = origin.split_once("://").map(|(_, r)| r).unwrap_or("");
            if !scheme_ok || rest.is_empty() || rest.contains(['/', ' ', '*']) {
                return Err(anyhow!(
                    "[api] allowed_origins entry {entry:?} is not an origin; write scheme://host[:port] like \"http://localhost:3000\""
                ));
            }
            origins.push(origin);
        }
        Ok(Policy {
            bound: bound.ip(),
            hosts,
            origins,
        })
    }

    /// The `Host` header must name this server: the bound IP (any IP when
    /// bound to all interfaces), `localhost`, or an allowed name. Any port.
    /// HTTP/1.0 clients may leave it out; HTTP/1.1 clients must send it.
    pub fn check_host(&self, host: Option<&str>, http10: bool) -> Result<(), ApiError> {
        let Some(host) = host else {
            if http10 {
                return Ok(());
            }
            return Err(ApiError::bad_request(
                "the request has no Host header; HTTP/1.1 requires one",
            ));
        };
        let refuse = || {
            ApiError::new(
                403,
                format!(
                    "Host {host:?} is not this server's address; use http://{} or http://localhost, or add the name to [api] allowed_hosts",
                    match self.bound {
                        IpAddr::V6(ip) => format!("[{ip}]"),
                        IpAddr::V4(ip) => ip.to_string(),
                    }
                ),
            )
        };
        let lower = host.to_ascii_lowercase();
        let Some((name, _port)) = split_host(&lower) else {
            return Err(ApiError::bad_request(format!(
                "the Host header {host:?} is malformed; send host[:port]"
            )));
        };
        if let Ok(ip) = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            // An IP literal cannot be rebound to another site's name.
            return if ip == self.bound || self.bound.is_unspecified() {
                Ok(())
            } else {
                Err(refuse())
            };
        }
        if name == "localhost" || self.hosts.iter().any(|h| h == name) {
            return Ok(());
        }
        Err(refuse())
    }

    /// Every `Origin` header must be an allowed origin. `Ok(Some(origin))`
    /// means a browser page from an allowed origin (answer with CORS
    /// headers); `Ok(None)` means no `Origin` (not a browser page).
    pub fn check_origin<'a>(
        &self,
        mut origins: impl Iterator<Item = &'a str>,
    ) -> Result<Option<String>, ApiError> {
        let Some(first) = origins.next() else {
            return Ok(None);
        };
        let first = first.trim();
        let allowed = |o: &str| self.origins.iter().any(|a| *a == normalize_origin(o));
        if !allowed(first) {
            return Err(ApiError::new(
                403,
                format!(
                    "requests from web pages at {first:?} are not allowed; add the origin to [api] allowed_origins to let that page use the API"
                ),
            ));
        }
        if let Some(other) = origins.find(|o| !allowed(o)) {
            return Err(ApiError::new(
                403,
                format!("the request has more than one Origin ({first:?}, {other:?}); send one"),
            ));
        }
        Ok(Some(first.to_string()))
    }
}

/// `host[:port]` → (host, port), with `[v6]` kept in brackets; `None` when
/// malformed (a bare IPv6 address, a port that is not a number).
fn split_host(value: &str) -> Option<(&str, Option<u16>)> {
    if value.is_empty() {
        return None;
    }
    if value.starts_with('[') {
        let close = value.find(']')?;
        let (host, rest) = value.split_at(close + 1);
        return match rest {
            "" => Some((host, None)),
            _ => Some((host, Some(rest.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match value.split_once(':') {
        None => Some((value, None)),
        Some((host, port)) if !host.is_empty() && !port.contains(':') => {
            Some((host, Some(port.parse().ok()?)))
        }
        Some(_) => None,
    }
}

fn normalize_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// Whether a `Content-Type` value is `mime` (parameters such as
/// `; charset=utf-8` allowed, case-insensitive).
pub fn is_media_type(content_type: Option<&str>, mime: &str) -> bool {
    content_type
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case(mime))
}

/// The 415 for a state-changing route whose body is not JSON.
pub fn require_json(content_type: Option<&str>, path: &str) -> Result<(), ApiError> {
    if is_media_type(content_type, "application/json") {
        return Ok(());
    }
    Err(ApiError::new(
        415,
        format!(
            "{path} takes a JSON body; send Content-Type: application/json (curl -H 'Content-Type: application/json'), not {:?}",
            content_type.unwrap_or("nothing")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(bind: &str, hosts: &[&str], origins: &[&str]) -> Policy {
        let config = ApiConfig {
            allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
            ..ApiConfig::default()
        };
        Policy::new(bind.parse().unwrap(), &config).unwrap()
    }

    #[test]
    fn host_must_name_this_server() {
        let p = policy("127.0.0.1:8080", &["Earshot.local"], &[]);
        for ok in [
            "127.0.0.1:8080",
            "127.0.0.1",
            "localhost:8080",
            "LOCALHOST",
            "earshot.local:1",
        ] {
            assert!(p.check_host(Some(ok), false).is_ok(), "{ok}");
        }
        for (bad, status) in [
            ("evil.example:8080", 403),
            ("127.0.0.2:8080", 403),
            ("[::1]:8080", 403),
            ("localhost.evil.example", 403),
            ("::1", 400),
            ("127.0.0.1:http", 400),
        ] {
            assert_eq!(
                p.check_host(Some(bad), false).unwrap_err().status,
                status,
                "{bad}"
            );
        }
        assert_eq!(p.check_host(None, false).unwrap_err().status, 400);
        assert!(p.check_host(None, true).is_ok());
        let all = policy("0.0.0.0:8080", &[], &[]);
        assert!(all.check_host(Some("192.168.1.5:8080"), false).is_ok());
        assert!(all.check_host(Some("[fe80::1]:8080"), false).is_ok());
        assert_eq!(
            all.check_host(Some("rebind.example"), false)
                .unwrap_err()
                .status,
            403
        );
        let v6 = policy("[::1]:8080", &[], &[]);
        assert!(v6.check_host(Some("[::1]:8080"), false).is_ok());
    }

    #[test]
    fn origin_must_be_listed() {
        let p = policy("127.0.0.1:8080", &[], &["http://localhost:3000/"]);
        assert_eq!(p.check_origin(std::iter::empty()).unwrap(), None);
        assert_eq!(
            p.check_origin(["http://LOCALHOST:3000"].into_iter())
                .unwrap()
                .as_deref(),
            Some("http://LOCALHOST:3000")
        );
        for bad in ["https://evil.example", "null", "http://localhost:3001"] {
            let err = p.check_origin([bad].into_iter()).unwrap_err();
            assert_eq!(err.status, 403, "{bad}");
            assert!(err.message.contains("allowed_origins"), "{}", err.message);
        }
        assert_eq!(
            p.check_origin(["http://localhost:3000", "https://evil.example"].into_iter())
                .unwrap_err()
                .status,
            403
        );
    }

    #[test]
    fn bad_list_entries_stop_the_start() {
        let config = ApiConfig {
            allowed_origins: vec!["localhost:3000".into()],
            ..ApiConfig::default()
        };
        let err = Policy::new("127.0.0.1:0".parse().unwrap(), &config)
            .unwrap_err()
            .to_string();
        assert!(err.contains("allowed_origins"), "{err}");
        let config = ApiConfig {
            allowed_hosts: vec!["*.example".into()],
            ..ApiConfig::default()
        };
        assert!(Policy::new("127.0.0.1:0".parse().unwrap(), &config).is_err());
    }

    #[test]
    fn content_types() {
        assert!(is_media_type(
            Some("Application/JSON; charset=utf-8"),
            "application/json"
        ));
        assert!(!is_media_type(Some("text/plain"), "application/json"));
        assert!(!is_media_type(None, "application/json"));
        let err = require_json(Some("text/plain"), "/api/chat").unwrap_err();
        assert_eq!(err.status, 415);
        assert!(err.message.contains("application/json"));
    }
}
