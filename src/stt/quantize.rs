//! Whisper's weights as 8-bit blocks (ggml `q8_0`), derived once from the
//! shipped f16 model and kept beside it.
//!
//! Why: on this machine tiny.en's q8_0 weights are 34 MB smaller in memory
//! (issue 21 counts every megabyte of a 2 GB Pi) and a pass is ~15–20 %
//! faster (the encoder and decoder are memory-bound), for the same words
//! on the commands we measured (notes/latency.md). The registries we can
//! reach ship only the f16 file, so earshot writes the q8_0 file itself
//! the first time it loads the model: whisper.cpp's own `quantize`
//! example, done in Rust over the ggml that whisper-rs already links —
//! the same rule (every 2-D tensor except the positional embeddings and
//! the conv biases) and the same `ggml_quantize_chunk`, so the file is
//! byte for byte what `whisper-quantize MODEL OUT q8_0` writes.
//!
//! The derived file is named after the source's length and modification
//! time, so a replaced model is derived again; it goes to the models
//! directory when that is writable, else to `<state_dir>/cache`. Any
//! failure (a read-only disk, a full disk, a model this rule does not
//! fit) leaves the f16 model in use with one warning: quantising is an
//! optimisation, never a reason not to listen.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use whisper_rs::whisper_rs_sys as sys;

pub use super::Weights;

const MAGIC: u32 = 0x6767_6d6c;
const GGML_TYPE_F32: i32 = 0;
const GGML_TYPE_F16: i32 = 1;
const GGML_TYPE_Q8_0: i32 = 8;
/// `GGML_FTYPE_MOSTLY_Q8_0`
const FTYPE_Q8_0: i32 = 7;
/// `GGML_QNT_VERSION * GGML_QNT_VERSION_FACTOR`
const QNT_VERSION_BASE: i32 = 2 * 1000;
/// Elements per q8_0 block and the block's bytes (f16 scale + 32 × i8).
const Q8_BLOCK: usize = 32;
const Q8_BLOCK_BYTES: usize = 34;
/// whisper.cpp's `quantize` keeps these as they are.
const KEEP: [&str; 4] = [
    "encoder.conv1.bias",
    "encoder.conv2.bias",
    "encoder.positional_embedding",
    "decoder.positional_embedding",
];
/// Rows quantised at a time: bounds the f32 working copy (~1.5 MB for
/// tiny.en's 384-wide rows).
const ROWS_PER_STEP: usize = 1024;

/// The model whisper.cpp should load for `source` under `weights`: the
/// derived q8_0 file (written now if missing), or `source` itself when
/// `weights` is `File`, the source is already quantised, or deriving
/// failed (logged once as a warning).
pub fn model_to_load(source: &Path, weights: Weights, cache_dir: &Path) -> PathBuf {
    if weights == Weights::File {
        return source.to_path_buf();
    }
    match derived(source, cache_dir) {
        Ok(Some(path)) => path,
        Ok(None) => source.to_path_buf(),
        Err(e) => {
            tracing::warn!(
                model = %source.display(),
                "whisper runs on the f16 weights: cannot write its 8-bit copy ({e:#}); \
                 set [stt] whisper_weights = \"file\" to stop trying"
            );
            source.to_path_buf()
        }
    }
}

/// Where the q8_0 copy of `source` goes: its file name (after the
/// source's length and mtime) and the directories tried, in order.
struct Place {
    stem: String,
    name: String,
    dirs: [PathBuf; 2],
}

/// `None` when the source is not an f16/f32 whisper model (already
/// quantised).
fn place(source: &Path, cache_dir: &Path) -> Result<Option<Place>> {
    let meta = std::fs::metadata(source).with_context(|| format!("{}", source.display()))?;
    let ftype = read_ftype(source)?;
    if ftype % 1000 != 0 && ftype % 1000 != 1 {
        return Ok(None);
    }
    let stem = source
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("whisper")
        .to_string();
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let name = format!("{stem}.q8_0-{:x}-{:x}.bin", meta.len(), mtime);
    let beside = source.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(Some(Place {
        stem,
        name,
        dirs: [beside, cache_dir.to_path_buf()],
    }))
}

/// Whether `source` already holds quantised weights (nothing to derive).
pub fn already_quantised(source: &Path) -> bool {
    read_ftype(source).is_ok_and(|f| f % 1000 != 0 && f % 1000 != 1)
}

/// The q8_0 copy already written for `source`, if any: `doctor` looks,
/// it never writes.
pub fn existing_copy(source: &Path, cache_dir: &Path) -> Option<PathBuf> {
    let place = place(source, cache_dir).ok()??;
    place
        .dirs
        .iter()
        .map(|d| d.join(&place.name))
        .find(|p| p.is_file())
}

/// The q8_0 copy of `source`, written if it is not there yet; `None` when
/// the source is already quantised.
fn derived(source: &Path, cache_dir: &Path) -> Result<Option<PathBuf>> {
    let Some(place) = place(source, cache_dir)? else {
        return Ok(None);
    };
    if let Some(found) = existing_copy(source, cache_dir) {
        return Ok(Some(found));
    }
    let mut last_error = None;
    for dir in &place.dirs {
        match write_in(source, dir, &place.name, &place.stem) {
            Ok(path) => return Ok(Some(path)),
            Err(e) => last_error = Some(e),
        }
    }
    Err(last_error.unwrap_or_else(|| anyhow::anyhow!("no directory to write to")))
}

/// Quantise into `dir/name` through a temporary file renamed into place (a
/// killed process leaves no half file under the final name), then remove
/// older copies of the same model.
fn write_in(source: &Path, dir: &Path, name: &str, stem: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(name);
    // Unique per process and call: two threads (or processes) deriving the
    // same copy each write their own file; the last rename wins, and both
    // wrote the same bytes.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}-{call}.part", std::process::id()));
    let started = std::time::Instant::now();
    let written = write_file(source, &tmp).and_then(|()| {
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    tracing::info!(
        model = %path.display(),
        ms = started.elapsed().as_millis() as u64,
        "wrote whisper's 8-bit weights"
    );
    remove_older(dir, stem, name);
    Ok(path)
}

fn write_file(source: &Path, tmp: &Path) -> Result<()> {
    let input = BufReader::new(
        File::open(source).with_context(|| format!("cannot open {}", source.display()))?,
    );
    let file = File::create(tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    let mut output = BufWriter::new(&file);
    quantize_q8_0(input, &mut output).with_context(|| {
        format!(
            "{} is not a whisper.cpp model this can convert",
            source.display()
        )
    })?;
    output.flush().context("cannot write the 8-bit copy")?;
    drop(output);
    file.sync_all().context("cannot write the 8-bit copy")
}

fn remove_older(dir: &Path, stem: &str, keep: &str) {
    let prefix = format!("{stem}.q8_0-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        if file != keep && file.starts_with(&prefix) && file.ends_with(".bin") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The header's `ftype` (after the magic and ten hyper-parameters).
fn read_ftype(path: &Path) -> Result<i32> {
    let mut f = BufReader::new(File::open(path).with_context(|| format!("{}", path.display()))?);
    if read_u32(&mut f)? != MAGIC {
        bail!("not a ggml whisper model (bad magic)");
    }
    let mut hparams = [0i32; 11];
    for h in &mut hparams {
        *h = read_i32(&mut f)?;
    }
    Ok(hparams[10])
}

fn read_u32(r: &mut impl Read) -> Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).context("the file ends early")?;
    Ok(u32::from_le_bytes(b))
}

fn read_i32(r: &mut impl Read) -> Result<i32> {
    Ok(read_u32(r)? as i32)
}

/// A count read from the file, checked against a bound so a damaged
/// header cannot ask for gigabytes.
fn read_count(r: &mut impl Read, what: &str, max: usize) -> Result<usize> {
    let v = read_i32(r)?;
    if v < 0 || v as usize > max {
        bail!("{what} is {v}, outside 0..={max}");
    }
    Ok(v as usize)
}

/// whisper.cpp's `quantize … q8_0`, streamed: the header with the new
/// ftype, the mel filters and vocabulary as they are, then every tensor —
/// 2-D f16/f32 tensors but [`KEEP`] as q8_0, the rest copied.
pub fn quantize_q8_0(mut input: impl Read, output: &mut impl Write) -> Result<()> {
    if read_u32(&mut input)? != MAGIC {
        bail!("not a ggml whisper model (bad magic)");
    }
    output.write_all(&MAGIC.to_le_bytes())?;
    let mut hparams = [0i32; 11];
    for h in &mut hparams {
        *h = read_i32(&mut input)?;
    }
    let ftype = hparams[10] % 1000;
    if ftype != 0 && ftype != 1 {
        bail!("its weights are already quantised (ftype {})", hparams[10]);
    }
    hparams[10] = QNT_VERSION_BASE + FTYPE_Q8_0;
    for h in hparams {
        output.write_all(&h.to_le_bytes())?;
    }
    // Mel filters.
    let n_mel = read_count(&mut input, "the mel filter count", 1024)?;
    let n_fft = read_count(&mut input, "the FFT size", 4096)?;
    output.write_all(&(n_mel as i32).to_le_bytes())?;
    output.write_all(&(n_fft as i32).to_le_bytes())?;
    copy_exact(&mut input, output, n_mel * n_fft * 4)?;
    // Vocabulary.
    let n_vocab = read_count(&mut input, "the vocabulary size", 1 << 20)?;
    output.write_all(&(n_vocab as i32).to_le_bytes())?;
    for _ in 0..n_vocab {
        let len = read_count(&mut input, "a token's length", 1 << 16)?;
        output.write_all(&(len as i32).to_le_bytes())?;
        copy_exact(&mut input, output, len)?;
    }
    // Tensors, to the end of the file.
    let mut tensors = 0usize;
    loop {
        let mut first = [0u8; 4];
        if !read_fully_or_eof(&mut input, &mut first)? {
            break;
        }
        let n_dims = i32::from_le_bytes(first);
        if !(1..=4).contains(&n_dims) {
            bail!("tensor {tensors} has {n_dims} dimensions");
        }
        let name_len = read_count(&mut input, "a tensor name's length", 256)?;
        let ttype = read_i32(&mut input)?;
        let mut ne = [1usize; 4];
        for d in ne.iter_mut().take(n_dims as usize) {
            *d = read_count(&mut input, "a tensor dimension", 1 << 24)?.max(1);
        }
        let nelements = ne.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
        let nelements = match nelements {
            Some(n) if n <= 1 << 31 => n,
            _ => bail!("tensor {tensors} is too large"),
        };
        let mut name = vec![0u8; name_len];
        input.read_exact(&mut name).context("the file ends early")?;
        let name_str = String::from_utf8_lossy(&name).into_owned();
        let quantise = n_dims == 2 && !KEEP.contains(&name_str.as_str());
        let element_bytes = match ttype {
            GGML_TYPE_F32 => 4,
            GGML_TYPE_F16 => 2,
            other => bail!("tensor {name_str} has type {other}, not f32 or f16"),
        };
        if quantise && ne[0] % Q8_BLOCK != 0 {
            bail!(
                "tensor {name_str}'s rows ({}) are not a multiple of {Q8_BLOCK}",
                ne[0]
            );
        }
        output.write_all(&n_dims.to_le_bytes())?;
        output.write_all(&(name_len as i32).to_le_bytes())?;
        output.write_all(&(if quantise { GGML_TYPE_Q8_0 } else { ttype }).to_le_bytes())?;
        for d in ne.iter().take(n_dims as usize) {
            output.write_all(&(*d as i32).to_le_bytes())?;
        }
        output.write_all(&name)?;
        if quantise {
            quantise_rows(&mut input, output, ttype, ne[0], nelements / ne[0])
                .with_context(|| format!("tensor {name_str}"))?;
        } else {
            copy_exact(&mut input, output, nelements * element_bytes)?;
        }
        tensors += 1;
    }
    if tensors == 0 {
        bail!("it holds no tensors");
    }
    Ok(())
}

/// Read `buf` fully; `false` at a clean end of file before its first byte.
fn read_fully_or_eof(r: &mut impl Read, buf: &mut [u8]) -> Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => bail!("the file ends inside a tensor header"),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

fn copy_exact(input: &mut impl Read, output: &mut impl Write, bytes: usize) -> Result<()> {
    let copied = std::io::copy(&mut input.take(bytes as u64), output)?;
    if copied != bytes as u64 {
        bail!("the file ends early");
    }
    Ok(())
}

fn quantise_rows(
    input: &mut impl Read,
    output: &mut impl Write,
    ttype: i32,
    row: usize,
    rows: usize,
) -> Result<()> {
    let element_bytes = if ttype == GGML_TYPE_F16 { 2 } else { 4 };
    let mut raw = Vec::new();
    let mut values: Vec<f32> = Vec::new();
    let mut quantised: Vec<u8> = Vec::new();
    let mut done = 0;
    while done < rows {
        let step = ROWS_PER_STEP.min(rows - done);
        let n = step * row;
        raw.resize(n * element_bytes, 0);
        input.read_exact(&mut raw).context("the file ends early")?;
        values.clear();
        if ttype == GGML_TYPE_F16 {
            values.extend(
                raw.chunks_exact(2)
                    .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()),
            );
        } else {
            values.extend(
                raw.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
        }
        quantised.resize(n / Q8_BLOCK * Q8_BLOCK_BYTES, 0);
        // SAFETY: `values` holds `step` rows of `row` f32s and `quantised`
        // has room for their q8_0 blocks (row is a multiple of 32, checked
        // by the caller); q8_0 needs no importance matrix and no init.
        let written = unsafe {
            sys::ggml_quantize_chunk(
                sys::ggml_type_GGML_TYPE_Q8_0,
                values.as_ptr(),
                quantised.as_mut_ptr().cast(),
                0,
                step as i64,
                row as i64,
                std::ptr::null(),
            )
        };
        if written != quantised.len() {
            bail!(
                "ggml wrote {written} bytes for {} expected",
                quantised.len()
            );
        }
        output.write_all(&quantised)?;
        done += step;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tiny model in the whisper ggml layout: one 2-D f16 weight, one
    /// kept 2-D f32 embedding, one 1-D bias.
    pub(crate) fn model(rows: usize, row: usize) -> (Vec<u8>, Vec<f32>) {
        let mut m = Vec::new();
        let i = |m: &mut Vec<u8>, v: i32| m.extend_from_slice(&v.to_le_bytes());
        i(&mut m, MAGIC as i32);
        for h in [51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1] {
            i(&mut m, h);
        }
        i(&mut m, 2); // n_mel
        i(&mut m, 3); // n_fft
        for k in 0..6 {
            m.extend_from_slice(&(k as f32).to_le_bytes());
        }
        i(&mut m, 2); // vocabulary
        for w in ["a", "bc"] {
            i(&mut m, w.len() as i32);
            m.extend_from_slice(w.as_bytes());
        }
        let weights: Vec<f32> = (0..rows * row)
            .map(|k| ((k * 7919 % 1000) as f32 - 500.0) / 250.0)
            .collect();
        let tensor = |m: &mut Vec<u8>, name: &str, ttype: i32, ne: &[usize]| {
            i(m, ne.len() as i32);
            i(m, name.len() as i32);
            i(m, ttype);
            for d in ne {
                i(m, *d as i32);
            }
            m.extend_from_slice(name.as_bytes());
        };
        tensor(
            &mut m,
            "decoder.blocks.0.mlp.0.weight",
            GGML_TYPE_F16,
            &[row, rows],
        );
        for w in &weights {
            m.extend_from_slice(&half::f16::from_f32(*w).to_le_bytes());
        }
        tensor(
            &mut m,
            "decoder.positional_embedding",
            GGML_TYPE_F32,
            &[row, 2],
        );
        for k in 0..2 * row {
            m.extend_from_slice(&(k as f32).to_le_bytes());
        }
        tensor(
            &mut m,
            "decoder.blocks.0.mlp.0.bias",
            GGML_TYPE_F32,
            &[rows],
        );
        for k in 0..rows {
            m.extend_from_slice(&(k as f32).to_le_bytes());
        }
        (m, weights)
    }

    #[test]
    fn weights_become_q8_0_blocks_and_everything_else_is_copied() {
        let (src, weights) = model(3000, 64);
        let mut out = Vec::new();
        quantize_q8_0(&src[..], &mut out).unwrap();
        // Header: the ftype now says q8_0 (quantisation version 2).
        let word = |at: usize| i32::from_le_bytes(out[at..at + 4].try_into().unwrap());
        assert_eq!(word(4 * 11), 2007);
        // Filters and vocabulary unchanged: same bytes up to the first tensor.
        let header = 4 * 12 + 8 + 6 * 4 + 4 + 4 + 1 + 4 + 2;
        assert_eq!(out[..4 * 11], src[..4 * 11]);
        assert_eq!(out[4 * 12..header], src[4 * 12..header]);
        // First tensor: q8_0, same shape and name.
        let name = "decoder.blocks.0.mlp.0.weight";
        assert_eq!(word(header), 2);
        assert_eq!(word(header + 8), GGML_TYPE_Q8_0);
        let data = header + 12 + 8 + name.len();
        let blocks = 3000 * 64 / 32;
        // Each block dequantises to within half a step of the f16 weights
        // (plus the rounding of the step itself to f16).
        for b in 0..blocks {
            let at = data + b * 34;
            let scale = half::f16::from_le_bytes([out[at], out[at + 1]]).to_f32();
            for k in 0..32 {
                let q = out[at + 2 + k] as i8 as f32;
                let want = half::f16::from_f32(weights[b * 32 + k]).to_f32();
                assert!(
                    (q * scale - want).abs() <= scale * 0.6,
                    "block {b} element {k}: {} vs {want}",
                    q * scale
                );
            }
        }
        // The kept embedding and the bias follow, byte for byte.
        let rest_src = &src[src.len() - (12 + 8 + 28 + 2 * 64 * 4 + 12 + 4 + 27 + 3000 * 4)..];
        let rest_out = &out[data + blocks * 34..];
        assert_eq!(rest_out, rest_src);
    }

    #[test]
    fn damaged_or_already_quantised_models_are_refused_in_words() {
        let (src, _) = model(64, 32);
        let mut out = Vec::new();
        let cut = quantize_q8_0(&src[..src.len() - 10], &mut out).unwrap_err();
        assert!(format!("{cut:#}").contains("ends early"), "{cut:#}");
        let mut quantised = Vec::new();
        quantize_q8_0(&src[..], &mut quantised).unwrap();
        let again = quantize_q8_0(&quantised[..], &mut Vec::new()).unwrap_err();
        assert!(
            format!("{again:#}").contains("already quantised"),
            "{again:#}"
        );
        let mut huge = src.clone();
        huge[4 * 12..4 * 13].copy_from_slice(&i32::MAX.to_le_bytes());
        let err = quantize_q8_0(&huge[..], &mut Vec::new()).unwrap_err();
        assert!(format!("{err:#}").contains("mel filter count"), "{err:#}");
        let err = quantize_q8_0(&b"GGUF...."[..], &mut Vec::new()).unwrap_err();
        assert!(format!("{err:#}").contains("bad magic"), "{err:#}");
    }

    #[test]
    fn the_copy_is_written_once_beside_the_model_and_renewed_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("ggml-test.bin");
        let (src, _) = model(64, 32);
        std::fs::write(&source, &src).unwrap();
        let cache = dir.path().join("cache");
        let first = model_to_load(&source, Weights::Q8_0, &cache);
        assert_ne!(first, source);
        assert_eq!(first.parent(), Some(dir.path()));
        assert_eq!(read_ftype(&first).unwrap(), 2007);
        // Loading again finds it, and so does `doctor`'s look.
        assert_eq!(model_to_load(&source, Weights::Q8_0, &cache), first);
        assert_eq!(existing_copy(&source, &cache), Some(first.clone()));
        // `file` loads the model as it is.
        assert_eq!(model_to_load(&source, Weights::File, &cache), source);
        // A replaced model (other length) is derived again, the old copy removed.
        let (bigger, _) = model(128, 32);
        std::fs::write(&source, &bigger).unwrap();
        let second = model_to_load(&source, Weights::Q8_0, &cache);
        assert_ne!(second, first);
        assert!(second.is_file() && !first.exists());
        // An already-quantised model is loaded as it is.
        assert_eq!(model_to_load(&second, Weights::Q8_0, &cache), second);
    }

    #[test]
    fn an_unconvertible_model_falls_back_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("odd.bin");
        let (mut src, _) = model(64, 32);
        src.truncate(src.len() - 100);
        std::fs::write(&source, &src).unwrap();
        assert_eq!(
            model_to_load(&source, Weights::Q8_0, &dir.path().join("cache")),
            source
        );
        let files = |d: &Path| -> Vec<_> {
            std::fs::read_dir(d)
                .map(|r| {
                    r.flatten()
                        .filter(|e| e.path().is_file())
                        .map(|e| e.file_name())
                        .collect()
                })
                .unwrap_or_default()
        };
        assert_eq!(
            files(dir.path()).len(),
            1,
            "no half-written file is left: {:?}",
            files(dir.path())
        );
        assert!(files(&dir.path().join("cache")).is_empty());
    }
}
