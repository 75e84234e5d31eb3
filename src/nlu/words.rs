//! Tf-idf word features, learned next to the sentence embedding.
//!
//! Why: MiniLM's embedding blurs intents that differ by one content word
//! ("turn the volume up" vs "down", "card declined" vs "card lost"); the
//! word itself is the evidence. A sparse tf-idf vector over the training
//! vocabulary, concatenated with the embedding, lets the linear head weigh
//! both (on CLINC150 +0.6 points of in-scope accuracy and better
//! out-of-scope separation; see notes/nlu.md).
//!
//! Tokens: lower-cased runs of letters, digits or `_` of at least two
//! characters (so "what's" gives "what"); term weight `1 + ln(count)`
//! times `idf = ln((1 + docs) / (1 + df)) + 1`; the vector is
//! L2-normalised. Words not seen in training are ignored.

use std::collections::{BTreeMap, HashMap};

/// The vocabulary and idf weights of one training set.
#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    index: HashMap<String, u32>,
    idf: Vec<f32>,
}

/// A sparse vector: `(feature index, value)`, indices ascending.
pub type Sparse = Vec<(u32, f32)>;

/// The tokens of `text` (see the module docs).
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|t| t.chars().count() >= 2)
        .map(str::to_lowercase)
}

impl Vocabulary {
    /// Learn the vocabulary (sorted, so indices are deterministic) and the
    /// document frequencies from `texts`.
    pub fn fit<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut df: BTreeMap<String, u32> = BTreeMap::new();
        let mut docs = 0u32;
        for text in texts {
            docs += 1;
            let mut seen: Vec<String> = tokens(text).collect();
            seen.sort();
            seen.dedup();
            for t in seen {
                *df.entry(t).or_default() += 1;
            }
        }
        let n = f64::from(docs);
        let mut index = HashMap::with_capacity(df.len());
        let mut idf = Vec::with_capacity(df.len());
        for (i, (word, count)) in df.into_iter().enumerate() {
            index.insert(word, i as u32);
            idf.push((((1.0 + n) / (1.0 + f64::from(count))).ln() + 1.0) as f32);
        }
        Self { index, idf }
    }

    /// Number of features.
    pub fn len(&self) -> usize {
        self.idf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.idf.is_empty()
    }

    /// The L2-normalised tf-idf vector of `text`, scaled by `scale`.
    pub fn vector(&self, text: &str, scale: f32) -> Sparse {
        let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
        for t in tokens(text) {
            if let Some(&i) = self.index.get(&t) {
                *counts.entry(i).or_default() += 1;
            }
        }
        let mut v: Sparse = counts
            .into_iter()
            .map(|(i, c)| (i, (1.0 + (c as f32).ln()) * self.idf[i as usize]))
            .collect();
        let norm = v.iter().map(|(_, x)| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|(_, x)| *x *= scale / norm);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_idf_and_normalisation() {
        let toks: Vec<String> = tokens("What's the TIME, a b 42").collect();
        assert_eq!(toks, ["what", "the", "time", "42"]);
        let v = Vocabulary::fit(["turn it up", "turn it down", "what time"]);
        assert_eq!(v.len(), 6);
        let up = v.vector("turn up up, unknownword", 1.0);
        assert_eq!(up.len(), 2);
        let norm: f32 = up.iter().map(|(_, x)| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-5);
        // "up" (1 doc, repeated) outweighs "turn" (2 docs).
        assert!(up[1].1 > up[0].1, "{up:?}");
        assert!(v.vector("nothing known", 1.0).is_empty());
    }
}
