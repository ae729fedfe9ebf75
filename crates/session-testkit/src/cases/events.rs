//! Reading events: context and archive views, filters, paging, field round-trip, turn count.

use chrono::{Duration, TimeZone, Utc};
use serde_json::json;
use session_core::{
    turn_count, Clock as _, CompactionSource, ContentPart, ErrorKind, EventFilter, EventView,
    Message, Role, SessionEvent, SyntheticFilter, ToolCall,
};

use super::support::{kind, numbered};
use crate::fixture::{assistant, texts, user, Fixture};

/// The context is what compaction left plus later appends; the archive keeps everything.
pub async fn events_context_and_archive_views(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("m", 4)).await;
    let ctx = fx.context(&s.id).await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    assert!(fx
        .repo
        .replace_context(&s.id, ctx[2..].to_vec(), v)
        .await
        .unwrap());
    fx.append(&s.id, vec![user("m 5")]).await;
    assert_eq!(texts(&fx.context(&s.id).await), ["m 3", "m 4", "m 5"]);
    assert_eq!(
        texts(&fx.archive(&s.id).await),
        ["m 1", "m 2", "m 3", "m 4", "m 5"]
    );
    assert_eq!(fx.texts(&s.id, &EventFilter::context()).await.len(), 3);
}

/// `last_n` returns the most recent N matching events, oldest first.
pub async fn events_last_n_returns_most_recent_oldest_first(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("m", 30)).await;
    assert_eq!(
        fx.texts(&s.id, &EventFilter::last(3)).await,
        ["m 28", "m 29", "m 30"]
    );
    assert_eq!(
        fx.texts(&s.id, &EventFilter::last(3).view(EventView::Archive))
            .await,
        ["m 28", "m 29", "m 30"]
    );
    assert_eq!(fx.texts(&s.id, &EventFilter::last(100)).await.len(), 30);
    // last_n then paging: page 1 of the last 5 in pages of 2.
    let f = EventFilter::context().last_n(5).page(1, 2);
    assert_eq!(fx.texts(&s.id, &f).await, ["m 28", "m 29"]);
}

/// An agent on `orch.researcher` sees root events, `orch` and its own branch; not `orch.writer`.
pub async fn events_branch_visibility(fx: Fixture) {
    let s = fx.session("alice").await;
    let on = |b: &str, t: &str| {
        SessionEvent::builder(Message::assistant(t))
            .branch(b)
            .build()
            .unwrap()
    };
    fx.append(
        &s.id,
        vec![
            user("root"),
            on("orch", "orchestrator"),
            on("orch.researcher", "research"),
            on("orch.writer", "writing"),
            on("orch.researcher.deep", "deeper"),
        ],
    )
    .await;
    let f = EventFilter::archive()
        .branch("orch.researcher")
        .page(0, 100);
    assert_eq!(
        fx.texts(&s.id, &f).await,
        ["root", "orchestrator", "research"]
    );
    let f = EventFilter::archive().branch("orch").page(0, 100);
    assert_eq!(fx.texts(&s.id, &f).await, ["root", "orchestrator"]);
    assert_eq!(
        fx.texts(&s.id, &EventFilter::archive().page(0, 100))
            .await
            .len(),
        5
    );
}

/// A time range keeps events with `from <= timestamp < to`.
pub async fn events_time_range(fx: Fixture) {
    let s = fx.session("alice").await;
    let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap();
    let at = |min: i64, t: &str| {
        SessionEvent::builder(Message::user(t))
            .timestamp(t0 + Duration::minutes(min))
            .build()
            .unwrap()
    };
    fx.append(
        &s.id,
        vec![at(0, "a"), at(10, "b"), at(20, "c"), at(30, "d")],
    )
    .await;
    let f = EventFilter::archive().between(
        Some(t0 + Duration::minutes(10)),
        Some(t0 + Duration::minutes(30)),
    );
    assert_eq!(fx.texts(&s.id, &f).await, ["b", "c"]);
    let f = EventFilter::archive().between(Some(t0 + Duration::minutes(15)), None);
    assert_eq!(fx.texts(&s.id, &f).await, ["c", "d"]);
}

/// A role filter keeps only the given roles.
pub async fn events_role_filter(fx: Fixture) {
    let s = fx.session("alice").await;
    let call = ToolCall::new("c1", "lookup", &json!({"q": "x"}));
    fx.append(
        &s.id,
        vec![
            SessionEvent::new(Message::system("sys")),
            user("q"),
            SessionEvent::new(Message::assistant_tool_calls("calling", vec![call])),
            SessionEvent::new(Message::tool_result("c1", "lookup", "result")),
            assistant("answer"),
        ],
    )
    .await;
    let f = EventFilter::archive().roles([Role::User, Role::Tool]);
    assert_eq!(fx.texts(&s.id, &f).await, ["q", "result"]);
    let f = EventFilter::archive().roles([Role::Assistant]);
    let page = fx.repo.events(&s.id, &f).await.unwrap();
    assert_eq!(texts(&page.items), ["calling", "answer"]);
    assert_eq!(page.items[0].message.tool_calls()[0].name, "lookup");
}

/// Synthetic events can be included, excluded or selected alone.
pub async fn events_synthetic_in_out_only(fx: Fixture) {
    let s = fx.session("alice").await;
    let [p, a] = SessionEvent::summary_turn(
        "the summary",
        CompactionSource::RecursiveSummarization,
        fx.clock.now(),
    );
    fx.append(&s.id, vec![p, a, user("real")]).await;
    let all = EventFilter::archive();
    assert_eq!(fx.texts(&s.id, &all).await.len(), 3);
    assert_eq!(
        fx.texts(&s.id, &all.clone().synthetic(SyntheticFilter::Exclude))
            .await,
        ["real"]
    );
    let only = fx
        .repo
        .events(&s.id, &all.synthetic(SyntheticFilter::Only))
        .await
        .unwrap();
    assert_eq!(
        texts(&only.items),
        [session_core::SUMMARY_PROMPT, "the summary"]
    );
    assert!(only
        .items
        .iter()
        .all(|e| e.compaction_source == Some(CompactionSource::RecursiveSummarization)));
}

/// Filters apply before paging: page 1 holds the 11th..20th matching event.
pub async fn events_filter_before_paging(fx: Fixture) {
    let s = fx.session("alice").await;
    let mut batch = Vec::new();
    for i in 1..=30 {
        batch.push(user(&format!("q{i}")));
        batch.push(assistant(&format!("a{i}")));
    }
    fx.append(&s.id, batch).await;
    let f = EventFilter::archive().roles([Role::User]).page(1, 10);
    let page = fx.repo.events(&s.id, &f).await.unwrap();
    let want: Vec<String> = (11..=20).map(|i| format!("q{i}")).collect();
    assert_eq!(texts(&page.items), want);
    assert!(page.has_more);
    let last = fx
        .repo
        .events(
            &s.id,
            &EventFilter::archive().roles([Role::User]).page(2, 10),
        )
        .await
        .unwrap();
    assert_eq!(last.items.len(), 10);
    assert!(!last.has_more);
    let default = fx
        .repo
        .events(&s.id, &EventFilter::archive())
        .await
        .unwrap();
    assert_eq!(default.items.len(), 10, "default page size is 10");
}

/// The keyword filter is a case-insensitive literal substring.
pub async fn events_keyword_filter_is_literal(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(
        &s.id,
        vec![user("Paris is 100% lovely"), user("parish"), user("London")],
    )
    .await;
    let f = EventFilter::archive().keyword("PARIS");
    assert_eq!(
        fx.texts(&s.id, &f).await,
        ["Paris is 100% lovely", "parish"]
    );
    let f = EventFilter::archive().keyword("100%");
    assert_eq!(fx.texts(&s.id, &f).await, ["Paris is 100% lovely"]);
    let f = EventFilter::archive().keyword("_");
    assert!(fx.texts(&s.id, &f).await.is_empty());
}

/// A blank keyword (empty, spaces, tabs, an ideographic space) is
/// `InvalidInput` on both views, as a blank search is, instead of matching
/// the spaces inside every text; a keyword with spaces around a word is
/// still a literal.
pub async fn events_blank_keyword_is_invalid_input_like_search(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, vec![user("Paris is   lovely"), user("parish")])
        .await;
    for blank in ["", " ", "   ", "\t\n", "\u{3000}"] {
        for filter in [EventFilter::archive(), EventFilter::context()] {
            let f = filter.keyword(blank);
            assert_eq!(
                kind(fx.repo.events(&s.id, &f).await),
                ErrorKind::InvalidInput,
                "keyword {blank:?} in {:?}",
                f.view
            );
        }
        assert_eq!(
            kind(
                fx.repo
                    .search(&session_core::SearchQuery::in_session(&s.id, blank))
                    .await
            ),
            ErrorKind::InvalidInput,
            "search {blank:?}"
        );
    }
    let f = EventFilter::archive().keyword(" is ");
    assert_eq!(fx.texts(&s.id, &f).await, ["Paris is   lovely"]);
}

/// Every field of an event survives storage exactly.
pub async fn events_round_trip_every_field(fx: Fixture) {
    let s = fx.session("alice").await;
    let t = Utc.with_ymd_and_hms(2026, 5, 4, 3, 2, 1).unwrap() + Duration::microseconds(123_456);
    let e = SessionEvent::builder(Message::User {
        content: session_core::Content::text("look").with_part(ContentPart::Json {
            json: json!({"nested": [1, 2, {"k": null}]}),
        }),
        name: Some("ada".into()),
    })
    .id("evt-1")
    .timestamp(t)
    .branch("orch.researcher")
    .invocation_id("inv-1")
    .author("researcher")
    .state("k", json!({"deep": true}))
    .metadata("model", "gpt-4o")
    .metadata("latencyMs", 230)
    .token_estimate(42)
    .build()
    .unwrap();
    let call = SessionEvent::new(Message::assistant_tool_calls(
        "",
        vec![ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{not json".into(),
        }],
    ));
    let syn = SessionEvent::builder(Message::assistant("s"))
        .synthetic(CompactionSource::Custom("mine".into()))
        .build()
        .unwrap();
    fx.append(&s.id, vec![e.clone(), call.clone(), syn.clone()])
        .await;
    let got = fx.archive(&s.id).await;
    let mut want = vec![e, call, syn];
    for (i, w) in want.iter_mut().enumerate() {
        w.seq = i as u64 + 1;
        w.session_id = s.id.to_string();
    }
    assert_eq!(got, want);
    let ctx = fx.context(&s.id).await;
    assert_eq!(ctx, want);
}

/// The typed event flags of agent frameworks (ADK's `partial`,
/// `turnComplete`, `errorCode`, `errorMessage`, `interrupted`,
/// `longRunningToolIds`) survive storage, in both views, and the export
/// file; an event without them reads back without them.
pub async fn events_round_trip_typed_flags(fx: Fixture) {
    let s = fx.session("alice").await;
    let flagged = SessionEvent::builder(Message::assistant_tool_calls(
        "working on it",
        vec![ToolCall::new("long-1", "render", &json!({}))],
    ))
    .partial(true)
    .turn_complete(false)
    .error("RATE_LIMIT", "the model was rate limited")
    .interrupted(true)
    .long_running_tool_ids(["long-1"])
    .build()
    .unwrap();
    let done = SessionEvent::builder(Message::assistant("done"))
        .partial(false)
        .turn_complete(true)
        .build()
        .unwrap();
    let plain = SessionEvent::new(Message::user("plain"));
    fx.append(&s.id, vec![flagged.clone(), done.clone(), plain.clone()])
        .await;
    let got = fx.archive(&s.id).await;
    assert_eq!(got[0].partial, Some(true));
    assert_eq!(got[0].turn_complete, Some(false));
    assert_eq!(got[0].error_code.as_deref(), Some("RATE_LIMIT"));
    assert_eq!(
        got[0].error_message.as_deref(),
        Some("the model was rate limited")
    );
    assert_eq!(got[0].interrupted, Some(true));
    assert_eq!(got[0].long_running_tool_ids, ["long-1"]);
    assert_eq!(
        (got[1].partial, got[1].turn_complete),
        (Some(false), Some(true))
    );
    assert_eq!(
        (got[2].partial, got[2].turn_complete, got[2].interrupted),
        (None, None, None)
    );
    assert!(got[2].error_code.is_none() && got[2].long_running_tool_ids.is_empty());
    let mut want = vec![flagged, done, plain];
    for (w, seq) in want.iter_mut().zip(1u64..) {
        w.seq = seq;
        w.session_id = s.id.to_string();
    }
    assert_eq!(got, want);
    assert_eq!(fx.context(&s.id).await, want);
    // Through the export file and back.
    let dump = fx.repo.export_session(&s.id).await.unwrap();
    let mut file = session_core::ExportWriter::new(Vec::new()).unwrap();
    file.write(&dump).unwrap();
    let bytes = file.finish().unwrap();
    let back: Vec<_> = session_core::ExportReader::new(bytes.as_slice())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(back[0].events, want);
}

/// Turn count counts only root-level, non-synthetic user messages.
pub async fn turn_count_counts_root_real_user_messages(fx: Fixture) {
    let s = fx.session("alice").await;
    let [p, a] = SessionEvent::summary_turn(
        "sum",
        CompactionSource::RecursiveSummarization,
        fx.clock.now(),
    );
    let sub = SessionEvent::builder(Message::user("sub-agent prompt"))
        .branch("orch.researcher")
        .build()
        .unwrap();
    fx.append(
        &s.id,
        vec![
            p,
            a,
            user("q1"),
            assistant("a1"),
            sub,
            user("q2"),
            assistant("a2"),
        ],
    )
    .await;
    assert_eq!(turn_count(&fx.context(&s.id).await), 2);
}
