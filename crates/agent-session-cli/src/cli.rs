//! The command line's arguments: every command and flag, as clap parses
//! them. A leaf: it names no command module (they read their arguments
//! from here).

use agent_session::{AppName, InvocationId, Key, SessionId, UserId};
use clap::builder::RangedU64ValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};

/// The most events `bench --events` takes.
const MAX_BENCH_EVENTS: u64 = 1_000_000;

/// Durable conversation sessions for LLM agents: inspect, search, compact,
/// export, migrate and benchmark session stores.
#[derive(Debug, Parser)]
#[command(name = "agent-session", version, about)]
pub(crate) struct Cli {
    /// The store: sqlite://file.db, memory://, postgres://host/db, ... (default sqlite://agent-sessions.db)
    #[arg(long, global = true, env = "AGENT_SESSION_STORE")]
    pub(crate) store: Option<String>,
    /// A keyring file (`id:base64-key` per line, the last current): the
    /// store's content is sealed with it (see `docs/security.md`); or give
    /// the keys inline in AGENT_SESSION_KEYS.
    #[arg(long, global = true, env = "AGENT_SESSION_KEYS_FILE")]
    pub(crate) keys_file: Option<std::path::PathBuf>,
    /// Machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// More log lines on stderr: -v info, -vv debug, -vvv trace (default: warnings).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub(crate) verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    pub(crate) quiet: bool,
    /// How log lines look: text or json (one object per line). Logs name
    /// stores, sessions and operations, never message content.
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub(crate) log_format: LogFormat,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// What an API key may do (`api-key --role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum KeyRoleArg {
    /// Any user of the key's app.
    Admin,
    /// One user at a time: the one the request names, or the bound one.
    Agent,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The commands.
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
    Create(CreateArgs),
    /// Appends one message and prints its seq: a text message by --role,
    /// an assistant tool call (--tool-call NAME --args JSON) or a tool
    /// result (--tool-result CALL_ID --text ...).
    Append(AppendArgs),
    /// Lists sessions, newest activity first.
    List(ListArgs),
    /// Shows a session's events.
    Show(ShowArgs),
    /// Prints a session's events as they arrive (like `tail -f`): the last
    /// few first, then every new one, polling the store.
    Watch(WatchArgs),
    /// Searches a session's archive: every word must occur (any order, any
    /// case, accents ignored; with --any, one is enough); "a phrase" in
    /// quotes; -word excludes; --since keeps events from a time on.
    Search(SearchArgs),
    /// Prints the context a session's next model call gets: the pinned
    /// system messages first, the view of the agent on --branch, tool calls
    /// without their results left out (`role: text` lines, or with --json
    /// the messages in the chat-completions shape, one per line).
    Context(ContextArgs),
    /// Compacts a session's context now.
    Compact(CompactArgs),
    /// Removes the events of an invocation (or from a seq) and everything
    /// after it; what a compaction replaced since then comes back.
    Rewind(RewindArgs),
    /// Forks a session into a new one holding its events up to a point (by
    /// default all of them), its context there and its state replayed; the
    /// source is untouched.
    Fork(ForkArgs),
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
    Serve(ServeArgs),
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
    Bench(BenchArgs),
}

// The arguments of `create` (its help is the variant's doc comment).
#[derive(Debug, Args)]
pub(crate) struct CreateArgs {
    /// The owning user.
    #[arg(long)]
    pub(crate) user: UserId,
    /// The app namespace.
    #[arg(long, default_value = "default")]
    pub(crate) app: AppName,
    /// The session id (default: a generated UUID).
    #[arg(long)]
    pub(crate) id: Option<SessionId>,
    /// The resolution key.
    #[arg(long)]
    pub(crate) key: Option<Key>,
    /// Time to live: 30m, 2h, 30d, 1h30m, 2weeks or never (default 60 days).
    #[arg(long)]
    pub(crate) ttl: Option<String>,
    /// Metadata entries K=V (V is read as JSON when it parses, else as text).
    #[arg(long = "meta", value_name = "K=V")]
    pub(crate) meta: Vec<String>,
}

// The arguments of `append` (its help is the variant's doc comment).
#[derive(Debug, Args)]
pub(crate) struct AppendArgs {
    /// The session id.
    pub(crate) session: SessionId,
    /// Who wrote it (not needed with --tool-call or --tool-result).
    #[arg(long, value_enum, required_unless_present_any = ["tool_call", "tool_result"])]
    pub(crate) role: Option<RoleArg>,
    /// The text (optional with --tool-call: what the assistant says with the call).
    #[arg(long, required_unless_present = "tool_call")]
    pub(crate) text: Option<String>,
    /// An assistant message calling this tool; prints the call id too.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["role", "tool_result"])]
    pub(crate) tool_call: Option<String>,
    /// The call's arguments, a JSON object (default `{}`).
    #[arg(long, value_name = "JSON", requires = "tool_call")]
    pub(crate) args: Option<String>,
    /// The call's id (default: a new `call_...` id).
    #[arg(long, value_name = "ID", requires = "tool_call")]
    pub(crate) call_id: Option<String>,
    /// A tool result answering this call id.
    #[arg(long, value_name = "CALL_ID", conflicts_with = "role")]
    pub(crate) tool_result: Option<String>,
    /// For --role tool: the call it answers (prefer --tool-result).
    #[arg(long)]
    pub(crate) tool_call_id: Option<String>,
    /// The tool's name, for a result.
    #[arg(long)]
    pub(crate) tool_name: Option<String>,
    /// The agent branch (orch.researcher).
    #[arg(long)]
    pub(crate) branch: Option<String>,
    /// The invocation id of the agent run.
    #[arg(long)]
    pub(crate) invocation: Option<String>,
    /// State changes K=JSON (`user:` and `app:` prefixes for shared scopes).
    #[arg(long = "state", value_name = "K=JSON")]
    pub(crate) state: Vec<String>,
}

// The arguments of `list` (its help is the variant's doc comment).
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Only this app.
    #[arg(long)]
    pub(crate) app: Option<String>,
    /// Only this user.
    #[arg(long)]
    pub(crate) user: Option<String>,
    /// Only this status.
    #[arg(long, value_enum)]
    pub(crate) status: Option<StatusArg>,
    /// Only the forks made from this session.
    #[arg(long, value_name = "SESSION")]
    pub(crate) forks_of: Option<SessionId>,
    /// At most this many per page.
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: usize,
    /// Zero-based page of `--limit` sessions.
    #[arg(long, default_value_t = 0, conflicts_with = "all")]
    pub(crate) page: usize,
    /// Every matching session, page after page.
    #[arg(long)]
    pub(crate) all: bool,
}

// The arguments of `context` (its help is the variant's doc comment).
#[derive(Debug, Args)]
pub(crate) struct ContextArgs {
    /// The session id.
    pub(crate) session: SessionId,
    /// The branch of the agent asking (`orch.researcher`).
    #[arg(long)]
    pub(crate) branch: Option<String>,
}

// The arguments of `show` (its help is the variant's doc comment).
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The session id.
    pub(crate) session: SessionId,
    /// Which view.
    #[arg(long, value_enum, default_value = "context")]
    pub(crate) view: ViewArg,
    /// Only the last N events.
    #[arg(long)]
    pub(crate) last: Option<usize>,
}

// The arguments of `watch` (its help is the variant's doc comment).
#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// The session id.
    pub(crate) session: SessionId,
    /// How many existing events to print first.
    #[arg(long, default_value_t = 10)]
    pub(crate) last: usize,
    /// How often to look for new events (500ms, 2s, ...).
    #[arg(long, default_value = "1s")]
    pub(crate) interval: String,
    /// Stop after printing this many events (default: run until interrupted).
    #[arg(long)]
    pub(crate) exit_after: Option<usize>,
}

// The arguments of `search` (its help is the variant's doc comment).
#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools)] // one per command-line switch
pub(crate) struct SearchArgs {
    /// The session id.
    pub(crate) session: SessionId,
    /// The query, e.g. `locker 4711` or `"gate b" -cancelled`.
    pub(crate) query: String,
    /// Zero-based page (negative pages read as 0).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub(crate) page: i64,
    /// Hits per page.
    #[arg(long, default_value_t = 10)]
    pub(crate) page_size: usize,
    /// Best matches first, with their scores (default: oldest first).
    #[arg(long)]
    pub(crate) ranked: bool,
    /// Search all of the session owner's sessions in its app.
    #[arg(long)]
    pub(crate) across: bool,
    /// Events holding any one of the words and phrases (default: every one);
    /// -word still excludes.
    #[arg(long)]
    pub(crate) any: bool,
    /// Only events at or after this time: RFC 3339 (2026-01-01T00:00:00Z)
    /// or a date (2026-01-01, midnight UTC).
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Print exactly what the `conversation_search` agent tool returns: a
    /// page bounded to 2,000 tokens, long hits cut to their snippets.
    #[arg(long)]
    pub(crate) tool: bool,
    /// With --tool: the seed's unbounded output (every text whole, no seq).
    #[arg(long, requires = "tool")]
    pub(crate) seed_exact: bool,
}

// The arguments of `compact` (its help is the variant's doc comment).
#[derive(Debug, Args)]
pub(crate) struct CompactArgs {
    /// The session id.
    pub(crate) session: SessionId,
    /// The strategy.
    #[arg(long, value_enum, required_unless_present = "spec")]
    pub(crate) strategy: Option<StrategyArg>,
    /// The compaction as every face takes it, as JSON instead of the flags:
    /// `{"strategy": "summarize" | "structured_summary" | "sliding_window" |
    /// "turn_window" | "token_budget" | "tool_result_clearing", its
    /// parameters, "trigger": {"tokens": N, ...}, "summarizer": "openai:MODEL"}`.
    #[arg(long, conflicts_with = "strategy")]
    pub(crate) spec: Option<String>,
    /// sliding-window: events to keep.
    #[arg(long)]
    pub(crate) max_events: Option<usize>,
    /// turn-window: turns to keep.
    #[arg(long)]
    pub(crate) max_turns: Option<usize>,
    /// token-budget: tokens to keep.
    #[arg(long)]
    pub(crate) max_tokens: Option<u64>,
    /// summarize: turns kept verbatim (default: the 10 newest messages); tool-result-clearing: tool results kept verbatim (default 3).
    #[arg(long)]
    pub(crate) keep: Option<usize>,
    /// summarize: who writes the summary (default: the offline extractive summarizer).
    #[arg(long, value_enum, default_value_t = SummarizerArg::Extractive)]
    pub(crate) summarizer: SummarizerArg,
    /// --summarizer openai: the model.
    #[arg(long, required_if_eq("summarizer", "openai"))]
    pub(crate) model: Option<String>,
    /// --summarizer openai: any OpenAI-compatible endpoint (default
    /// OPENAI_BASE_URL, else https://api.openai.com/v1); the key comes from OPENAI_API_KEY.
    #[arg(long)]
    pub(crate) base_url: Option<String>,
}

// The arguments of `rewind` (its help is the variant's doc comment).
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("to").required(true).args(["before_invocation", "seq"])))]
pub(crate) struct RewindArgs {
    /// The session id.
    pub(crate) session: SessionId,
    /// The invocation to rewind to (removed with everything after it).
    #[arg(long)]
    pub(crate) before_invocation: Option<InvocationId>,
    /// The seq to rewind to (removed with everything after it).
    #[arg(long)]
    pub(crate) seq: Option<u64>,
}

// The arguments of `fork` (its help is the variant's doc comment).
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("at").args(["before_invocation", "seq"])))]
pub(crate) struct ForkArgs {
    /// The session to fork.
    pub(crate) session: SessionId,
    /// Fork before this invocation (to run that turn again differently).
    #[arg(long)]
    pub(crate) before_invocation: Option<InvocationId>,
    /// Fork after this seq (the fork holds it and everything before).
    #[arg(long)]
    pub(crate) seq: Option<u64>,
}

// The arguments of `serve` (its help is the variant's doc comment).
#[derive(Debug, Clone, Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080", env = "AGENT_SESSION_LISTEN")]
    pub(crate) listen: std::net::SocketAddr,
    /// The API key file (`api-key` prints its lines); every call then needs a key.
    #[arg(long, env = "AGENT_SESSION_API_KEYS_FILE")]
    pub(crate) api_keys: Option<std::path::PathBuf>,
    /// Serve without keys on an address other than loopback (anyone who
    /// reaches it reads and writes every session).
    #[arg(long)]
    pub(crate) insecure_no_auth: bool,
    /// The largest request body in bytes.
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    pub(crate) max_body_bytes: usize,
    /// Requests a second each API key may send on average (bursts of
    /// twice as many); past that, 429. Default: no limit.
    #[arg(long)]
    pub(crate) rate_limit: Option<std::num::NonZeroU32>,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, requires = "tls_key")]
    pub(crate) tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub(crate) tls_key: Option<std::path::PathBuf>,
    /// How long a request may take before it is answered 503: 30s, 2m.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub(crate) request_timeout: std::time::Duration,
}

// The arguments of `bench` (its help is the variant's doc comment).
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchArgs {
    /// Which workload (`all`: every one but `recall`).
    #[arg(long, value_enum, default_value = "all")]
    pub(crate) workload: WorkloadArg,
    /// Events W1 appends (and W3 and W4 read and search), at most 1000000.
    #[arg(long, default_value_t = 10_000,
          value_parser = RangedU64ValueParser::<usize>::new().range(0..=MAX_BENCH_EVENTS))]
    pub(crate) events: usize,
    /// Sessions W2 appends 20 events each to, at most 100000.
    #[arg(long, default_value_t = 1000,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    pub(crate) sessions: usize,
    /// Concurrent clients of W2, at most 256.
    #[arg(long, default_value_t = 1,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=256))]
    pub(crate) clients: usize,
    /// Rounds per workload: each measures the store and the raw engine back to back.
    #[arg(long, default_value_t = 5,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=100))]
    pub(crate) repeat: usize,
    /// Measure the raw engine beside the store (memory, sqlite, fs, redis, postgres).
    #[arg(long, value_enum)]
    pub(crate) compare: Option<CompareArg>,
    /// Session lengths of the scaling workload, comma-separated (each at most 1000000).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000",
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_BENCH_EVENTS))]
    pub(crate) sizes: Vec<usize>,
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
    /// The last 20 and a full read at each of `--sizes` session lengths (the full reads next to the raw engine).
    Scaling,
    /// Compaction end to end of a 1,000-event context, then rolling compactions.
    Compaction,
    /// Search at scale: sessions of N/10 and N events, a selective and a frequent query (not in `all`).
    Recall,
    /// Every workload but `recall`.
    All,
}
