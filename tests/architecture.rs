//! The layer table of ARCHITECTURE.md, checked against the sources.
//!
//! Reads every `src/**/*.rs`, drops `#[cfg(test)]` items and comments, and
//! resolves every `crate::…` path (grouped `use crate::{a, b::c}` included)
//! and every `super::…` path to the top-level module it names. Then:
//! - a lower module never names an upper one;
//! - the top-level modules form no cycle (edges to and from `config`
//!   aside: the composition root composes the config sections);
//! - only the composition root (`app`) and `cli` import `config`;
//! - the leaves import only what their row allows;
//! - every top-level module is in the table;
//! - no struct with a secret field (`*api_key`, `token`, `*_token`,
//!   `*password`, `*secret`) derives `Debug`.
//!
//! The checker itself is tested on planted violations below, so a rule
//! that silently stops matching fails here too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lower modules: audio → text → decision → answer → speech, and the leaves.
const LOWER: &[&str] = &[
    "events",
    "cancel",
    "telemetry",
    "audio",
    "store",
    "stt",
    "tts",
    "llm",
    "nlu",
    "tools",
    "memory",
    "knowledge",
    "tree",
    "review",
    "device",
    "timers",
    "calendar",
    // issue 17: the wake-word detectors (openWakeWord on ort, Wyoming)
    "wake",
    // leaves
    "paths",
    "onnx",
    "http",
    "wyoming_proto",
    "choice",
    "cpu",
    "memtrim",
    "small_regex",
];
/// Upper modules: the turn, the front doors and the composition root.
const UPPER: &[&str] = &[
    "agent",
    "api",
    "voice_loop",
    "voice",
    "wyoming",
    "esphome",
    "cli",
    "app",
];
/// Leaves and the only crate modules each may import.
const LEAVES: &[(&str, &[&str])] = &[
    ("paths", &[]),
    ("http", &[]),
    ("wyoming_proto", &[]),
    ("choice", &[]),
    ("onnx", &["paths"]),
    ("cpu", &[]),
    ("memtrim", &[]),
    ("small_regex", &[]),
];
/// Who may import `config` (the composition root and the CLI).
const CONFIG_USERS: &[&str] = &["app", "cli"];

/// `text` with comments, string and char literals blanked (same length,
/// newlines kept), so braces and paths inside them are not read as code.
fn blank_literals(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // raw string r#"…"#
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for ch in &b[i..j.min(b.len())] {
                out.push(blank(*ch));
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // a char literal ('x', '\n', '\u{1F600}'), not a lifetime
            let rest: String = b[i..b.len().min(i + 12)].iter().collect();
            let len = if rest.starts_with("'\\u{") {
                rest.find("}'").map(|p| p + 2)
            } else if rest.starts_with("'\\") {
                (rest.chars().nth(3) == Some('\'')).then_some(4)
            } else {
                (rest.chars().nth(2) == Some('\'')).then_some(3)
            };
            match len {
                Some(n) => {
                    for _ in 0..n {
                        out.push(' ');
                    }
                    i += n;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The index just past the item that starts at `from`: a `{…}` block or a
/// `;`, whichever comes first at depth 0.
fn item_end(code: &[u8], from: usize) -> usize {
    let mut depth = 0i32;
    let mut i = from;
    while i < code.len() {
        match code[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    code.len()
}

/// Blank every `#[cfg(test)]` item (module, fn, use, impl).
fn strip_test_items(code: &str) -> String {
    let mut bytes = code.as_bytes().to_vec();
    let mut search = 0;
    while let Some(pos) = code[search..].find("#[cfg(test)]") {
        let start = search + pos;
        let end = item_end(code.as_bytes(), start + "#[cfg(test)]".len());
        for b in &mut bytes[start..end] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
        search = end;
    }
    String::from_utf8(bytes).unwrap_or_default()
}

/// The module path of a source file: `src/tree/actions/memory.rs` →
/// `[tree, actions, memory]`; `mod.rs` and `lib.rs` name their directory.
fn file_module(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs").to_string();
        if stem != "mod" && stem != "lib" && stem != "main" {
            parts.push(stem);
        }
    }
    parts
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Top-level modules named by the paths in one file's code.
fn named_modules(module: &[String], code: &str) -> BTreeSet<String> {
    let bytes = code.as_bytes();
    // Inline modules (`mod x { … }`) nest `super::`: track them by brace depth.
    let mut opens: Vec<(usize, String)> = Vec::new(); // (brace depth inside, name)
    let mut depth = 0usize;
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'{' {
            depth += 1;
            i += 1;
            continue;
        }
        if c == b'}' {
            if opens.last().is_some_and(|(d, _)| *d == depth) {
                opens.pop();
            }
            depth = depth.saturating_sub(1);
            i += 1;
            continue;
        }
        let boundary = i == 0 || !is_ident(bytes[i - 1]);
        if boundary && code[i..].starts_with("mod ") {
            let rest = &code[i + 4..];
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let after = rest.trim_start()[name.len()..].trim_start();
            if !name.is_empty() && after.starts_with('{') {
                opens.push((depth + 1, name));
            }
        }
        let starts_path = boundary
            && (code[i..].starts_with("crate::") || code[i..].starts_with("super::"))
            && !(i > 0 && bytes[i - 1] == b'$');
        if starts_path {
            let mut current: Vec<String> = module.to_vec();
            current.extend(opens.iter().map(|(_, n)| n.clone()));
            let mut j = i;
            let absolute = code[j..].starts_with("crate::");
            if absolute {
                current.clear();
                j += "crate::".len();
            } else {
                while code[j..].starts_with("super::") {
                    current.pop();
                    j += "super::".len();
                }
            }
            let mut k = j;
            while k < bytes.len() && bytes[k].is_ascii_whitespace() {
                k += 1;
            }
            let heads: Vec<String> = if bytes.get(k) == Some(&b'{') {
                let end = item_end(bytes, k);
                let group = &code[k + 1..end.saturating_sub(1)];
                top_level_heads(group)
            } else {
                let head: String = code[k..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                vec![head]
            };
            for head in heads {
                if head.is_empty() || head == "self" {
                    if let Some(first) = current.first() {
                        names.insert(first.clone());
                    }
                    continue;
                }
                let top = match current.first() {
                    Some(first) => first.clone(),
                    None => head,
                };
                names.insert(top);
            }
            i = k.max(i + 1);
            continue;
        }
        i += 1;
    }
    names
}

/// The first segment of each path in a `{a, b::c, d::{e, f}}` group.
fn top_level_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut item = String::new();
    let flush = |item: &mut String, heads: &mut Vec<String>| {
        let head: String = item
            .trim()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !head.is_empty() || !item.trim().is_empty() {
            heads.push(head);
        }
        item.clear();
    };
    for c in group.chars() {
        match c {
            '{' => {
                depth += 1;
                item.push(c);
            }
            '}' => {
                depth -= 1;
                item.push(c);
            }
            ',' if depth == 0 => flush(&mut item, &mut heads),
            _ => item.push(c),
        }
    }
    flush(&mut item, &mut heads);
    heads
}

/// Secret-looking field names.
fn is_secret_field(name: &str) -> bool {
    name.ends_with("api_key")
        || name == "token"
        || name.ends_with("_token")
        || name.ends_with("password")
        || name.ends_with("secret")
}

/// Structs that derive `Debug` and hold a secret field: `(struct, field)`.
fn secret_debug_derives(code: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut search = 0;
    while let Some(pos) = code[search..].find("#[derive(") {
        let start = search + pos;
        let close = code[start..]
            .find(")]")
            .map(|p| start + p)
            .unwrap_or(code.len());
        let derives = &code[start..close];
        search = close;
        let derives_debug = derives
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .any(|d| d == "Debug" || d.ends_with("::Debug"));
        if !derives_debug {
            continue;
        }
        // The item the attribute belongs to: skip further attributes.
        let mut rest = code[close + 2..].trim_start();
        while rest.starts_with("#[") {
            let end = rest.find(']').map(|p| p + 1).unwrap_or(rest.len());
            rest = rest[end..].trim_start();
        }
        let rest = rest
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        let Some(after) = rest.strip_prefix("struct ") else {
            continue;
        };
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let Some(open) = after.find(['{', ';', '(']) else {
            continue;
        };
        if after.as_bytes()[open] != b'{' {
            continue;
        }
        let end = item_end(after.as_bytes(), open);
        let body = &after[open + 1..end.saturating_sub(1)];
        let mut depth = 0;
        let mut field = String::new();
        // After a field's name and its `:` comes its type, up to the `,`.
        let mut in_type = false;
        for c in body.chars() {
            match c {
                '{' | '(' | '<' | '[' => depth += 1,
                '}' | ')' | '>' | ']' => depth -= 1,
                ':' if depth == 0 && in_type => continue,
                ':' if depth == 0 => {
                    in_type = true;
                    let fname = field
                        .split_whitespace()
                        .last()
                        .unwrap_or_default()
                        .to_string();
                    if is_secret_field(&fname) {
                        found.push((name.clone(), fname));
                    }
                    field.clear();
                    continue;
                }
                ',' if depth == 0 => {
                    in_type = false;
                    field.clear();
                    continue;
                }
                _ => {}
            }
            if depth == 0 && !in_type {
                field.push(c);
            }
        }
    }
    found
}

/// Everything the checker found in one source tree.
#[derive(Debug, Default)]
struct Report {
    edges: BTreeMap<String, BTreeSet<String>>,
    /// (module, file) pairs where a module is first seen.
    files: BTreeMap<String, Vec<PathBuf>>,
    secrets: Vec<String>,
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn scan(src: &Path) -> Report {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    let mut report = Report::default();
    for file in files {
        let module = file_module(src, &file);
        let Some(top) = module.first().cloned() else {
            continue; // lib.rs, main.rs
        };
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let code = strip_test_items(&blank_literals(&text));
        report
            .files
            .entry(top.clone())
            .or_default()
            .push(file.clone());
        for (name, field) in secret_debug_derives(&code) {
            report.secrets.push(format!(
                "{}: struct {name} derives Debug but holds the secret field `{field}`; write a Debug impl that prints \"***\" for it",
                file.display()
            ));
        }
        for named in named_modules(&module, &code) {
            if named != top {
                report.edges.entry(top.clone()).or_default().insert(named);
            }
        }
    }
    report
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit(s: &mut State<'_>, v: &str) {
        s.index.insert(v.into(), s.next);
        s.low.insert(v.into(), s.next);
        s.next += 1;
        s.stack.push(v.into());
        s.on.insert(v.into());
        let targets: Vec<String> =
            s.g.get(v)
                .map(|t| t.iter().cloned().collect())
                .unwrap_or_default();
        for w in targets {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let lw = s.low[&w];
                let lv = s.low[v];
                s.low.insert(v.into(), lv.min(lw));
            } else if s.on.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low[v];
                s.low.insert(v.into(), lv.min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(&w);
                let done = w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let g: BTreeMap<String, BTreeSet<String>> = edges
        .iter()
        .filter(|(a, _)| a.as_str() != "config")
        .map(|(a, bs)| {
            (
                a.clone(),
                bs.iter()
                    .filter(|b| b.as_str() != "config")
                    .cloned()
                    .collect(),
            )
        })
        .collect();
    let mut s = State {
        g: &g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    let nodes: Vec<String> = g.keys().cloned().collect();
    for v in nodes {
        if !s.index.contains_key(&v) {
            visit(&mut s, &v);
        }
    }
    s.out
}

/// Every broken rule, one line each.
fn violations(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for module in report.files.keys() {
        if module != "config"
            && !LOWER.contains(&module.as_str())
            && !UPPER.contains(&module.as_str())
        {
            out.push(format!(
                "top-level module `{module}` is not in the layer table: add it to LOWER or UPPER in tests/architecture.rs and ARCHITECTURE.md"
            ));
        }
    }
    for (from, tos) in &report.edges {
        for to in tos {
            if LOWER.contains(&from.as_str()) && UPPER.contains(&to.as_str()) {
                out.push(format!(
                    "lower module `{from}` names upper module `{to}`: define a narrow trait in `{from}` and implement it above"
                ));
            }
            if to == "config" && !CONFIG_USERS.contains(&from.as_str()) {
                out.push(format!(
                    "`{from}` imports `config`: take your own section and `crate::paths::Paths` instead (only app and cli read the whole config)"
                ));
            }
            if let Some((_, allowed)) = LEAVES.iter().find(|(leaf, _)| leaf == from) {
                if !allowed.contains(&to.as_str()) {
                    out.push(format!(
                        "leaf `{from}` imports `{to}`; leaves import only {allowed:?}"
                    ));
                }
            }
        }
    }
    for cycle in cycles(&report.edges) {
        out.push(format!(
            "top-level modules form a cycle: {}",
            cycle.join(" ↔ ")
        ));
    }
    out.extend(report.secrets.iter().cloned());
    out
}

/// This crate's `src`, which the checks below read.
fn crate_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_sources_keep_the_layer_table() {
    let src = crate_src();
    let report = scan(&src);
    assert!(
        report.files.len() > 10,
        "found too few modules in {}: {:?}",
        src.display(),
        report.files.keys()
    );
    let broken = violations(&report);
    assert!(
        broken.is_empty(),
        "architecture rules broken:\n{}",
        broken.join("\n")
    );
}

// The checker on planted trees: each rule must fire.

fn plant(files: &[(&str, &str)]) -> (tempfile::TempDir, Report) {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let report = scan(dir.path());
    (dir, report)
}

#[test]
fn an_upward_import_is_caught_in_every_spelling() {
    for code in [
        "use crate::agent::Services;",
        "use crate::{events::Event, agent::turn};",
        "use crate::{\n    events,\n    agent,\n};",
        "fn f() { let _ = crate::agent::turn::run_turn; }",
    ] {
        let (_d, r) = plant(&[("tree/engine.rs", code), ("agent/mod.rs", "")]);
        let v = violations(&r);
        assert!(
            v.iter()
                .any(|l| l.contains("`tree` names upper module `agent`")),
            "{code}: {v:?}"
        );
    }
}

#[test]
fn super_paths_resolve_to_their_top_level_module() {
    // src/voice_loop/wake.rs: super::super::x is crate::x
    let (_d, r) = plant(&[
        ("stt/wake.rs", "use super::super::wyoming::Thing;"),
        ("wyoming/mod.rs", ""),
    ]);
    assert!(violations(&r)
        .iter()
        .any(|l| l.contains("`stt` names upper module `wyoming`")));
    // inside an inline module, super:: stays in the file's module
    let (_d, r) = plant(&[(
        "onnx.rs",
        "mod env { use super::*; use super::helper; }\nfn helper() {}",
    )]);
    assert!(violations(&r).is_empty(), "{:?}", violations(&r));
}

#[test]
fn comments_strings_and_tests_do_not_count() {
    let (_d, r) = plant(&[(
        "tree/engine.rs",
        "// use crate::agent::X;\nconst S: &str = \"crate::agent::X\";\nconst R: &str = r#\"crate::api\"#;\nfn brace() -> char { '{' }\n#[cfg(test)]\nmod tests { use crate::agent::Services; }\n#[cfg(test)]\nuse crate::cli::X;\n",
    )]);
    assert!(violations(&r).is_empty(), "{:?}", violations(&r));
}

#[test]
fn a_cycle_among_lower_modules_is_caught_but_config_edges_are_not_cycles() {
    let (_d, r) = plant(&[
        ("tree/mod.rs", "use crate::memory::Memory;"),
        ("memory/mod.rs", "use crate::tree::Engine;"),
    ]);
    assert!(violations(&r)
        .iter()
        .any(|l| l.contains("cycle: memory ↔ tree")));
    let (_d, r) = plant(&[
        ("app.rs", "use crate::config::Config;"),
        (
            "config.rs",
            "use crate::app::X; use crate::tree::TreeConfig;",
        ),
        ("tree/mod.rs", ""),
    ]);
    assert!(violations(&r).is_empty(), "{:?}", violations(&r));
}

#[test]
fn config_is_read_only_by_the_root_and_the_cli() {
    let (_d, r) = plant(&[("tts/mod.rs", "fn f(c: &crate::config::Config) {}")]);
    assert!(violations(&r)
        .iter()
        .any(|l| l.contains("`tts` imports `config`")));
}

#[test]
fn a_leaf_imports_nothing_else() {
    let (_d, r) = plant(&[("wyoming_proto/client.rs", "use crate::audio::wav;")]);
    assert!(violations(&r)
        .iter()
        .any(|l| l.contains("leaf `wyoming_proto` imports `audio`")));
}

#[test]
fn an_unknown_top_level_module_must_be_classified() {
    let (_d, r) = plant(&[("gadget.rs", "")]);
    assert!(violations(&r)
        .iter()
        .any(|l| l.contains("`gadget` is not in the layer table")));
}

#[test]
fn a_debug_derive_on_a_secret_is_caught_whatever_the_field_type() {
    for (field, ty) in [
        ("api_key", "String"),
        ("tavily_api_key", "Option<String>"),
        ("token", "Secret"),
        ("bearer_token", "String"),
        ("password", "Vec<u8>"),
        ("client_secret", "Redacted<String>"),
    ] {
        let code = format!(
            "/// doc\n#[derive(Debug, Clone, serde::Deserialize)]\n#[serde(default)]\npub struct Section {{\n    pub name: String,\n    /// the key\n    pub {field}: {ty},\n}}\n"
        );
        let (_d, r) = plant(&[("llm/mod.rs", &code)]);
        let v = violations(&r);
        assert!(
            v.iter()
                .any(|l| l.contains("struct Section derives Debug") && l.contains(field)),
            "{field}: {v:?}"
        );
    }
    let ok = "#[derive(Clone)]\npub struct Section { pub api_key: String }\n#[derive(Debug)]\npub struct Other { pub tokens_used: u32, pub keyboard: String }\n";
    let (_d, r) = plant(&[("llm/mod.rs", ok)]);
    assert!(violations(&r).is_empty(), "{:?}", violations(&r));
}

/// Modules whose regexes run on short texts (an utterance, a reply, a
/// sentence to speak): their patterns are built by `small_regex::new`,
/// without the lazy DFA whose per-thread caches grew `earshot run`'s
/// memory by tens of megabytes (issue 21, point 4; notes/latency.md,
/// stop 60). Knowledge and mail read documents and keep the defaults.
const SHORT_TEXT_MODULES: &[&str] = &["tree", "tts", "nlu", "agent", "memory", "voice_loop", "stt"];

/// `file:line` of every regex built with the crate's defaults in the
/// short-text modules under `src` (tests excluded).
fn default_regexes(src: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for module in SHORT_TEXT_MODULES {
        let mut files = Vec::new();
        let dir = src.join(module);
        rs_files(&dir, &mut files);
        let single = src.join(format!("{module}.rs"));
        if single.is_file() {
            files.push(single);
        }
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let code = strip_test_items(&blank_literals(&text));
            for (n, line) in code.lines().enumerate() {
                if ["Regex::new(", "RegexBuilder::new(", "RegexSet::new("]
                    .iter()
                    .any(|call| line.contains(call))
                {
                    found.push(format!("{}:{}", file.display(), n + 1));
                }
            }
        }
    }
    found
}

#[test]
fn short_text_patterns_are_built_without_the_lazy_dfa() {
    let src = crate_src();
    let found = default_regexes(&src);
    assert!(
        found.is_empty(),
        "build these with earshot::small_regex::new:\n{}",
        found.join("\n")
    );
    // The check fires on a planted pattern, in any spelling, but not on
    // the helper itself, a comment or a test.
    let (dir, _) = plant(&[
        ("tree/fit.rs", "fn a() { crate::small_regex::new(\"x\"); }\n// Regex::new(\n#[cfg(test)]\nmod t { fn b() { regex::Regex::new(\"y\"); } }\n"),
        ("tts/clean.rs", "fn c() { let r = regex::Regex::new(r\"\\d+\"); }\n"),
        ("nlu/router/keys.rs", "fn d() { RegexBuilder::new(\"z\"); }\n"),
        ("knowledge/splitter.rs", "fn e() { Regex::new(\"w\"); }\n"),
    ]);
    let mut planted = default_regexes(dir.path());
    planted.sort();
    assert_eq!(planted.len(), 2, "{planted:?}");
    assert!(planted[0].ends_with("nlu/router/keys.rs:1"), "{planted:?}");
    assert!(planted[1].ends_with("tts/clean.rs:1"), "{planted:?}");
}
