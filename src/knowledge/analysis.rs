//! Per-document analysis: source tier (1 practical, 2 commentary, 3
//! other), category tags and chunking strategy — by the LLM when one is
//! usable, else by heuristics — and the reviewable plan file it is
//! written to before any vector is built.
//!
//! Heuristics, in order (the plan records which one decided):
//! 1. front matter at the top of the text (`---` … `---` with
//!    `tier: 1`, `tags: [a, b]`, `strategy: section`);
//! 2. the file name or a parent folder: `tier1`/`tier-1`/`t1_` → tier 1
//!    (same for 2 and 3);
//! 3. otherwise tier 3 ("other": nothing says it is practical guidance).
//!
//! Tags come from the front matter, else from the parent folder's name.
//! Strategy: by section when the text has two or more headings, else by
//! paragraph.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use anyhow::{anyhow, Context, Result};
use regex::Regex;
use serde::{Deserialize, Serialize};

use super::splitter::{count_headings, Strategy};
use crate::cancel::CancelToken;
use crate::llm::{ChatMessage, ChatModel, ChatRequest};

/// What ingest will do with one document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub title: String,
    pub tier: u8,
    pub tags: Vec<String>,
    pub strategy: Strategy,
    /// `llm:<model>`, `heuristic:<rule>`, or `plan` (a reviewed entry).
    pub analysed_by: String,
}

static FRONT_MATTER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)\A---\s*\n(.*?)\n---\s*\n").expect("static regex"));
static TIER_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:^|[^a-z])(?:tier|t)[-_ ]?([123])(?:[^0-9]|$)").expect("static regex")
});

/// Lower-case, trimmed, deduplicated tags without empty ones.
pub fn clean_tags(tags: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let t = t
            .trim()
            .trim_matches(|c| c == '"' || c == '\'')
            .to_lowercase();
        if !t.is_empty() && t.len() <= 40 && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// `key: value` pairs of a front-matter block, if the text starts with one.
fn front_matter(text: &str) -> Option<Vec<(String, String)>> {
    let block = FRONT_MATTER.captures(text)?.get(1)?.as_str().to_string();
    Some(
        block
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
            .collect(),
    )
}

/// The text without its front matter (it is metadata, not content).
pub fn strip_front_matter(text: &str) -> &str {
    match FRONT_MATTER.find(text) {
        Some(m) => &text[m.end()..],
        None => text,
    }
}

fn parse_list(v: &str) -> Vec<String> {
    v.trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(str::to_string)
        .collect()
}

/// The title: front-matter `title`, the first heading, else the file stem.
fn title_of(path: &Path, text: &str, fm: &[(String, String)]) -> String {
    if let Some((_, t)) = fm.iter().find(|(k, _)| k == "title") {
        return t.trim_matches('"').to_string();
    }
    let body = strip_front_matter(text);
    if let Some(first) = body.lines().find(|l| !l.trim().is_empty()) {
        if let Some((_, h)) = super::splitter::heading(first) {
            return h;
        }
    }
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("document")
        .replace(['_', '-'], " ")
}

/// Analysis without an LLM (see the module doc for the rules).
pub fn heuristic(path: &Path, text: &str) -> Analysis {
    let fm = front_matter(text).unwrap_or_default();
    let get = |k: &str| fm.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let body = strip_front_matter(text);
    let strategy_by_headings = if count_headings(body) >= 2 {
        Strategy::Section
    } else {
        Strategy::Paragraph
    };
    let (tier, rule) = if let Some(t) = get("tier")
        .and_then(|v| v.trim().parse::<u8>().ok())
        .filter(|t| (1..=3).contains(t))
    {
        (t, "front-matter tier")
    } else if let Some(t) = tier_from_path(path) {
        (t, "file-name tier")
    } else {
        (3, "default tier 3")
    };
    let tags = match get("tags") {
        Some(v) => clean_tags(parse_list(v)),
        None => clean_tags(
            path.parent()
                .and_then(|p| p.file_name())
                .and_then(|n| n.to_str())
                .filter(|n| TIER_NAME.captures(n).is_none())
                .map(|n| n.to_string()),
        ),
    };
    let strategy = get("strategy")
        .and_then(Strategy::parse)
        .unwrap_or(strategy_by_headings);
    Analysis {
        title: title_of(path, text, &fm),
        tier,
        tags,
        strategy,
        analysed_by: format!(
            "heuristic:{rule}; strategy by {}",
            if get("strategy").is_some() {
                "front matter"
            } else {
                "headings present"
            }
        ),
    }
}

/// `tier1`, `tier-2`, `t3_…` in the file name or a parent folder's name.
fn tier_from_path(path: &Path) -> Option<u8> {
    let mut names: Vec<String> = path
        .file_stem()
        .and_then(|s| s.to_str())
        .map(|s| vec![s.to_string()])
        .unwrap_or_default();
    if let Some(parent) = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
    {
        names.push(parent.to_string());
    }
    names
        .iter()
        .find_map(|n| TIER_NAME.captures(n).and_then(|c| c[1].parse().ok()))
}

/// The instruction the analysis LLM gets.
const ANALYSIS_PROMPT: &str = "You classify documents for a small local knowledge base. Read the document and answer with ONE JSON object only, no prose: {\"title\": string, \"tier\": 1|2|3, \"tags\": [up to 5 short lower-case category words], \"strategy\": \"section\"|\"paragraph\"}. tier 1 = practical guidance (manuals, instructions, procedures); tier 2 = commentary or explanation about such guidance; tier 3 = anything else. strategy = \"section\" when the document has headings that separate topics, else \"paragraph\".";

/// Ask the LLM; the heuristic result fills what the model leaves out.
pub fn with_llm(
    llm: &dyn ChatModel,
    model: &str,
    path: &Path,
    text: &str,
    max_chars: usize,
    cancel: &CancelToken,
) -> Result<Analysis> {
    let fallback = heuristic(path, text);
    let excerpt: String = text.chars().take(max_chars).collect();
    let request = ChatRequest {
        model: model.to_string(),
        messages: vec![
            ChatMessage::system(ANALYSIS_PROMPT),
            ChatMessage::user(format!(
                "File: {}\n\n{}",
                path.file_name().and_then(|n| n.to_str()).unwrap_or(""),
                excerpt
            )),
        ],
        temperature: 0.0,
        max_completion_tokens: 300,
        top_p: 1.0,
        tools: Vec::new(),
        stream: false,
    };
    let response = llm
        .chat(&request, &mut |_| {}, cancel)
        .map_err(|e| anyhow!("{e}"))?;
    let parsed = parse_llm_json(&response.content).with_context(|| {
        format!(
            "the analysis reply was not the JSON asked for: {}",
            first_chars(&response.content, 80)
        )
    })?;
    let tier = parsed["tier"]
        .as_u64()
        .or_else(|| parsed["tier"].as_str().and_then(|s| s.trim().parse().ok()))
        .filter(|t| (1..=3).contains(t))
        .map(|t| t as u8)
        .ok_or_else(|| anyhow!("the analysis reply has no tier 1, 2 or 3"))?;
    let tags = parsed["tags"]
        .as_array()
        .map(|a| clean_tags(a.iter().filter_map(|t| t.as_str().map(str::to_string))))
        .unwrap_or(fallback.tags);
    let strategy = parsed["strategy"]
        .as_str()
        .and_then(Strategy::parse)
        .unwrap_or(fallback.strategy);
    let title = parsed["title"]
        .as_str()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| first_chars(t, 120))
        .unwrap_or(fallback.title);
    let used = if response.model.is_empty() {
        model
    } else {
        &response.model
    };
    Ok(Analysis {
        title,
        tier,
        tags: tags.into_iter().take(5).collect(),
        strategy,
        analysed_by: format!("llm:{used}"),
    })
}

fn first_chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect::<String>().replace('\n', " ")
}

/// The first `{…}` object in a reply (models wrap JSON in prose or fences).
pub fn parse_llm_json(reply: &str) -> Option<serde_json::Value> {
    let start = reply.find('{')?;
    let end = reply.rfind('}')?;
    if end <= start {
        return None;
    }
    serde_json::from_str(&reply[start..=end])
        .ok()
        .filter(|v: &serde_json::Value| v.is_object())
}

/// One document's line in the plan file. A reviewer may edit `tier`,
/// `tags`, `strategy` and `title`, or delete the entry to skip the file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlanEntry {
    pub path: PathBuf,
    pub sha256: String,
    pub bytes: u64,
    pub kind: super::loader::Kind,
    #[serde(flatten)]
    pub analysis: Analysis,
}

/// The reviewable plan written by `earshot ingest --plan`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Plan {
    pub created_at: String,
    /// Why this file exists, for whoever opens it.
    pub note: String,
    pub documents: Vec<PlanEntry>,
    /// Files that could not be analysed, with the reason.
    pub problems: Vec<PlanProblem>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlanProblem {
    pub path: PathBuf,
    pub error: String,
}

impl Plan {
    pub fn read(path: &Path) -> Result<Option<Plan>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(anyhow!("cannot read the plan {}: {e}", path.display())),
        };
        let plan: Plan = serde_json::from_str(&text).map_err(|e| {
            anyhow!(
                "the plan {} is not valid ({e}); fix it or run `earshot ingest --plan` again",
                path.display()
            )
        })?;
        for entry in &plan.documents {
            if !(1..=3).contains(&entry.analysis.tier) {
                return Err(anyhow!(
                    "the plan {} gives {} tier {}; tiers are 1, 2 or 3",
                    path.display(),
                    entry.path.display(),
                    entry.analysis.tier
                ));
            }
        }
        Ok(Some(plan))
    }

    /// Written to a temp file and renamed, so a reader never sees half.
    pub fn write(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }

    /// The reviewed entry for a file, if its content is still the same.
    pub fn entry_for(&self, path: &Path, sha256: &str) -> Option<&PlanEntry> {
        self.documents
            .iter()
            .find(|e| e.path == path && e.sha256 == sha256)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_wins_then_file_name_then_tier_3() {
        let a = heuristic(
            Path::new("/x/notes/guide.md"),
            "---\ntier: 1\ntags: [Safety, filters]\nstrategy: paragraph\n---\n# A\n\ntext\n\n# B\n\nmore\n",
        );
        assert_eq!(
            (a.tier, a.tags.clone(), a.strategy),
            (
                1,
                vec!["safety".to_string(), "filters".to_string()],
                Strategy::Paragraph
            )
        );
        assert!(a.analysed_by.contains("front-matter"));
        let b = heuristic(Path::new("/x/tier2/essay.txt"), "one paragraph only");
        assert_eq!((b.tier, b.strategy), (2, Strategy::Paragraph));
        assert!(
            b.tags.is_empty(),
            "a tier folder is not a tag: {:?}",
            b.tags
        );
        let c = heuristic(
            Path::new("/x/garden/plants.md"),
            "# Plants\n\nx\n\n## Water\n\ny\n",
        );
        assert_eq!(
            (c.tier, c.strategy, c.title.as_str()),
            (3, Strategy::Section, "Plants")
        );
        assert_eq!(c.tags, vec!["garden".to_string()]);
        assert_eq!(tier_from_path(Path::new("/a/t1_manual.pdf")), Some(1));
        assert_eq!(tier_from_path(Path::new("/a/tiered.pdf")), None);
    }

    #[test]
    fn llm_json_is_found_inside_prose() {
        let v = parse_llm_json("Sure!\n```json\n{\"tier\": 2, \"tags\": [\"x\"]}\n```").unwrap();
        assert_eq!(v["tier"], 2);
        assert!(parse_llm_json("no json").is_none());
    }
}
