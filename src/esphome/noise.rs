//! The ESPHome API's encryption: `Noise_NNpsk0_25519_ChaChaPoly_SHA256`
//! (the `snow` crate) with the pre-shared key of `encryption_key`, as
//! ESPHome's `api_frame_helper_noise` and aioesphomeapi's
//! `_frame_helper/noise.py` do it:
//!
//! 1. the client sends an empty frame (its "hello": `01 00 00`), then a
//!    frame `00` + the first handshake message;
//! 2. the server answers its hello with `01` + name `\0` + MAC `\0` (the
//!    chosen protocol and who it is), and the handshake message with
//!    `00` and the second handshake message — or `01` and "Handshake MAC
//!    failure" when the key is wrong;
//! 3. the prologue both mix in is `"NoiseAPIInit"`, the client hello's
//!    length (u16 BE) and the hello itself (empty: `"NoiseAPIInit\0\0"`);
//! 4. afterwards each frame is one ciphertext whose plaintext is
//!    type (u16 BE), length (u16 BE), payload.
//!
//! [`Codec`] is a connection's framing after the handshake (plaintext or
//! Noise); it is shared by a reader and a writer thread (`&self`).

use std::io::{Read, Write};
use std::sync::Mutex;

use snow::{HandshakeState, TransportState};

use super::frame::{self, FrameError, MAX_PAYLOAD};

/// The Noise protocol ESPHome uses.
pub const PROTOCOL: &str = "Noise_NNpsk0_25519_ChaChaPoly_SHA256";
/// The fixed start of the prologue.
const PROLOGUE: &[u8] = b"NoiseAPIInit";
/// What ESPHome answers a handshake that fails to authenticate (the
/// client reports "Invalid encryption key" for exactly this text).
const MAC_FAILURE: &str = "Handshake MAC failure";
/// Bytes of one Noise message beyond its payload (the AEAD tag).
const TAG: usize = 16;
/// The longest Noise message.
const MAX_NOISE: usize = 65535;

fn prologue(hello: &[u8]) -> Vec<u8> {
    let mut p = PROLOGUE.to_vec();
    p.extend_from_slice(&(hello.len() as u16).to_be_bytes());
    p.extend_from_slice(hello);
    p
}

fn builder_error(e: snow::Error) -> FrameError {
    FrameError::Handshake(e.to_string())
}

fn handshake(psk: &[u8; 32], hello: &[u8], initiator: bool) -> Result<HandshakeState, FrameError> {
    let params = PROTOCOL
        .parse()
        .map_err(|e: snow::Error| FrameError::Handshake(e.to_string()))?;
    let prologue = prologue(hello);
    let builder = snow::Builder::new(params)
        .psk(0, psk)
        .map_err(builder_error)?
        .prologue(&prologue)
        .map_err(builder_error)?;
    if initiator {
        builder.build_initiator()
    } else {
        builder.build_responder()
    }
    .map_err(builder_error)
}

/// The server side: run the handshake on a fresh connection whose peer
/// speaks first. `name` and `mac` go in the server hello. A wrong key gets
/// ESPHome's "Handshake MAC failure" frame and [`FrameError::WrongKey`].
pub fn accept<S: Read + Write>(
    stream: &mut S,
    psk: &[u8; 32],
    name: &str,
    mac: &str,
) -> Result<Codec, FrameError> {
    let hello = frame::read_noise(stream)?;
    let mut state = handshake(psk, &hello, false)?;
    let mut server_hello = vec![frame::NOISE];
    server_hello.extend_from_slice(name.as_bytes());
    server_hello.push(0);
    server_hello.extend_from_slice(mac.as_bytes());
    server_hello.push(0);
    stream.write_all(&frame::noise(&server_hello))?;
    let msg = frame::read_noise(stream)?;
    if msg.first() != Some(&0) {
        return Err(FrameError::Handshake(
            "the client's handshake frame has no 0x00 marker".into(),
        ));
    }
    let mut scratch = vec![0u8; MAX_NOISE];
    if state.read_message(&msg[1..], &mut scratch).is_err() {
        let mut refusal = vec![1u8];
        refusal.extend_from_slice(MAC_FAILURE.as_bytes());
        let _ = stream.write_all(&frame::noise(&refusal));
        return Err(FrameError::WrongKey);
    }
    let n = state
        .write_message(&[], &mut scratch)
        .map_err(builder_error)?;
    let mut reply = vec![0u8];
    reply.extend_from_slice(&scratch[..n]);
    stream.write_all(&frame::noise(&reply))?;
    let transport = state.into_transport_mode().map_err(builder_error)?;
    Ok(Codec::noise(transport))
}

/// The client side (earshot dialling a device): run the handshake and
/// return the codec and the name the device gave in its hello.
pub fn connect<S: Read + Write>(
    stream: &mut S,
    psk: &[u8; 32],
) -> Result<(Codec, String), FrameError> {
    let mut state = handshake(psk, &[], true)?;
    let mut scratch = vec![0u8; MAX_NOISE];
    let n = state
        .write_message(&[], &mut scratch)
        .map_err(builder_error)?;
    let mut first = frame::noise(&[]);
    let mut msg = vec![0u8];
    msg.extend_from_slice(&scratch[..n]);
    first.extend_from_slice(&frame::noise(&msg));
    stream.write_all(&first)?;
    let server_hello = frame::read_noise(stream)?;
    if server_hello.first() != Some(&frame::NOISE) {
        return Err(FrameError::Handshake(
            "the device chose an unknown protocol".into(),
        ));
    }
    let name = server_hello[1..]
        .split(|b| *b == 0)
        .next()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_default();
    let reply = frame::read_noise(stream)?;
    match reply.first() {
        Some(0) => {}
        Some(_) => {
            let why = String::from_utf8_lossy(&reply[1..]).into_owned();
            return Err(if why == MAC_FAILURE {
                FrameError::WrongKey
            } else {
                FrameError::Handshake(why)
            });
        }
        None => return Err(FrameError::Handshake("empty handshake reply".into())),
    }
    state
        .read_message(&reply[1..], &mut scratch)
        .map_err(|_| FrameError::WrongKey)?;
    let transport = state.into_transport_mode().map_err(builder_error)?;
    Ok((Codec::noise(transport), name))
}

/// A connection's framing once it is set up: plaintext, or Noise with its
/// transport keys. Reads and writes may come from different threads.
pub struct Codec {
    noise: Option<Mutex<TransportState>>,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.noise.is_some() {
            "Codec(noise)"
        } else {
            "Codec(plain)"
        })
    }
}

impl Codec {
    /// Plaintext framing.
    pub fn plain() -> Codec {
        Codec { noise: None }
    }

    fn noise(transport: TransportState) -> Codec {
        Codec {
            noise: Some(Mutex::new(transport)),
        }
    }

    /// Whether the connection is encrypted.
    pub fn encrypted(&self) -> bool {
        self.noise.is_some()
    }

    /// Read one message: `(type, payload)`.
    pub fn read(&self, r: &mut impl Read) -> Result<(u32, Vec<u8>), FrameError> {
        let Some(noise) = &self.noise else {
            return frame::read_plain(r);
        };
        let body = frame::read_noise(r)?;
        let mut plain = vec![0u8; body.len()];
        let n = {
            let mut t = noise.lock().map_err(|_| FrameError::Decrypt)?;
            t.read_message(&body, &mut plain)
                .map_err(|_| FrameError::Decrypt)?
        };
        if n < 4 {
            return Err(FrameError::Truncated);
        }
        let kind = u32::from(u16::from_be_bytes([plain[0], plain[1]]));
        let len = usize::from(u16::from_be_bytes([plain[2], plain[3]]));
        if 4 + len > n {
            return Err(FrameError::Truncated);
        }
        Ok((kind, plain[4..4 + len].to_vec()))
    }

    /// The bytes that carry one message of type `kind`.
    pub fn encode(&self, kind: u32, payload: &[u8]) -> Result<Vec<u8>, FrameError> {
        if payload.len() > MAX_PAYLOAD || kind > frame::MAX_TYPE {
            return Err(FrameError::TooLarge(payload.len()));
        }
        let Some(noise) = &self.noise else {
            return Ok(frame::plain(kind, payload));
        };
        if payload.len() + 4 + TAG > MAX_NOISE {
            return Err(FrameError::TooLarge(payload.len()));
        }
        let mut plain = Vec::with_capacity(payload.len() + 4);
        plain.extend_from_slice(&(kind as u16).to_be_bytes());
        plain.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        plain.extend_from_slice(payload);
        let mut out = vec![0u8; plain.len() + TAG];
        let n = {
            let mut t = noise.lock().map_err(|_| FrameError::Decrypt)?;
            t.write_message(&plain, &mut out)
                .map_err(|e| FrameError::Handshake(e.to_string()))?
        };
        Ok(frame::noise(&out[..n]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn pair(
        server_key: [u8; 32],
        client_key: [u8; 32],
    ) -> (
        Result<Codec, FrameError>,
        Result<(Codec, String), FrameError>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            accept(&mut s, &server_key, "kitchen", "00:11:22:33:44:55")
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let client = connect(&mut c, &client_key);
        (server.join().unwrap(), client)
    }

    #[test]
    fn both_sides_agree_and_messages_round_trip() {
        let (server, client) = pair([7; 32], [7; 32]);
        let server = server.unwrap();
        let (client, name) = client.unwrap();
        assert_eq!(name, "kitchen");
        let wire = client.encode(92, b"event").unwrap();
        assert_eq!(
            server.read(&mut wire.as_slice()).unwrap(),
            (92, b"event".to_vec())
        );
        let wire = server.encode(1, &[]).unwrap();
        assert_eq!(client.read(&mut wire.as_slice()).unwrap(), (1, vec![]));
        // A replayed or flipped frame does not decrypt.
        let mut wire = client.encode(7, b"x").unwrap();
        let last = wire.len() - 1;
        wire[last] ^= 1;
        assert!(matches!(
            server.read(&mut wire.as_slice()),
            Err(FrameError::Decrypt)
        ));
    }

    #[test]
    fn a_wrong_key_fails_on_both_sides() {
        let (server, client) = pair([7; 32], [8; 32]);
        assert!(matches!(server, Err(FrameError::WrongKey)), "{server:?}");
        assert!(matches!(client, Err(FrameError::WrongKey)), "{client:?}");
    }
}
