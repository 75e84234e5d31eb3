//! Embeddings cached on disk, so a CLI start or an evaluation does not
//! re-embed examples it embedded before.
//!
//! One file per (model, text list): magic, rows u32, dims u32, rows·dims
//! f32 little-endian, then the sha256 of all preceding bytes. The key (the
//! file name) hashes the model id and every text, so a changed example or
//! model means a different file; a truncated, corrupt or mismatched file is
//! ignored (logged) and rebuilt. Writes go to a temp file and are renamed,
//! so a crash never leaves a file that looks valid.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use sha2::{Digest, Sha256};

use super::{embed_all, Embedder};

const MAGIC: &[u8; 8] = b"EKNNv1\0\0";

/// A short hex key over `model_id` and `parts` (in order, separated).
pub fn key<'a>(model_id: &str, parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut h = Sha256::new();
    h.update(b"earshot-embeddings-v1\0");
    h.update(model_id.as_bytes());
    for p in parts {
        h.update(b"\0");
        h.update(p.len().to_le_bytes());
        h.update(p.as_bytes());
    }
    hex::encode(&h.finalize()[..12])
}

/// `state_dir/cache/<prefix>-<key>.bin`.
pub fn path_in(state_dir: &Path, prefix: &str, key: &str) -> PathBuf {
    state_dir.join("cache").join(format!("{prefix}-{key}.bin"))
}

/// The embeddings of `texts` as one row-major `[texts, dims]` matrix, read
/// from `file` when it is valid, else embedded (batched) and written there.
pub fn embeddings_cached(
    embedder: &dyn Embedder,
    texts: &[&str],
    file: Option<&Path>,
) -> Result<Vec<f32>> {
    let dims = embedder.dims();
    if let Some(m) = file.and_then(|p| read(p, texts.len(), dims)) {
        return Ok(m);
    }
    let matrix: Vec<f32> = embed_all(embedder, texts, 32)?
        .into_iter()
        .flatten()
        .collect();
    if matrix.len() != texts.len() * dims {
        return Err(anyhow!("the embedder returned vectors of the wrong size"));
    }
    if let Some(p) = file {
        if let Err(e) = write(p, texts.len(), dims, &matrix) {
            tracing::warn!("cannot write the embedding cache {}: {e}", p.display());
        }
    }
    Ok(matrix)
}

/// A valid cache file's matrix, or `None` (missing, malformed, corrupt).
pub fn read(path: &Path, rows: usize, dims: usize) -> Option<Vec<f32>> {
    let bytes = std::fs::read(path).ok()?;
    let body_len = 16 + rows * dims * 4;
    if bytes.len() != body_len + 32 || &bytes[..8] != MAGIC {
        tracing::warn!("ignoring the malformed embedding cache {}", path.display());
        return None;
    }
    let (body, sum) = bytes.split_at(body_len);
    let header_ok = u32::from_le_bytes(body[8..12].try_into().ok()?) as usize == rows
        && u32::from_le_bytes(body[12..16].try_into().ok()?) as usize == dims;
    if !header_ok || Sha256::digest(body).as_slice() != sum {
        tracing::warn!("ignoring the corrupt embedding cache {}", path.display());
        return None;
    }
    Some(
        body[16..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// Write atomically (temp file + rename).
pub fn write(path: &Path, rows: usize, dims: usize, matrix: &[f32]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| anyhow!("cache path has no directory"))?;
    std::fs::create_dir_all(dir)?;
    let mut body = Vec::with_capacity(16 + matrix.len() * 4 + 32);
    body.extend_from_slice(MAGIC);
    body.extend_from_slice(&u32::try_from(rows)?.to_le_bytes());
    body.extend_from_slice(&u32::try_from(dims)?.to_le_bytes());
    for v in matrix {
        body.extend_from_slice(&v.to_le_bytes());
    }
    let sum = Sha256::digest(&body);
    body.extend_from_slice(&sum);
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, &body)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_kind_of_damage_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c/x.bin");
        write(&p, 2, 2, &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(read(&p, 2, 2), Some(vec![1.0, 2.0, 3.0, 4.0]));
        assert_eq!(read(&p, 2, 3), None, "other shape");
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[17] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(read(&p, 2, 2), None, "flipped bit");
        std::fs::write(&p, &bytes[..10]).unwrap();
        assert_eq!(read(&p, 2, 2), None, "truncated");
        assert_ne!(key("m", ["a", "b"]), key("m", ["ab"]));
        assert_ne!(key("m", ["a"]), key("n", ["a"]));
    }
}
