//! The passages as the answering model reads them: grouped by source tier
//! (practical guidance first, the seed's "hierarchy of sources"), each
//! with a number the answer cites as `[n]`, and the instruction to say so
//! when the sources do not cover the question.

use serde::Serialize;

use super::retrieve::Passage;

/// One numbered source.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Citation {
    pub n: usize,
    pub path: String,
    pub title: String,
    pub section: Option<String>,
    /// The PDF page the passage starts on.
    pub page: Option<u32>,
    pub tier: u8,
    pub chunk_ids: Vec<i64>,
}

/// The context block and its citations.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Context {
    pub text: String,
    pub citations: Vec<Citation>,
}

/// What the model is told when nothing relevant was found.
pub const NOTHING_FOUND: &str = "The local knowledge base has no passage relevant to this question. Say that the documents on this device do not cover it; do not invent an answer from them.";

/// How the model must use the sources.
pub const HOW_TO_CITE: &str = "Answer only from these sources and cite each fact with its number, like [1]. If they do not answer the question, say the documents do not cover it.";

fn tier_name(tier: u8) -> &'static str {
    match tier {
        1 => "Tier 1 — practical guidance",
        2 => "Tier 2 — commentary",
        _ => "Tier 3 — other sources",
    }
}

/// Group by tier (1, 2, 3; best first inside a tier) and number in that
/// reading order.
pub fn build(passages: &[Passage]) -> Context {
    if passages.is_empty() {
        return Context {
            text: NOTHING_FOUND.to_string(),
            citations: Vec::new(),
        };
    }
    let mut order: Vec<&Passage> = passages.iter().collect();
    order.sort_by(|a, b| a.tier.cmp(&b.tier).then(b.score.total_cmp(&a.score)));
    let mut text = String::new();
    let mut citations = Vec::new();
    let mut current_tier = 0;
    for (i, p) in order.iter().enumerate() {
        let n = i + 1;
        if p.tier != current_tier {
            current_tier = p.tier;
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!("## {}\n", tier_name(p.tier)));
        }
        let name = std::path::Path::new(&p.path)
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or(&p.path);
        let section = p
            .section
            .as_deref()
            .map(|s| format!(", {s}"))
            .unwrap_or_default();
        let page = p.page.map(|n| format!(", p. {n}")).unwrap_or_default();
        text.push_str(&format!(
            "[{n}] {} ({name}{section}{page})\n{}\n\n",
            p.title,
            p.text.trim()
        ));
        citations.push(Citation {
            n,
            path: p.path.clone(),
            title: p.title.clone(),
            section: p.section.clone(),
            page: p.page,
            tier: p.tier,
            chunk_ids: p.chunk_ids.clone(),
        });
    }
    text.push_str(HOW_TO_CITE);
    Context { text, citations }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passage(id: i64, tier: u8, score: f32) -> Passage {
        Passage {
            chunk_ids: vec![id],
            document_id: id,
            path: format!("/k/doc{id}.md"),
            title: format!("Doc {id}"),
            section: Some("2 Care".into()),
            page: Some(4),
            tier,
            score,
            rerank: score,
            text: format!("text {id}"),
        }
    }

    #[test]
    fn grouped_by_tier_and_numbered_in_reading_order() {
        let c = build(&[passage(1, 3, 0.9), passage(2, 1, 0.5), passage(3, 1, 0.7)]);
        let ns: Vec<(usize, i64)> = c.citations.iter().map(|c| (c.n, c.chunk_ids[0])).collect();
        assert_eq!(ns, vec![(1, 3), (2, 2), (3, 1)]);
        let t1 = c.text.find("Tier 1").unwrap();
        let t3 = c.text.find("Tier 3").unwrap();
        assert!(t1 < c.text.find("[1] Doc 3 (doc3.md, 2 Care, p. 4)").unwrap());
        assert!(t3 < c.text.find("[3] Doc 1").unwrap());
        assert!(c.text.ends_with(HOW_TO_CITE));
        assert_eq!(build(&[]).text, NOTHING_FOUND);
    }
}
