//! `agent-session`: the command line of agent-session.
//!
//! Run `agent-session demo` for a tour, `agent-session --help` for the commands.

mod bench;
mod commands;
mod demo;
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

use agent_session::{AppName, InvocationId, Key, SessionId, UserId};
use clap::builder::RangedU64ValueParser;
use clap::{Parser, Subcommand, ValueEnum};

use crate::output::{describe, report};

/// The most events `bench --events` takes.
const MAX_BENCH_EVENTS: u64 = 1_000_000;

/// Durable conversation sessions for LLM agents: inspect, search, compact,
/// export, migrate and benchmark session stores.
#[derive(Debug, Parser)]
#[command(name = "agent-session", version, about)]
pub(crate) struct Cli {
    /// The store: sqlite://file.db, memory://, postgres://host/db, ... (default sqlite://agent-sessions.db)
    #[arg(long, global = true, env = "AGENT_SESSION_STORE")]
    store: Option<String>,
    /// A keyring file (`id:base64-key` per line, the last current): the
    /// store's content is sealed with it (see `docs/security.md`); or give
    /// the keys inline in AGENT_SESSION_KEYS.
    #[arg(long, global = true, env = "AGENT_SESSION_KEYS_FILE")]
    keys_file: Option<std::path::PathBuf>,
    /// Machine-readable JSON on stdout.
    #[arg(long, global = true)]
    json: bool,
    /// More log lines on stderr: -v info, -vv debug, -vvv trace (default: warnings).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// How log lines look: text or json (one object per line). Logs name
    /// stores, sessions and operations, never message content.
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How log lines are written.
/// What an API key may do (`api-key --role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum KeyRoleArg {
    /// Any user of the key's app.
    Admin,
    /// One user at a time: the one the request names, or the bound one.
    Agent,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

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
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr);
    // A second subscriber (in tests) is not worth failing for.
    let _ = match cli.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// A scripted agent conversation, offline: tool calls, a sub-agent,
    /// state, compaction, recall search, rewind and an idle reset.
    Demo,
    /// Prints a shell completion script (`agent-session completions bash > ...`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Prints the manual page (roff; `agent-session man | man -l -`).
    Man,
    /// Creates a session and prints its id.
    Create {
        /// The owning user.
        #[arg(long)]
        user: UserId,
        /// The app namespace.
        #[arg(long, default_value = "default")]
        app: AppName,
        /// The session id (default: a generated UUID).
        #[arg(long)]
        id: Option<SessionId>,
        /// The resolution key.
        #[arg(long)]
        key: Option<Key>,
        /// Time to live: 30m, 2h, 30d, 1h30m, 2weeks or never (default 60 days).
        #[arg(long)]
        ttl: Option<String>,
        /// Metadata entries K=V (V is read as JSON when it parses, else as text).
        #[arg(long = "meta", value_name = "K=V")]
        meta: Vec<String>,
    },
    /// Appends one message and prints its seq: a text message by --role,
    /// an assistant tool call (--tool-call NAME --args JSON) or a tool
    /// result (--tool-result CALL_ID --text ...).
    Append {
        /// The session id.
        session: SessionId,
        /// Who wrote it (not needed with --tool-call or --tool-result).
        #[arg(long, value_enum, required_unless_present_any = ["tool_call", "tool_result"])]
        role: Option<RoleArg>,
        /// The text (optional with --tool-call: what the assistant says with the call).
        #[arg(long, required_unless_present = "tool_call")]
        text: Option<String>,
        /// An assistant message calling this tool; prints the call id too.
        #[arg(long, value_name = "NAME", conflicts_with_all = ["role", "tool_result"])]
        tool_call: Option<String>,
        /// The call's arguments, a JSON object (default `{}`).
        #[arg(long, value_name = "JSON", requires = "tool_call")]
        args: Option<String>,
        /// The call's id (default: a new `call_...` id).
        #[arg(long, value_name = "ID", requires = "tool_call")]
        call_id: Option<String>,
        /// A tool result answering this call id.
        #[arg(long, value_name = "CALL_ID", conflicts_with = "role")]
        tool_result: Option<String>,
        /// For --role tool: the call it answers (prefer --tool-result).
        #[arg(long)]
        tool_call_id: Option<String>,
        /// The tool's name, for a result.
        #[arg(long)]
        tool_name: Option<String>,
        /// The agent branch (orch.researcher).
        #[arg(long)]
        branch: Option<String>,
        /// The invocation id of the agent run.
        #[arg(long)]
        invocation: Option<String>,
        /// State changes K=JSON (`user:` and `app:` prefixes for shared scopes).
        #[arg(long = "state", value_name = "K=JSON")]
        state: Vec<String>,
    },
    /// Lists sessions, newest activity first.
    List {
        /// Only this app.
        #[arg(long)]
        app: Option<String>,
        /// Only this user.
        #[arg(long)]
        user: Option<String>,
        /// Only this status.
        #[arg(long, value_enum)]
        status: Option<StatusArg>,
        /// Only the forks made from this session.
        #[arg(long, value_name = "SESSION")]
        forks_of: Option<SessionId>,
        /// At most this many per page.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Zero-based page of `--limit` sessions.
        #[arg(long, default_value_t = 0, conflicts_with = "all")]
        page: usize,
        /// Every matching session, page after page.
        #[arg(long)]
        all: bool,
    },
    /// Shows a session's events.
    Show {
        /// The session id.
        session: SessionId,
        /// Which view.
        #[arg(long, value_enum, default_value = "context")]
        view: ViewArg,
        /// Only the last N events.
        #[arg(long)]
        last: Option<usize>,
    },
    /// Prints a session's events as they arrive (like `tail -f`): the last
    /// few first, then every new one, polling the store.
    Watch {
        /// The session id.
        session: SessionId,
        /// How many existing events to print first.
        #[arg(long, default_value_t = 10)]
        last: usize,
        /// How often to look for new events (500ms, 2s, ...).
        #[arg(long, default_value = "1s")]
        interval: String,
        /// Stop after printing this many events (default: run until interrupted).
        #[arg(long)]
        exit_after: Option<usize>,
    },
    /// Searches a session's archive: every word must occur (any order, any
    /// case, accents ignored); "a phrase" in quotes; -word excludes.
    Search {
        /// The session id.
        session: SessionId,
        /// The query, e.g. `locker 4711` or `"gate b" -cancelled`.
        query: String,
        /// Zero-based page (negative pages read as 0).
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        page: i64,
        /// Hits per page.
        #[arg(long, default_value_t = 10)]
        page_size: usize,
        /// Best matches first, with their scores (default: oldest first).
        #[arg(long)]
        ranked: bool,
        /// Search all of the session owner's sessions in its app.
        #[arg(long)]
        across: bool,
        /// Print exactly what the `conversation_search` agent tool returns.
        #[arg(long)]
        tool: bool,
    },
    /// Compacts a session's context now.
    Compact {
        /// The session id.
        session: SessionId,
        /// The strategy.
        #[arg(long, value_enum)]
        strategy: StrategyArg,
        /// sliding-window: events to keep.
        #[arg(long)]
        max_events: Option<usize>,
        /// turn-window: turns to keep.
        #[arg(long)]
        max_turns: Option<usize>,
        /// token-budget: tokens to keep.
        #[arg(long)]
        max_tokens: Option<u64>,
        /// summarize: turns kept verbatim; tool-result-clearing: tool results kept verbatim (default 3).
        #[arg(long)]
        keep: Option<usize>,
        /// summarize: who writes the summary (default: the offline extractive summarizer).
        #[arg(long, value_enum, default_value_t = SummarizerArg::Extractive)]
        summarizer: SummarizerArg,
        /// --summarizer openai: the model.
        #[arg(long, required_if_eq("summarizer", "openai"))]
        model: Option<String>,
        /// --summarizer openai: any OpenAI-compatible endpoint (default
        /// OPENAI_BASE_URL, else https://api.openai.com/v1); the key comes from OPENAI_API_KEY.
        #[arg(long)]
        base_url: Option<String>,
    },
    /// Removes the events of an invocation (or from a seq) and everything
    /// after it; what a compaction replaced since then comes back.
    #[command(group(clap::ArgGroup::new("to").required(true).args(["before_invocation", "seq"])))]
    Rewind {
        /// The session id.
        session: SessionId,
        /// The invocation to rewind to (removed with everything after it).
        #[arg(long)]
        before_invocation: Option<InvocationId>,
        /// The seq to rewind to (removed with everything after it).
        #[arg(long)]
        seq: Option<u64>,
    },
    /// Forks a session into a new one holding its events up to a point (by
    /// default all of them), its context there and its state replayed; the
    /// source is untouched.
    #[command(group(clap::ArgGroup::new("at").args(["before_invocation", "seq"])))]
    Fork {
        /// The session to fork.
        session: SessionId,
        /// Fork before this invocation (to run that turn again differently).
        #[arg(long)]
        before_invocation: Option<InvocationId>,
        /// Fork after this seq (the fork holds it and everything before).
        #[arg(long)]
        seq: Option<u64>,
    },
    /// Ends (archives) a session: still readable and searchable, closed to
    /// writes until reopened.
    End {
        /// The session id.
        session: SessionId,
    },
    /// Reopens an ended session: writable again, and resolvable by its key.
    Reopen {
        /// The session id.
        session: SessionId,
    },
    /// Deletes a session and all its events.
    Delete {
        /// The session id.
        session: SessionId,
    },
    /// Writes sessions as JSON Lines (complete: archive, context, state).
    Export {
        /// The sessions to export.
        sessions: Vec<SessionId>,
        /// Export every session.
        #[arg(long)]
        all: bool,
        /// Write to this file instead of stdout.
        #[arg(long)]
        out: Option<String>,
    },
    /// Reads an export file into the store (idempotent).
    Import {
        /// The export file.
        file: String,
    },
    /// Copies every session from --store to another store, then verifies.
    Migrate {
        /// The target store URL.
        #[arg(long)]
        to: String,
        /// Only this app.
        #[arg(long)]
        app: Option<String>,
    },
    /// Deletes expired sessions, then prunes archives by their retention
    /// policies: each session's own (see `retention`), else the default
    /// given here. Context events, system messages and state changes stay.
    PurgeExpired {
        /// Default for sessions without their own policy: keep the latest
        /// this many archived events.
        #[arg(long)]
        keep_latest: Option<u64>,
        /// Default for sessions without their own policy: keep archived
        /// events younger than this (e.g. 30d).
        #[arg(long)]
        max_age: Option<String>,
        /// Prune archives (and give the default) in this app only; expired
        /// sessions are purged in every app.
        #[arg(long)]
        app: Option<String>,
    },
    /// Shows, sets or clears a session's archive retention policy. Old
    /// archived events outside it go at the next `purge-expired` (or now
    /// with --prune); context events, system messages and state changes
    /// stay, and seqs never move.
    Retention {
        /// The session id.
        session: SessionId,
        /// Keep the latest this many archived events.
        #[arg(long)]
        keep_latest: Option<u64>,
        /// Keep archived events younger than this (e.g. 30d, 12h).
        #[arg(long)]
        max_age: Option<String>,
        /// Remove the session's own policy.
        #[arg(long, conflicts_with_all = ["keep_latest", "max_age"])]
        clear: bool,
        /// Prune the archive by the policy now.
        #[arg(long)]
        prune: bool,
    },
    /// Erases everything stored of one user in one app: every session of
    /// theirs (forks, ended and expired ones included), its events and
    /// search entries, and their `user:` state. Group sessions and `app:`
    /// state stay. Idempotent.
    EraseUser {
        /// The app.
        #[arg(long)]
        app: String,
        /// The user.
        #[arg(long)]
        user: String,
    },
    /// Wraps each session's data key with the keyring's current (last)
    /// key and seals what was stored before encryption was on; the store
    /// stays in use. Every session, or the ones given.
    Rekey {
        /// Only these sessions.
        sessions: Vec<SessionId>,
    },
    /// Serves the store over HTTP (the JSON API of docs/server.md) until
    /// interrupted (Ctrl-C or SIGTERM), then finishes the requests in flight.
    Serve {
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080", env = "AGENT_SESSION_LISTEN")]
        listen: std::net::SocketAddr,
        /// The API key file (`api-key` prints its lines); every call then needs a key.
        #[arg(long, env = "AGENT_SESSION_API_KEYS_FILE")]
        api_keys: Option<std::path::PathBuf>,
        /// Serve without keys on an address other than loopback (anyone who
        /// reaches it reads and writes every session).
        #[arg(long)]
        insecure_no_auth: bool,
        /// The largest request body in bytes.
        #[arg(long, default_value_t = 32 * 1024 * 1024)]
        max_body_bytes: usize,
        /// Requests a second each API key may send on average (bursts of
        /// twice as many); past that, 429. Default: no limit.
        #[arg(long)]
        rate_limit: Option<std::num::NonZeroU32>,
        /// Serve HTTPS with this PEM certificate chain (with --tls-key).
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<std::path::PathBuf>,
        /// The PEM private key of --tls-cert.
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<std::path::PathBuf>,
        /// How long a request may take before it is answered 503: 30s, 2m.
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        request_timeout: std::time::Duration,
    },
    /// Serves the session tools over MCP on stdin and stdout for one user
    /// of one app (for an MCP client that starts it: Claude Desktop, an
    /// IDE, an agent framework).
    Mcp {
        /// The app.
        #[arg(long, default_value = "default")]
        app: AppName,
        /// The user the tools act for.
        #[arg(long)]
        user: UserId,
    },
    /// Prints a new API key for `serve --api-keys FILE`: the secret (give
    /// it to the client, it is not shown again) and the line to add to the file.
    ApiKey {
        /// The key's name, for logs.
        #[arg(long)]
        name: String,
        /// The app it acts in, or `*` for every app (operator keys).
        #[arg(long)]
        app: String,
        /// `admin` (any user of the app) or `agent` (one user at a time).
        #[arg(long, value_enum)]
        role: KeyRoleArg,
        /// Binds an agent key to this one user.
        #[arg(long)]
        user: Option<UserId>,
    },
    /// Prints a new random key as a keyring entry (`ID:base64`): append it
    /// to the keyring file to make it the current key.
    Keygen {
        /// The new key's id (letters, digits, - or _).
        id: String,
    },
    /// Counts sessions and events; with a session: its size, how its
    /// tokens are counted, and the model usage recorded per invocation.
    Stats {
        /// Only this session.
        session: Option<SessionId>,
        /// Also count the session's context as this model does (BPE for
        /// OpenAI models, e.g. gpt-4o → o200k_base).
        #[arg(long, requires = "session")]
        model: Option<String>,
    },
    /// Measures the store with the reference workloads, next to its raw
    /// engine in the same run (`--compare raw`): W1 appends to one session,
    /// W2 appends round robin to many, W3 reads, W4 searches, reads at
    /// growing session lengths, compaction end to end.
    Bench {
        /// Which workload (`all`: every one but `recall`).
        #[arg(long, value_enum, default_value = "all")]
        workload: WorkloadArg,
        /// Events W1 appends (and W3 and W4 read and search), at most 1000000.
        #[arg(long, default_value_t = 10_000,
              value_parser = RangedU64ValueParser::<usize>::new().range(0..=MAX_BENCH_EVENTS))]
        events: usize,
        /// Sessions W2 appends 20 events each to, at most 100000.
        #[arg(long, default_value_t = 1000,
              value_parser = RangedU64ValueParser::<usize>::new().range(1..=100_000))]
        sessions: usize,
        /// Concurrent clients of W2, at most 256.
        #[arg(long, default_value_t = 1,
              value_parser = RangedU64ValueParser::<usize>::new().range(1..=256))]
        clients: usize,
        /// Rounds per workload: each measures the store and the raw engine back to back.
        #[arg(long, default_value_t = 5,
              value_parser = RangedU64ValueParser::<usize>::new().range(1..=100))]
        repeat: usize,
        /// Measure the raw engine beside the store (memory, sqlite, fs, redis, postgres).
        #[arg(long, value_enum)]
        compare: Option<CompareArg>,
        /// Session lengths of the scaling workload, comma-separated (each at most 1000000).
        #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000",
              value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_BENCH_EVENTS))]
        sizes: Vec<usize>,
    },
}

/// What `bench` measures the store against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CompareArg {
    /// The raw engine: the least the engine must do, written by hand.
    Raw,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum RoleArg {
    User,
    Assistant,
    System,
    Tool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum StatusArg {
    Active,
    Archived,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ViewArg {
    Context,
    Archive,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum StrategyArg {
    SlidingWindow,
    TurnWindow,
    TokenBudget,
    Summarize,
    ToolResultClearing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SummarizerArg {
    /// Offline and deterministic: the salient sentences of each turn.
    Extractive,
    /// An OpenAI-compatible `/chat/completions` endpoint.
    Openai,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum WorkloadArg {
    /// Appends to one session, one call each.
    #[value(alias = "append")]
    W1,
    /// 20 appends to each of many sessions, round robin.
    #[value(alias = "multi")]
    W2,
    /// A full read and the last 20 of W1's session.
    #[value(alias = "read")]
    W3,
    /// Single-word searches in W1's session, frequent to rare.
    #[value(alias = "search")]
    W4,
    /// The last 20 and a full read at each of `--sizes` session lengths.
    Scaling,
    /// Compaction end to end of a 1,000-event context.
    Compaction,
    /// Search at scale: sessions of N/10 and N events, a selective and a frequent query (not in `all`).
    Recall,
    /// Every workload but `recall`.
    All,
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
