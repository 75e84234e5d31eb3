//! The ESPHome native API's two framings, with hard size limits checked
//! before anything is allocated:
//!
//! - plaintext: `0x00`, varint payload length, varint message type, the
//!   protobuf payload;
//! - Noise: `0x01`, a big-endian u16 frame length, the frame (during the
//!   handshake its first byte says what it is; afterwards it is
//!   ciphertext whose plaintext is type (u16 BE), length (u16 BE),
//!   payload — see [`super::noise`]).
//!
//! A peer announcing a length of 2^31 (or any varint longer than five
//! bytes) is refused with a [`FrameError`] naming it, never read.

use std::io::{self, Read};

/// The plaintext preamble byte.
pub const PLAIN: u8 = 0x00;
/// The Noise preamble byte.
pub const NOISE: u8 = 0x01;
/// Largest protobuf payload a peer may send. ESPHome's own messages are
/// far below it; an audio chunk is at most a few KiB.
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// Largest message type accepted (ESPHome's ids fit in a u16, which is
/// also all the Noise framing can carry).
pub const MAX_TYPE: u32 = u16::MAX as u32;

/// What is wrong with what a peer sent (the connection is then closed with
/// this as its one log line).
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("the peer closed the connection")]
    Closed,
    #[error("the peer speaks the encrypted API; set an encryption key for it")]
    NeedsEncryption,
    #[error("the peer speaks the plaintext API but encryption is required")]
    NeedsPlaintext,
    #[error("bad frame preamble 0x{0:02x} (not an ESPHome API peer?)")]
    Preamble(u8),
    #[error("a varint longer than 5 bytes")]
    Varint,
    #[error("frame length {0} is over the {max}-byte limit", max = MAX_PAYLOAD)]
    TooLong(u64),
    #[error("message type {0} is out of range")]
    Type(u64),
    #[error("the frame was cut off")]
    Truncated,
    #[error("Noise handshake failed: wrong encryption key")]
    WrongKey,
    #[error("Noise handshake failed: {0}")]
    Handshake(String),
    #[error("a frame failed to decrypt (corrupt or forged)")]
    Decrypt,
    #[error("a message of {0} bytes is too large to send")]
    TooLarge(usize),
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl FrameError {
    /// An I/O error, with the peer hanging up (reset, aborted, a broken
    /// pipe) said as [`FrameError::Closed`]: the log line then says what
    /// happened, not an OS error number.
    pub fn io(e: io::Error) -> FrameError {
        match e.kind() {
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => FrameError::Closed,
            _ => FrameError::Io(e),
        }
    }

    /// Whether this is a read timeout (the caller decides whether silence
    /// is allowed yet).
    pub fn is_timeout(&self) -> bool {
        matches!(self, FrameError::Io(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
    }
}

/// Read one byte; `None` at a clean end of stream.
fn byte(r: &mut impl Read) -> Result<Option<u8>, FrameError> {
    let mut b = [0u8; 1];
    loop {
        match r.read(&mut b) {
            Ok(0) => return Ok(None),
            Ok(_) => return Ok(Some(b[0])),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FrameError::io(e)),
        }
    }
}

/// Read exactly `buf.len()` bytes; a cut stream is [`FrameError::Truncated`].
fn exact(r: &mut impl Read, buf: &mut [u8]) -> Result<(), FrameError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => FrameError::Truncated,
        _ => FrameError::Io(e),
    })
}

/// A varint of at most five bytes.
fn varint(r: &mut impl Read) -> Result<u64, FrameError> {
    let mut value = 0u64;
    for i in 0..5 {
        let b = byte(r)?.ok_or(FrameError::Truncated)?;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(FrameError::Varint)
}

/// Append `value` as a varint.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let low = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

/// One plaintext frame: `(type, payload)`, `Err(Closed)` at a clean end of
/// stream before a frame begins.
pub fn read_plain(r: &mut impl Read) -> Result<(u32, Vec<u8>), FrameError> {
    match byte(r)? {
        None => return Err(FrameError::Closed),
        Some(PLAIN) => {}
        Some(NOISE) => return Err(FrameError::NeedsEncryption),
        Some(other) => return Err(FrameError::Preamble(other)),
    }
    read_plain_rest(r)
}

/// The rest of a plaintext frame after its preamble.
pub fn read_plain_rest(r: &mut impl Read) -> Result<(u32, Vec<u8>), FrameError> {
    let len = varint(r)?;
    if len > MAX_PAYLOAD as u64 {
        return Err(FrameError::TooLong(len));
    }
    let kind = varint(r)?;
    if kind > u64::from(MAX_TYPE) {
        return Err(FrameError::Type(kind));
    }
    let mut payload = vec![0u8; len as usize];
    exact(r, &mut payload)?;
    Ok((kind as u32, payload))
}

/// A plaintext frame for `payload` of message type `kind`.
pub fn plain(kind: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.push(PLAIN);
    put_varint(&mut out, payload.len() as u64);
    put_varint(&mut out, u64::from(kind));
    out.extend_from_slice(payload);
    out
}

/// One Noise frame's body (at most 65535 bytes by construction);
/// `Err(Closed)` at a clean end of stream before a frame begins.
pub fn read_noise(r: &mut impl Read) -> Result<Vec<u8>, FrameError> {
    match byte(r)? {
        None => return Err(FrameError::Closed),
        Some(NOISE) => {}
        Some(PLAIN) => return Err(FrameError::NeedsPlaintext),
        Some(other) => return Err(FrameError::Preamble(other)),
    }
    read_noise_rest(r)
}

/// The rest of a Noise frame after its preamble.
pub fn read_noise_rest(r: &mut impl Read) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 2];
    exact(r, &mut len)?;
    let mut body = vec![0u8; usize::from(u16::from_be_bytes(len))];
    exact(r, &mut body)?;
    Ok(body)
}

/// A Noise frame around `body` (`body` must fit in a u16 length; callers
/// keep messages under [`MAX_PAYLOAD`]).
pub fn noise(body: &[u8]) -> Vec<u8> {
    let len = u16::try_from(body.len()).unwrap_or(u16::MAX);
    let mut out = Vec::with_capacity(body.len() + 3);
    out.push(NOISE);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body[..usize::from(len)]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_frames_round_trip() {
        for (kind, payload) in [(1u32, vec![]), (92, vec![7u8; 300]), (1000, vec![1, 2, 3])] {
            let bytes = plain(kind, &payload);
            let (k, p) = read_plain(&mut bytes.as_slice()).unwrap();
            assert_eq!((k, p), (kind, payload));
        }
    }

    #[test]
    fn a_peer_hanging_up_is_closed_and_other_errors_stay_io() {
        struct Reset;
        impl Read for Reset {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::ErrorKind::ConnectionReset.into())
            }
        }
        assert!(matches!(read_plain(&mut Reset), Err(FrameError::Closed)));
        for kind in [io::ErrorKind::BrokenPipe, io::ErrorKind::ConnectionAborted] {
            assert!(matches!(FrameError::io(kind.into()), FrameError::Closed));
        }
        let other = FrameError::io(io::ErrorKind::PermissionDenied.into());
        assert!(matches!(other, FrameError::Io(_)), "{other}");
        assert!(FrameError::io(io::ErrorKind::WouldBlock.into()).is_timeout());
    }

    #[test]
    fn a_length_of_two_to_the_31_is_refused_unread() {
        let mut bytes = vec![PLAIN];
        put_varint(&mut bytes, 1 << 31);
        put_varint(&mut bytes, 1);
        let err = read_plain(&mut bytes.as_slice()).unwrap_err();
        assert!(
            matches!(err, FrameError::TooLong(n) if n == 1 << 31),
            "{err}"
        );
    }

    #[test]
    fn bad_varints_preambles_and_cut_frames_are_errors() {
        let long = [PLAIN, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(matches!(
            read_plain(&mut &long[..]),
            Err(FrameError::Varint)
        ));
        assert!(matches!(
            read_plain(&mut &[NOISE][..]),
            Err(FrameError::NeedsEncryption)
        ));
        assert!(matches!(
            read_plain(&mut &[0x7f][..]),
            Err(FrameError::Preamble(0x7f))
        ));
        assert!(matches!(read_plain(&mut &[][..]), Err(FrameError::Closed)));
        let cut = &plain(3, &[1, 2, 3, 4])[..5];
        assert!(matches!(
            read_plain(&mut &cut[..]),
            Err(FrameError::Truncated)
        ));
        let mut huge_type = vec![PLAIN, 0];
        put_varint(&mut huge_type, 1 << 20);
        assert!(matches!(
            read_plain(&mut huge_type.as_slice()),
            Err(FrameError::Type(_))
        ));
    }

    #[test]
    fn noise_frames_round_trip_and_refuse_plaintext() {
        let bytes = noise(b"hello");
        assert_eq!(&bytes[..3], &[NOISE, 0, 5]);
        assert_eq!(read_noise(&mut bytes.as_slice()).unwrap(), b"hello");
        assert!(matches!(
            read_noise(&mut &plain(1, &[])[..]),
            Err(FrameError::NeedsPlaintext)
        ));
    }
}
