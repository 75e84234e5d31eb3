//! The answer audio hosted ESPHome devices fetch: a tiny HTTP listener
//! (`[esphome] audio_bind`) serving each answer once as a WAV at
//! `/esphome/audio/<token>.wav`.
//!
//! Each URL is unguessable (two random v4 UUIDs: 244 random bits),
//! single-use (the clip is removed as it is served) and expires after
//! [`TTL`], so it needs no bearer token; at most [`MAX_CLIPS`] clips wait
//! (oldest out), so memory stays bounded. Served whether or not `[api]
//! enabled` is set. A request head is read within 4 KiB and 5 s.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cancel::CancelToken;

/// How long a URL stays valid.
pub const TTL: Duration = Duration::from_secs(60);
/// Most clips waiting to be fetched.
pub const MAX_CLIPS: usize = 32;
/// Largest request head read.
const MAX_HEAD: usize = 4096;
/// A request must arrive within this long.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
const PREFIX: &str = "/esphome/audio/";

struct Clip {
    wav: Vec<u8>,
    expires: Instant,
}

/// The running listener; clone to publish from several device threads.
#[derive(Clone)]
pub struct AudioUrls {
    clips: Arc<Mutex<HashMap<String, Clip>>>,
    port: u16,
}

impl AudioUrls {
    /// Bind `addr` and serve on a thread until `stop`.
    pub fn start(addr: &str, stop: &CancelToken) -> Result<AudioUrls, String> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| format!("esphome.audio_bind: cannot listen on {addr} (in use?): {e}"))?;
        let local = listener
            .local_addr()
            .map_err(|e| format!("esphome.audio_bind: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("esphome.audio_bind: {e}"))?;
        let urls = AudioUrls {
            clips: Arc::new(Mutex::new(HashMap::new())),
            port: local.port(),
        };
        let serving = urls.clone();
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("esphome-audio".into())
            .spawn(move || serving.accept_loop(listener, &stop))
            .map_err(|e| format!("cannot start the ESPHome audio thread: {e}"))?;
        tracing::info!("esphome: answer audio served on port {}", local.port());
        Ok(urls)
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Keep `wav` for one fetch within [`TTL`]; its URL on `host` (the
    /// address the device reaches earshot at).
    pub fn publish(&self, host: std::net::IpAddr, wav: Vec<u8>) -> String {
        let token = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let now = Instant::now();
        if let Ok(mut clips) = self.clips.lock() {
            clips.retain(|_, c| c.expires > now);
            while clips.len() >= MAX_CLIPS {
                let oldest = clips
                    .iter()
                    .min_by_key(|(_, c)| c.expires)
                    .map(|(k, _)| k.clone());
                match oldest {
                    Some(k) => {
                        clips.remove(&k);
                    }
                    None => break,
                }
            }
            clips.insert(
                token.clone(),
                Clip {
                    wav,
                    expires: now + TTL,
                },
            );
        }
        let addr = SocketAddr::new(host, self.port);
        format!("http://{addr}{PREFIX}{token}.wav")
    }

    /// Take a clip: once, and only before it expires.
    fn take(&self, token: &str) -> Option<Vec<u8>> {
        let mut clips = self.clips.lock().ok()?;
        let clip = clips.remove(token)?;
        (clip.expires > Instant::now()).then_some(clip.wav)
    }

    fn accept_loop(&self, listener: TcpListener, stop: &CancelToken) {
        while !stop.is_cancelled() {
            match listener.accept() {
                Ok((stream, _)) => {
                    let me = self.clone();
                    let _ = std::thread::Builder::new()
                        .name("esphome-audio-conn".into())
                        .spawn(move || me.serve(stream));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => {
                    tracing::warn!("esphome: audio listener: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    fn serve(&self, mut stream: TcpStream) {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(HEAD_TIMEOUT));
        let _ = stream.set_write_timeout(Some(Duration::from_secs(30)));
        let mut head = Vec::with_capacity(512);
        let mut buf = [0u8; 512];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
            if head.len() > MAX_HEAD {
                let _ = stream.write_all(b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                return;
            }
        }
        let line = String::from_utf8_lossy(&head);
        let mut parts = line.lines().next().unwrap_or("").split(' ');
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let token = path
            .strip_prefix(PREFIX)
            .and_then(|t| t.strip_suffix(".wav"))
            .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()));
        let wav = match (method, token) {
            ("GET", Some(token)) => self.take(token),
            _ => None,
        };
        let Some(wav) = wav else {
            tracing::info!(
                "esphome: audio {method} {path:.40}: not found (used, expired or never issued)"
            );
            let _ = stream.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            return;
        };
        let header = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: audio/wav\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
            wav.len()
        );
        let _ = stream
            .write_all(header.as_bytes())
            .and_then(|_| stream.write_all(&wav));
    }
}

/// A mono clip (samples in [-1, 1]) as 16-bit PCM WAV bytes.
pub fn wav(samples: &[f32], sample_rate: u32) -> Vec<u8> {
    let pcm: Vec<i16> = samples
        .iter()
        .map(|s| (s.clamp(-1.0, 1.0) * 32767.0) as i16)
        .collect();
    crate::audio::wav::mono_wav(&pcm, sample_rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(port: u16, path: &str) -> (String, usize) {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        let mut body = Vec::new();
        s.read_to_end(&mut body).unwrap();
        let text = String::from_utf8_lossy(&body);
        let status = text.lines().next().unwrap_or("").to_string();
        (status, body.len())
    }

    #[test]
    fn a_url_serves_once_and_unknown_tokens_do_not() {
        let stop = CancelToken::new();
        let urls = AudioUrls::start("127.0.0.1:0", &stop).unwrap();
        let url = urls.publish("127.0.0.1".parse().unwrap(), wav(&[0.5; 1600], 16000));
        let path = url
            .split_once(&format!(":{}", urls.port()))
            .unwrap()
            .1
            .to_string();
        let (status, len) = get(urls.port(), &path);
        assert!(status.contains("200"), "{status}");
        assert!(len > 3200);
        assert!(get(urls.port(), &path).0.contains("404"), "served twice");
        let guess = format!("{PREFIX}{}.wav", "0".repeat(64));
        assert!(get(urls.port(), &guess).0.contains("404"));
        stop.cancel();
    }

    #[test]
    fn clips_are_bounded_and_expire() {
        let urls = AudioUrls {
            clips: Arc::new(Mutex::new(HashMap::new())),
            port: 1,
        };
        let host = "127.0.0.1".parse().unwrap();
        for _ in 0..MAX_CLIPS + 5 {
            urls.publish(host, vec![0; 10]);
        }
        assert_eq!(urls.clips.lock().unwrap().len(), MAX_CLIPS);
        let url = urls.publish(host, vec![1]);
        let token = url
            .rsplit('/')
            .next()
            .unwrap()
            .trim_end_matches(".wav")
            .to_string();
        urls.clips.lock().unwrap().get_mut(&token).unwrap().expires = Instant::now();
        assert_eq!(urls.take(&token), None, "an expired clip is not served");
    }
}
