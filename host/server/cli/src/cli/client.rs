//! `fencing write` and `fencing read`: clients of the storage API.
//!
//! Both print the server's JSON answer (`read --raw` prints the object's
//! bytes instead). Exit codes: 0 on 200; 1 when the fence refused the write
//! (409), the object does not exist (404), the token was refused (401), on 5xx or when the server is
//! unreachable; 2 on bad input (checked before sending, or any other 4xx).

use super::values::MutationArg;
use anyhow::Context;
use clap::Args;
use fencing_api::client::storage::{Answer, StorageClient, Write};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ServerArg {
    /// Base URL of the server.
    #[arg(long, default_value = "http://127.0.0.1:7070", env = "FENCING_SERVER")]
    server: String,
}

#[derive(Debug, Args)]
pub struct WriteArgs {
    #[command(flatten)]
    server: ServerArg,
    /// Resource (bucket-like id), e.g. `storage:customer-orders-bucket`.
    #[arg(long)]
    resource: String,
    /// The fencing token from the lock service.
    #[arg(long)]
    token: u64,
    /// Object path within the resource.
    #[arg(long)]
    path: String,
    /// PUT (replace), APPEND or DELETE.
    #[arg(long, value_enum, default_value = "put", ignore_case = true)]
    mutation: MutationArg,
    /// The bytes, as UTF-8 text.
    #[arg(long, conflicts_with = "file")]
    data: Option<String>,
    /// Read the bytes from this file (`-` for stdin).
    #[arg(long)]
    file: Option<PathBuf>,
    /// The lock the token came from (default: the resource id).
    #[arg(long)]
    lock: Option<String>,
    /// Per-write sequence within the token.
    #[arg(long)]
    sequence: Option<u64>,
    /// The grant's `fencing_proof` (hex), for a server started with `--verify-keys`.
    #[arg(long)]
    proof: Option<String>,
    /// File holding the bearer token of a server started with `--auth-token-file`.
    #[arg(long, env = "FENCING_AUTH_TOKEN_FILE")]
    auth_token_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    #[command(flatten)]
    server: ServerArg,
    #[arg(long)]
    resource: String,
    #[arg(long)]
    path: String,
    /// Print the object's bytes instead of the JSON answer.
    #[arg(long)]
    raw: bool,
}

/// Reads the client's bearer token, if a token file was given; a bad file is bad input.
pub fn auth_token(path: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    path.map(|p| fencing_server::http::auth::read_token_file(p).map_err(|e| super::usage(e.to_string()))).transpose()
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("start tokio runtime")
}

fn finish(answer: &Answer) -> anyhow::Result<ExitCode> {
    println!("{}", serde_json::to_string_pretty(&answer.body)?);
    Ok(match answer.status {
        200..=299 => ExitCode::SUCCESS,
        401 | 404 | 409 => ExitCode::FAILURE,
        400..=499 => ExitCode::from(2),
        _ => ExitCode::FAILURE,
    })
}

pub fn write(args: WriteArgs) -> anyhow::Result<ExitCode> {
    let bytes = match (&args.data, &args.file) {
        (Some(d), _) => d.clone().into_bytes(),
        (None, Some(p)) if p.as_os_str() == "-" => {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).context("read stdin")?;
            buf
        }
        (None, Some(p)) => {
            std::fs::read(p).map_err(|e| super::usage(format!("cannot read --file {}: {e}", p.display())))?
        }
        (None, None) if args.mutation == MutationArg::Delete => Vec::new(),
        (None, None) => return Err(super::usage("give the bytes with --data or --file (not needed for DELETE)")),
    };
    let client = StorageClient::new(&args.server.server).with_auth(auth_token(args.auth_token_file.as_deref())?);
    let w = Write {
        resource_id: &args.resource,
        token: args.token,
        file_path: &args.path,
        mutation: args.mutation.into(),
        bytes: &bytes,
        lock_id: args.lock.as_deref(),
        sequence: args.sequence,
        proof: args.proof.as_deref(),
    };
    let answer = runtime()?.block_on(client.write(&w))?;
    finish(&answer)
}

pub fn read(args: ReadArgs) -> anyhow::Result<ExitCode> {
    let client = StorageClient::new(&args.server.server);
    let answer = runtime()?.block_on(client.read(&args.resource, &args.path))?;
    if args.raw && answer.status == 200 {
        let bytes = answer.bytes().context("answer has no valid base64 `bytes`")?;
        std::io::stdout().write_all(&bytes)?;
        return Ok(ExitCode::SUCCESS);
    }
    finish(&answer)
}
