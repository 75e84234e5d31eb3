//! Sample-rate conversion to the pipeline's 16 kHz with rubato.
//!
//! Two shapes: [`to_16k`] converts a whole buffer (WAV files), and
//! [`Stream16k`] converts a live stream chunk by chunk on the reader
//! thread (never in the audio callback: rubato's FFT resampler is
//! allocation-free per call but not something to run under a real-time
//! deadline on a Pi).

use rubato::{FftFixedIn, Resampler};

use super::SAMPLE_RATE;

/// Input frames per resampler call: 10 ms at 48 kHz; small enough to keep
/// latency low, large enough for the FFT to be efficient.
const CHUNK: usize = 480;

/// Convert a whole mono buffer from `from` Hz to 16 kHz. The resampler's
/// delay is trimmed so sample `i` of the output lines up with time
/// `i / 16000` of the input, and the tail is flushed.
pub fn to_16k(samples: &[f32], from: u32) -> Result<Vec<f32>, String> {
    if from == SAMPLE_RATE || samples.is_empty() {
        return Ok(samples.to_vec());
    }
    if from == 0 {
        return Err("sample rate 0 Hz".into());
    }
    let mut rs = FftFixedIn::<f32>::new(from as usize, SAMPLE_RATE as usize, CHUNK, 2, 1)
        .map_err(|e| format!("cannot resample from {from} Hz: {e}"))?;
    let expected = (samples.len() as u64 * u64::from(SAMPLE_RATE) / u64::from(from)) as usize;
    let delay = rs.output_delay();
    let mut out = Vec::with_capacity(expected + delay + CHUNK);
    let mut buf = rs.output_buffer_allocate(true);
    let mut pos = 0;
    while pos + rs.input_frames_next() <= samples.len() {
        let n = rs.input_frames_next();
        let (_, written) = rs
            .process_into_buffer(&[&samples[pos..pos + n]], &mut buf, None)
            .map_err(|e| e.to_string())?;
        out.extend_from_slice(&buf[0][..written]);
        pos += n;
    }
    // The remainder, then zeros until the delayed tail is out.
    let rest = &samples[pos..];
    if !rest.is_empty() {
        let (_, written) = rs
            .process_partial_into_buffer(Some(&[rest]), &mut buf, None)
            .map_err(|e| e.to_string())?;
        out.extend_from_slice(&buf[0][..written]);
    }
    while out.len() < expected + delay {
        let (_, written) = rs
            .process_partial_into_buffer(None::<&[&[f32]]>, &mut buf, None)
            .map_err(|e| e.to_string())?;
        if written == 0 {
            break;
        }
        out.extend_from_slice(&buf[0][..written]);
    }
    let end = (delay + expected).min(out.len());
    Ok(out[delay.min(end)..end].to_vec())
}

/// A streaming converter from the device rate to 16 kHz mono, fed in
/// arbitrary-sized pieces. Buffers are allocated once at construction.
pub struct Stream16k {
    inner: Option<FftFixedIn<f32>>,
    pending: Vec<f32>,
    out_buf: Vec<Vec<f32>>,
}

impl Stream16k {
    /// A converter from `from` Hz (16 kHz = pass-through).
    pub fn new(from: u32) -> Result<Self, String> {
        if from == SAMPLE_RATE {
            return Ok(Self {
                inner: None,
                pending: Vec::new(),
                out_buf: Vec::new(),
            });
        }
        let rs = FftFixedIn::<f32>::new(from as usize, SAMPLE_RATE as usize, CHUNK, 2, 1)
            .map_err(|e| format!("cannot resample from {from} Hz: {e}"))?;
        let out_buf = rs.output_buffer_allocate(true);
        Ok(Self {
            inner: Some(rs),
            pending: Vec::with_capacity(CHUNK * 4),
            out_buf,
        })
    }

    /// Feed device-rate mono samples; append converted ones to `out`.
    pub fn push(&mut self, input: &[f32], out: &mut Vec<f32>) -> Result<(), String> {
        let Some(rs) = self.inner.as_mut() else {
            out.extend_from_slice(input);
            return Ok(());
        };
        self.pending.extend_from_slice(input);
        let mut pos = 0;
        while self.pending.len() - pos >= rs.input_frames_next() {
            let n = rs.input_frames_next();
            let (_, written) = rs
                .process_into_buffer(&[&self.pending[pos..pos + n]], &mut self.out_buf, None)
                .map_err(|e| e.to_string())?;
            out.extend_from_slice(&self.out_buf[0][..written]);
            pos += n;
        }
        self.pending.drain(..pos);
        Ok(())
    }

    /// Forget buffered input (after a flush of the source).
    pub fn reset(&mut self) {
        self.pending.clear();
        if let Some(rs) = self.inner.as_mut() {
            rs.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(rate: u32, hz: f32, secs: f32) -> Vec<f32> {
        let n = (rate as f32 * secs) as usize;
        (0..n)
            .map(|i| 0.5 * (2.0 * std::f32::consts::PI * hz * i as f32 / rate as f32).sin())
            .collect()
    }

    #[test]
    fn whole_buffer_keeps_length_and_pitch() {
        let input = sine(48_000, 440.0, 1.0);
        let out = to_16k(&input, 48_000).unwrap();
        assert_eq!(out.len(), 16_000);
        let reference = sine(16_000, 440.0, 1.0);
        // Ignore the edges (filter ramp-up); the middle must match closely.
        let err: f32 = out[1000..15000]
            .iter()
            .zip(&reference[1000..15000])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(err < 0.02, "max error {err}");
    }

    #[test]
    fn exact_multiple_of_the_chunk_is_fine() {
        // 48 kHz × 1 s = 100 chunks of 480 exactly: no remainder to flush.
        let out = to_16k(&sine(48_000, 440.0, 1.0), 48_000).unwrap();
        assert_eq!(out.len(), 16_000);
    }

    #[test]
    fn stream_matches_rate() {
        let input = sine(44_100, 300.0, 2.0);
        let mut s = Stream16k::new(44_100).unwrap();
        let mut out = Vec::new();
        for piece in input.chunks(333) {
            s.push(piece, &mut out).unwrap();
        }
        let expected = 32_000;
        assert!(
            (out.len() as i64 - expected).abs() < 600,
            "{} samples",
            out.len()
        );
    }
}
