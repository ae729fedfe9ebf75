//! `agent-session`: the command line of agent-session.
//!
//! Run `agent-session demo` for a tour, `agent-session --help` for the commands.

mod bench;
mod cli;
mod commands;
mod demo;
mod everyday;
mod keys_cmd;
mod output;
mod retention_cmd;
mod search_cmd;
mod serve_cmd;
mod session_stats;
mod store;
mod transfer;
mod watch;

use std::io::{self, LineWriter, Write};
use std::process::ExitCode;

use clap::Parser;

/// The allocator of the command line and of the server it runs: a store
/// makes and drops several small values per event, which glibc's malloc
/// serves slower the more of them live (a full read of 100,000 events took
/// 2-3 times as long; `docs/performance.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use crate::cli::{Cli, LogFormat};
use crate::output::{describe, report};

/// Sends the library's and the CLI's log events to stderr at the level
/// `-v`/`-q` ask for (`RUST_LOG`, when set, decides instead).
fn init_logging(cli: &Cli) {
    use tracing_subscriber::EnvFilter;
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let ours = [
        "agent_session",
        "agent_session_cli",
        "session_core",
        "session_compaction",
        "session_sqlite",
        "session_fs",
        "session_redis",
        "session_postgres",
        "session_es",
        "session_server",
        "session_client",
        "session_mcp",
    ];
    let directives: Vec<String> = ours.iter().map(|c| format!("{c}={level}")).collect();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        let base = if cli.quiet { "error" } else { "warn" };
        EnvFilter::new(format!("{base},{}", directives.join(",")))
    });
    // Colour only for a terminal: a log file or a pipe gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
        .with_writer(io::stderr);
    // A second subscriber (in tests) is not worth failing for.
    let _ = match cli.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Standard output that remembers whether its reader went away
/// (`agent-session show S | head -1`): then the command ends quietly.
#[derive(Debug)]
struct Stdout {
    inner: io::Stdout,
    closed: bool,
}

impl Stdout {
    fn note<T>(&mut self, r: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &r {
            if e.kind() == io::ErrorKind::BrokenPipe {
                self.closed = true;
            }
        }
        r
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = self.inner.write(buf);
        self.note(r)
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = self.inner.flush();
        self.note(r)
    }
}

fn main() -> ExitCode {
    // No backtraces for users: a panic is a bug, reported in one line.
    std::panic::set_hook(Box::new(|info| {
        report(format_args!(
            "error: internal error ({info}); please report it"
        ));
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A value the identifier types refuse (`--id ../etc`): the one line
        // that says why, like every other bad input, not a usage screen.
        Err(e) if e.kind() == clap::error::ErrorKind::ValueValidation => {
            let text = e.render().to_string();
            report(text.lines().next().unwrap_or("error: invalid argument"));
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    init_logging(&cli);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            report(format_args!("error: cannot start the async runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    // Line by line, as a terminal expects (a long `bench` or `demo` shows
    // each line as it comes), with a closed reader noticed on every write.
    let mut out = LineWriter::new(Stdout {
        inner: io::stdout(),
        closed: false,
    });
    let result = runtime.block_on(commands::run(cli, &mut out));
    let flushed = out.flush();
    if out.get_ref().closed {
        // The reader has all it wanted (`| head`): like `ripgrep`, stop quietly.
        return ExitCode::SUCCESS;
    }
    match (result, flushed) {
        (Ok(()), Ok(())) => ExitCode::SUCCESS,
        (Err(e), _) => {
            report(format_args!("error: {}", describe(&e)));
            if let Some(h) = output::hint(&e) {
                report(h);
            }
            ExitCode::from(output::exit_code(&e))
        }
        (Ok(()), Err(e)) => {
            report(format_args!("error: cannot write to stdout: {e}"));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose `Display` repeats its source, as some do.
    #[derive(Debug)]
    struct Echo(io::Error);

    impl std::fmt::Display for Echo {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "backend error: {}", self.0)
        }
    }

    impl std::error::Error for Echo {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn every_cause_shows_once() {
        let e = anyhow::Error::new(Echo(io::Error::other("disk on fire"))).context("cannot open x");
        assert_eq!(describe(&e), "cannot open x: backend error: disk on fire");
        let e = anyhow::Error::new(io::Error::other("plain")).context("outer");
        assert_eq!(describe(&e), "outer: plain");
    }
}
