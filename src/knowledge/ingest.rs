//! The ingest batch: one document at a time (bounded memory), each one
//! reported on its own line whatever happens to the others.
//!
//! `--plan` analyses every file and writes the plan for review; no vector
//! is built. `--apply` (the default) builds: a plan entry for the same
//! content is used as reviewed, otherwise the document is analysed on the
//! spot. An unchanged file (same sha256, same analysis) is skipped; a
//! changed one has its chunks replaced in the same transaction that
//! writes the new ones.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use super::analysis::{self, Analysis, Plan, PlanEntry, PlanProblem};
use super::loader::{self, Kind};
use super::paragraph;
use super::splitter;
use super::store::{self as kstore, NewDocument};
use crate::cancel::CancelToken;
use crate::llm::ChatModel;
use crate::nlu::Embedder;
use crate::store::Store;

/// What to do with the analysed documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Write the analysis to the plan file only.
    Plan,
    /// Build chunks and vectors.
    Apply,
}

/// The LLM used for analysis, with the model name.
pub type AnalysisLlm = (Arc<dyn ChatModel>, String);

/// How one file ended.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FileReport {
    pub path: PathBuf,
    /// indexed | replaced | unchanged | planned | failed
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub chunks: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis: Option<Analysis>,
    /// Something the user should know about a file that was read, e.g.
    /// "decoded as latin-1 (not UTF-8)".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub ms: f64,
}

impl FileReport {
    fn failed(path: &Path, error: impl Into<String>, since: Instant) -> Self {
        FileReport {
            path: path.to_path_buf(),
            status: "failed".into(),
            error: Some(error.into()),
            chunks: 0,
            analysis: None,
            note: None,
            ms: since.elapsed().as_secs_f64() * 1000.0,
        }
    }
}

/// The whole batch.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Report {
    pub files: Vec<FileReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PathBuf>,
    pub llm_calls: usize,
}

impl Report {
    pub fn failures(&self) -> usize {
        self.files.iter().filter(|f| f.status == "failed").count()
    }
}

/// A progress line per file: a bar on a terminal, plain lines otherwise;
/// inside a long file, its chunks too.
pub struct Progress {
    total: usize,
    tty: bool,
    /// When the last within-file line was printed (plain output prints
    /// one every [`WITHIN_FILE_EVERY`]).
    last_within: std::cell::Cell<Option<Instant>>,
}

/// How often a plain (non-terminal) progress line is printed inside a file.
const WITHIN_FILE_EVERY: Duration = Duration::from_secs(2);

/// Chunks embedded per batch: cancellation (SIGTERM) and progress are
/// looked at between batches, so a batch must stay well under a second.
const EMBED_BATCH: usize = 2;

/// Paragraph vectors per embedder run, as for chunks (a batch of 8 took a
/// 231-page PDF's ingest to 309 MB RSS); sorted by length first, so a
/// batch pads little.
const PARAGRAPH_BATCH: usize = EMBED_BATCH;

impl Progress {
    pub fn new(total: usize) -> Self {
        Self {
            total,
            tty: std::io::stderr().is_terminal(),
            last_within: std::cell::Cell::new(None),
        }
    }

    /// Inside one file: `done` of `chunks` embedded.
    fn within(&self, name: &str, done: usize, chunks: usize) {
        self.within_as(name, "chunk", done, chunks)
    }

    /// Inside one file: `done` of `total` `unit`s (chunks, then paragraphs)
    /// embedded.
    fn within_as(&self, name: &str, unit: &str, done: usize, total: usize) {
        if self.tty {
            eprint!("\r\x1b[2K  {name}: {unit} {done}/{total}");
            return;
        }
        let due = self
            .last_within
            .get()
            .is_none_or(|at| at.elapsed() >= WITHIN_FILE_EVERY);
        if due && done < total {
            self.last_within.set(Some(Instant::now()));
            eprintln!("ingest   {name}: {unit} {done}/{total}");
        }
    }

    fn show(&self, done: usize, name: &str) {
        if self.tty {
            let width = 24;
            let filled = (done * width).checked_div(self.total).unwrap_or(width);
            eprint!(
                "\r\x1b[2K[{}{}] {done}/{} {name}",
                "#".repeat(filled),
                "-".repeat(width - filled),
                self.total
            );
        } else {
            eprintln!("ingest [{}/{}] {name}", done + 1, self.total);
        }
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

/// Everything the batch needs.
pub struct Ingest<'a> {
    pub knowledge: &'a super::KnowledgeConfig,
    /// Whose documents these are.
    pub user_id: &'a str,
    pub store: &'a Store,
    /// Required for `Apply`.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// Analysis by LLM when set (and `knowledge.analyse_with_llm`).
    pub llm: Option<AnalysisLlm>,
    pub pause: Duration,
    pub plan_path: PathBuf,
    pub cancel: CancelToken,
}

impl Ingest<'_> {
    /// Run the batch over files and folders.
    pub fn run(&self, paths: &[PathBuf], mode: Mode) -> Result<Report> {
        let (files, problems) = loader::collect(paths);
        let mut report = Report::default();
        let reviewed = match mode {
            Mode::Apply => Plan::read(&self.plan_path)?,
            Mode::Plan => None,
        };
        let mut plan = Plan {
            created_at: crate::store::now(),
            note: "Review before `earshot ingest --apply`: edit tier (1 practical, 2 commentary, 3 other), tags, strategy (section|paragraph) or title; delete an entry to keep the file's automatic analysis.".into(),
            ..Default::default()
        };
        for (path, error) in problems {
            plan.problems.push(PlanProblem {
                path: path.clone(),
                error: error.clone(),
            });
            report
                .files
                .push(FileReport::failed(&path, error, Instant::now()));
        }
        let progress = Progress::new(files.len());
        let mut last_llm_call: Option<Instant> = None;
        for (i, path) in files.iter().enumerate() {
            if self.cancel.is_cancelled() {
                report.files.push(FileReport::failed(
                    path,
                    "cancelled before it started",
                    Instant::now(),
                ));
                continue;
            }
            progress.show(
                i,
                &path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
            let file = self.one(
                &progress,
                path,
                mode,
                reviewed.as_ref(),
                &mut plan,
                &mut last_llm_call,
                &mut report.llm_calls,
            );
            if mode == Mode::Plan && file.status == "failed" {
                plan.problems.push(PlanProblem {
                    path: path.clone(),
                    error: file.error.clone().unwrap_or_default(),
                });
            }
            report.files.push(file);
        }
        progress.finish();
        if mode == Mode::Plan {
            plan.write(&self.plan_path)?;
            report.plan = Some(self.plan_path.clone());
        }
        Ok(report)
    }

    // The batch's running state, passed apart so each piece stays borrowed
    // only as long as it is needed.
    #[allow(clippy::too_many_arguments)]
    fn one(
        &self,
        progress: &Progress,
        path: &Path,
        mode: Mode,
        reviewed: Option<&Plan>,
        plan: &mut Plan,
        last_llm_call: &mut Option<Instant>,
        llm_calls: &mut usize,
    ) -> FileReport {
        let started = Instant::now();
        let limit = self.knowledge.max_file_mb;
        let Some(kind) = Kind::of(path) else {
            return FileReport::failed(path, "not a txt, md or pdf file; skipped", started);
        };
        if let Err(e) = loader::check_size(path, limit) {
            return FileReport::failed(path, e.to_string(), started);
        }
        let canonical = kstore::canonical(path);
        let (_bytes, hash) = match loader::fingerprint(path) {
            Ok(f) => f,
            Err(e) => return FileReport::failed(path, e.to_string(), started),
        };
        let existing = match self
            .store
            .with_conn(|c| kstore::document_by_path(c, &canonical))
        {
            Ok(d) => d,
            Err(e) => return FileReport::failed(path, format!("database error: {e}"), started),
        };
        let reviewed_entry = reviewed.and_then(|p| p.entry_for(Path::new(&canonical), &hash));
        if mode == Mode::Apply {
            if let Some(old) = &existing {
                let same_analysis = reviewed_entry.is_none_or(|e| {
                    e.analysis.tier == old.tier
                        && e.analysis.tags == old.tags
                        && e.analysis.strategy.as_str() == old.strategy
                        && e.analysis.title == old.title
                });
                // A document indexed before paragraph vectors were stored
                // (schema v16) is indexed again, or every search would
                // embed its paragraphs on the spot.
                let lacks_paragraphs = self
                    .store
                    .with_conn(|c| kstore::lacks_paragraph_vectors(c, old.id))
                    .unwrap_or(false);
                if old.content_hash == hash && same_analysis && !lacks_paragraphs {
                    return FileReport {
                        path: path.to_path_buf(),
                        status: "unchanged".into(),
                        error: None,
                        chunks: old.chunk_count as usize,
                        analysis: None,
                        note: None,
                        ms: started.elapsed().as_secs_f64() * 1000.0,
                    };
                }
            }
        }
        let loaded = match loader::load(path, kind, limit, &self.knowledge.pdf_limits()) {
            Ok(l) => l,
            Err(e) => {
                if mode == Mode::Apply {
                    let no_text =
                        matches!(e, loader::LoadError::NoTextLayer | loader::LoadError::Empty);
                    // Best effort: `doctor`'s count, never a reason to stop.
                    let _ = self.store.with_conn(|c| {
                        kstore::record_skipped(c, &canonical, &e.to_string(), no_text)
                    });
                }
                return FileReport::failed(path, e.to_string(), started);
            }
        };
        let analysis = match reviewed_entry {
            Some(entry) => Analysis {
                analysed_by: format!("plan ({})", entry.analysis.analysed_by),
                ..entry.analysis.clone()
            },
            None => self.analyse(path, &loaded.text, last_llm_call, llm_calls),
        };
        if mode == Mode::Plan {
            plan.documents.push(PlanEntry {
                path: PathBuf::from(&canonical),
                sha256: loaded.hash.clone(),
                bytes: loaded.bytes,
                kind,
                analysis: analysis.clone(),
            });
            return FileReport {
                path: path.to_path_buf(),
                status: "planned".into(),
                error: None,
                chunks: 0,
                analysis: Some(analysis),
                note: None,
                ms: started.elapsed().as_secs_f64() * 1000.0,
            };
        }
        let Some(embedder) = &self.embedder else {
            return FileReport::failed(path, "the on-device embedder is not available", started);
        };
        let body = analysis::strip_front_matter(&loaded.text);
        let headings = match loaded.kind {
            loader::Kind::Pdf => splitter::Headings::of_pdf(body),
            _ => splitter::Headings::Any,
        };
        let pieces = splitter::split_as(
            body,
            analysis.strategy,
            self.knowledge.chunk_chars,
            headings,
        );
        if pieces.is_empty() {
            return FileReport::failed(path, "no text to index after splitting", started);
        }
        let texts: Vec<String> = pieces
            .iter()
            .map(|p| embedding_text(&analysis.title, p))
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut embeddings = Vec::with_capacity(refs.len());
        for batch in refs.chunks(EMBED_BATCH) {
            if self.cancel.is_cancelled() {
                return FileReport::failed(
                    path,
                    format!(
                        "cancelled after {} of {} chunks; nothing of this file was stored",
                        embeddings.len(),
                        refs.len()
                    ),
                    started,
                );
            }
            match crate::nlu::embed_all(embedder.as_ref(), batch, EMBED_BATCH) {
                Ok(v) => embeddings.extend(v),
                Err(e) => {
                    return FileReport::failed(path, format!("embedding failed: {e:#}"), started)
                }
            }
            progress.within(&name, embeddings.len(), refs.len());
        }
        let paragraph_embeddings = match self.embed_paragraphs(
            embedder.as_ref(),
            &analysis.title,
            &pieces,
            &name,
            progress,
        ) {
            Ok(v) => v,
            Err(e) => return FileReport::failed(path, format!("{e:#}"), started),
        };
        let model = embedder.model_id();
        let doc = NewDocument {
            path: &canonical,
            kind: kind.as_str(),
            bytes: loaded.bytes,
            hash: &loaded.hash,
            analysis: &analysis,
            pieces: &pieces,
            embeddings: &embeddings,
            paragraph_embeddings: &paragraph_embeddings,
            model: &model,
            user_id: self.user_id,
        };
        if let Err(e) = kstore::replace_document(self.store, &doc) {
            return FileReport::failed(
                path,
                format!("not indexed (nothing was changed): {e}"),
                started,
            );
        }
        FileReport {
            path: path.to_path_buf(),
            status: if existing.is_some() {
                "replaced"
            } else {
                "indexed"
            }
            .into(),
            error: None,
            chunks: pieces.len(),
            analysis: Some(analysis),
            note: loaded
                .encoding
                .map(|e| format!("decoded as {e} (not UTF-8)")),
            ms: started.elapsed().as_secs_f64() * 1000.0,
        }
    }

    /// The paragraph vectors of every piece with two paragraphs or more
    /// (`knowledge::paragraph`), in piece order (empty for the others).
    /// Embedded shortest first in batches, so a batch pads little.
    fn embed_paragraphs(
        &self,
        embedder: &dyn Embedder,
        title: &str,
        pieces: &[splitter::Piece],
        name: &str,
        progress: &Progress,
    ) -> anyhow::Result<Vec<Vec<Vec<f32>>>> {
        let mut out: Vec<Vec<Vec<f32>>> = vec![Vec::new(); pieces.len()];
        let mut texts = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            let paras = paragraph::paragraphs(&piece.text);
            if paras.len() < 2 {
                continue;
            }
            for p in paras {
                texts.push((
                    i,
                    paragraph::paragraph_text(title, piece.section.as_deref(), p),
                ));
            }
        }
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&k| texts[k].1.len());
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        let mut done = 0;
        for batch in order.chunks(PARAGRAPH_BATCH) {
            if self.cancel.is_cancelled() {
                anyhow::bail!(
                    "cancelled after {done} of {} paragraphs; nothing of this file was stored",
                    texts.len()
                );
            }
            let refs: Vec<&str> = batch.iter().map(|&k| texts[k].1.as_str()).collect();
            let got = embedder
                .embed(&refs)
                .context("embedding the paragraphs failed")?;
            for (&k, v) in batch.iter().zip(got) {
                vectors[k] = Some(v);
            }
            done += batch.len();
            progress.within_as(name, "paragraph", done, texts.len());
        }
        for ((owner, _), v) in texts.iter().zip(vectors) {
            if let Some(v) = v {
                out[*owner].push(v);
            }
        }
        Ok(out)
    }

    /// LLM analysis (paced by `pause`) with the heuristics as fallback.
    fn analyse(
        &self,
        path: &Path,
        text: &str,
        last: &mut Option<Instant>,
        calls: &mut usize,
    ) -> Analysis {
        let Some((llm, model)) = self
            .llm
            .as_ref()
            .filter(|_| self.knowledge.analyse_with_llm)
        else {
            return analysis::heuristic(path, text);
        };
        if let Some(at) = last {
            let wait = self.pause.saturating_sub(at.elapsed());
            if !wait.is_zero() {
                // Interruptible: a cancelled batch does not sit out the pause.
                let until = Instant::now() + wait;
                while Instant::now() < until && !self.cancel.is_cancelled() {
                    std::thread::sleep(
                        Duration::from_millis(50)
                            .min(until.saturating_duration_since(Instant::now())),
                    );
                }
            }
        }
        *calls += 1;
        // The pause runs from the end of this call to the start of the next.
        let result = analysis::with_llm(
            llm.as_ref(),
            model,
            path,
            text,
            self.knowledge.analysis_chars,
            &self.cancel,
        );
        *last = Some(Instant::now());
        match result {
            Ok(a) => a,
            Err(e) => {
                let mut a = analysis::heuristic(path, text);
                a.analysed_by = format!(
                    "{} (LLM analysis failed: {})",
                    a.analysed_by,
                    one_line(&format!("{e:#}"))
                );
                a
            }
        }
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(160)
        .collect()
}

/// What is embedded for a chunk: the document title and the innermost
/// heading give every chunk its subject, then the text.
pub fn embedding_text(title: &str, piece: &splitter::Piece) -> String {
    paragraph::paragraph_text(title, piece.section.as_deref(), &piece.text)
}
