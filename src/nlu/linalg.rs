//! The one hot loop of on-device classification: dot products of queries
//! against an example matrix. With the `onnx` feature this goes through
//! ndarray's matrix multiply (matrixmultiply's SIMD sgemm, optimised even in
//! debug builds); without it a plain loop does the same.

/// `queries` is `[nq, dims]`, `matrix` is `[n, dims]` (both row-major);
/// returns `[nq, n]` dot products, row-major.
pub fn dot_rows(queries: &[f32], nq: usize, matrix: &[f32], n: usize, dims: usize) -> Vec<f32> {
    if nq == 0 || n == 0 || dims == 0 || queries.len() < nq * dims || matrix.len() < n * dims {
        return vec![0.0; nq * n];
    }
    if nq <= 4 {
        // A few queries (a live utterance): a straight pass over the matrix.
        // A matrix multiply would first repack the whole example matrix
        // (23 MB for CLINC150's 15k examples) on every call.
        let mut out = Vec::with_capacity(nq * n);
        for q in queries[..nq * dims].chunks_exact(dims) {
            out.extend(matrix[..n * dims].chunks_exact(dims).map(|row| dot(q, row)));
        }
        return out;
    }
    imp::dot_rows(&queries[..nq * dims], nq, &matrix[..n * dims], n, dims)
}

/// Dot product with 8 independent accumulators (vectorises in release).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `a [m, k]` · `b [k, n]` → `[m, n]`, all row-major.
pub fn matmul(a: &[f32], m: usize, b: &[f32], k: usize, n: usize) -> Vec<f32> {
    if m == 0 || n == 0 || k == 0 || a.len() < m * k || b.len() < k * n {
        return vec![0.0; m * n];
    }
    imp::matmul(&a[..m * k], m, &b[..k * n], k, n)
}

#[cfg(feature = "onnx")]
mod imp {
    use ndarray::ArrayView2;

    pub fn dot_rows(q: &[f32], nq: usize, m: &[f32], n: usize, dims: usize) -> Vec<f32> {
        match (
            ArrayView2::from_shape((nq, dims), q),
            ArrayView2::from_shape((n, dims), m),
        ) {
            (Ok(q), Ok(m)) => q.dot(&m.t()).iter().copied().collect(),
            _ => vec![0.0; nq * n],
        }
    }

    pub fn matmul(a: &[f32], m: usize, b: &[f32], k: usize, n: usize) -> Vec<f32> {
        match (
            ArrayView2::from_shape((m, k), a),
            ArrayView2::from_shape((k, n), b),
        ) {
            (Ok(a), Ok(b)) => a.dot(&b).iter().copied().collect(),
            _ => vec![0.0; m * n],
        }
    }
}

#[cfg(not(feature = "onnx"))]
mod imp {
    pub fn dot_rows(q: &[f32], _nq: usize, m: &[f32], n: usize, dims: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(q.len() / dims * n);
        for qr in q.chunks_exact(dims) {
            for mr in m.chunks_exact(dims) {
                out.push(qr.iter().zip(mr).map(|(a, b)| a * b).sum());
            }
        }
        out
    }

    pub fn matmul(a: &[f32], m: usize, b: &[f32], k: usize, n: usize) -> Vec<f32> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for p in 0..k {
                let x = a[i * k + p];
                for j in 0..n {
                    out[i * n + j] += x * b[p * n + j];
                }
            }
        }
        out
    }
}

/// The best column and its value in each `classes`-wide row (`(0, 0.0)`
/// for an empty row): the predicted label of every query at once.
pub fn argmax_rows(values: &[f32], classes: usize) -> Vec<(usize, f32)> {
    values
        .chunks_exact(classes.max(1))
        .map(|row| {
            row.iter()
                .copied()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap_or((0, 0.0))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_rows_and_matmul_agree_with_hand_arithmetic() {
        let q = [1.0, 2.0, 0.0, 1.0]; // 2 × 2
        let m = [3.0, 4.0, 5.0, 6.0, 1.0, 1.0]; // 3 × 2
        assert_eq!(
            dot_rows(&q, 2, &m, 3, 2),
            vec![11.0, 17.0, 3.0, 4.0, 6.0, 1.0]
        );
        let a = [1.0, 2.0, 3.0, 4.0]; // 2 × 2
        let b = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]; // 2 × 3
        assert_eq!(matmul(&a, 2, &b, 2, 3), vec![1.0, 2.0, 3.0, 3.0, 4.0, 7.0]);
    }
}
