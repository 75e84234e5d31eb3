//! `earshot export --format csv|jsonl [--reviewed] [--out FILE]`.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

use crate::review::export::{write, Format};

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// csv or jsonl.
    #[arg(long, default_value = "jsonl")]
    pub format: String,
    /// Only turns with at least one review.
    #[arg(long)]
    pub reviewed: bool,
    /// Write here instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(config_path: Option<&Path>, args: ExportArgs) -> Result<bool> {
    let config = super::load_config(config_path)?.config;
    let store = crate::store::Store::open(&config.database_path())?;
    let format = Format::parse(&args.format)
        .ok_or_else(|| anyhow!("--format must be csv or jsonl (got {:?})", args.format))?;
    let n = match &args.out {
        Some(path) => {
            let mut file = std::io::BufWriter::new(
                std::fs::File::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            );
            let n = write(&store, format, args.reviewed, &mut file)?;
            std::io::Write::flush(&mut file)
                .with_context(|| format!("cannot write {}", path.display()))?;
            n
        }
        None => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            write(&store, format, args.reviewed, &mut lock)?
        }
    };
    if args.out.is_some() {
        eprintln!("{n} turns exported.");
    }
    Ok(true)
}
