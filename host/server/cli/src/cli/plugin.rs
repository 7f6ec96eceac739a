//! `fencing plugin inspect [FILE]`.

use anyhow::Context;
use clap::{Args, Subcommand};
use fencing_runtime::{Plugin, WasmGuard, WasmLimits};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct PluginArgs {
    #[command(subcommand)]
    command: PluginCommand,
}

#[derive(Debug, Subcommand)]
enum PluginCommand {
    /// Print a component's WIT package, exports, imports, size, and whether this host can run it.
    ///
    /// Exits 0 when the plugin is compatible, 2 when it is not (or cannot be read).
    Inspect {
        /// The component file; the embedded guard when omitted.
        file: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: PluginArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        PluginCommand::Inspect { file, json } => inspect(file, json),
    }
}

fn inspect(file: Option<PathBuf>, json: bool) -> anyhow::Result<ExitCode> {
    let engine = WasmGuard::engine(&WasmLimits::default()).context("create engine")?;
    let plugin = match &file {
        Some(path) => {
            let bytes =
                std::fs::read(path).map_err(|e| super::usage(format!("cannot read plugin {}: {e}", path.display())))?;
            Plugin::describe(&engine, &bytes, &path.display().to_string(), None)
                .map_err(|e| super::usage(e.to_string()))?
        }
        None => Plugin::describe(&engine, fencing_runtime::plugin::EMBEDDED, "<embedded>", None)?,
    };
    let info = &plugin.info;
    if json {
        println!("{}", serde_json::to_string_pretty(info)?);
    } else {
        println!("plugin:     {}", info.source);
        println!("size:       {} bytes", info.size);
        println!("sha256:     {}", info.sha256);
        println!("package:    {}", info.package.as_deref().unwrap_or("(none)"));
        println!("exports:");
        for e in &info.exports {
            println!("  {e}");
        }
        println!("imports:    {}", if info.imports.is_empty() { "(none)".into() } else { info.imports.join(", ") });
        match &info.problem {
            None => println!("compatible: yes"),
            Some(p) => println!("compatible: no: {p}"),
        }
        println!("call path:  {}", info.call_path);
    }
    Ok(if info.compatible { ExitCode::SUCCESS } else { ExitCode::from(2) })
}
