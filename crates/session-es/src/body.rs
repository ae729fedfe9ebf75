//! Request bodies: mappings, documents and queries, as plain JSON built by
//! pure functions (unit-tested without a server).

use serde_json::{json, Value};
use session_core::{
    fold_case, visible_branches, EventFilter, SessionError, SessionEvent, SessionQuery,
    SyntheticFilter,
};

use crate::engine::TextField;

/// Micros since the epoch (the stored time unit: exact, sortable, no date parsing).
pub(crate) fn micros(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp_micros()
}

/// The settings and mapping of the sessions index: one head document per
/// session; only the fields `list` and `purge_expired` filter on are indexed.
pub(crate) fn sessions_mapping() -> Value {
    json!({
        "settings": {"number_of_shards": 1},
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "sid": {"type": "keyword"},
                "app": {"type": "keyword"},
                "user_id": {"type": "keyword"},
                "key": {"type": "keyword"},
                "status": {"type": "keyword"},
                "inc": {"type": "keyword"},
                "updated_us": {"type": "long"},
                "expires_us": {"type": "long"},
                "head": {"type": "object", "enabled": false}
            }
        }
    })
}

/// The settings and mapping of the events index: one document per event.
/// `text_lc` (the case-folded search text, a `wildcard` field, or a
/// `keyword` one where the engine lacks that type: see [`TextField`])
/// serves the literal search, `text` (analyzed) the ranked one; the event
/// itself is kept unindexed in `body`, metadata and state never reach the
/// mapping.
pub(crate) fn events_mapping(text_field: TextField) -> Value {
    json!({
        "settings": {"number_of_shards": 1},
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "session_id": {"type": "keyword"},
                "inc": {"type": "keyword"},
                "seq": {"type": "long"},
                "event_id": {"type": "keyword"},
                "app": {"type": "keyword"},
                "user_id": {"type": "keyword"},
                "ts_us": {"type": "long"},
                "role": {"type": "keyword"},
                "synthetic": {"type": "boolean"},
                "branch": {"type": "keyword"},
                "invocation_id": {"type": "keyword"},
                "tokens": {"type": "long"},
                "has_delta": {"type": "boolean"},
                "text_lc": {"type": text_field.mapping_type()},
                "text": {"type": "text"},
                "delta": {"type": "object", "enabled": false},
                "body": {"type": "object", "enabled": false}
            }
        }
    })
}

/// The settings and mapping of the shared-state index (`app:` and `user:` scopes).
pub(crate) fn state_mapping() -> Value {
    json!({
        "settings": {"number_of_shards": 1},
        "mappings": {
            "dynamic": "strict",
            "properties": {"json": {"type": "object", "enabled": false}}
        }
    })
}

/// A composable index template applying `index` (settings and mappings) to `pattern`.
pub(crate) fn index_template(pattern: &str, index: &Value) -> Value {
    json!({
        "index_patterns": [pattern],
        "priority": 200,
        "template": index,
        "_meta": {"created_by": "agent-session"}
    })
}

/// The owner and incarnation an event document carries besides the event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DocOwner<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) inc: &'a str,
    pub(crate) app: &'a str,
    pub(crate) user_id: &'a str,
}

/// The document id of an event: session, incarnation and seq (`|` never occurs in ids).
pub(crate) fn event_doc_id(session_id: &str, inc: &str, seq: u64) -> String {
    format!("{session_id}|{inc}|{seq}")
}

/// The document of one event; `body` is its stored JSON encoding,
/// `text_field` the type of the events index's `text_lc`.
pub(crate) fn event_doc(
    owner: DocOwner<'_>,
    seq: u64,
    e: &SessionEvent,
    body: &str,
    text_field: TextField,
) -> session_core::Result<Value> {
    let text = e.message.search_text();
    let delta = match &e.state_delta {
        Some(d) => Value::String(
            serde_json::to_string(d)
                .map_err(|err| session_core::SessionError::serialization("state delta", err))?,
        ),
        None => Value::Null,
    };
    let mut doc = json!({
        "session_id": owner.session_id,
        "inc": owner.inc,
        "seq": seq,
        "event_id": e.id,
        "app": owner.app,
        "user_id": owner.user_id,
        "ts_us": micros(e.timestamp),
        "role": e.role().as_str(),
        "synthetic": e.is_synthetic(),
        "tokens": e.token_estimate,
        "has_delta": e.state_delta.is_some(),
        "text_lc": text_field.value(&fold_case(&text)),
        "text": text,
        "body": body,
    });
    if let Some(map) = doc.as_object_mut() {
        if let Some(b) = &e.branch {
            map.insert("branch".into(), json!(b));
        }
        if let Some(i) = &e.invocation_id {
            map.insert("invocation_id".into(), json!(i));
        }
        if !delta.is_null() {
            map.insert("delta".into(), delta);
        }
    }
    Ok(doc)
}

/// Escapes a literal for a `wildcard` query: `*`, `?` and `\` lose their meaning.
pub(crate) fn escape_wildcard(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    for c in text.chars() {
        if matches!(c, '*' | '?' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A literal substring query on the folded search text (the text folded
/// here too), and whether it matches exactly the events holding `text`
/// (otherwise a superset: see [`TextField::needle`]).
pub(crate) fn literal_text(text: &str, text_field: TextField) -> (Value, bool) {
    let folded = fold_case(text);
    let (needle, exact) = text_field.needle(&folded);
    (
        json!({"wildcard": {"text_lc": {"value": format!("*{}*", escape_wildcard(needle))}}}),
        exact,
    )
}

/// [`literal_text`] for search, whose hits are checked with the reference
/// matcher afterwards: a backslash is looked for as `?` (any one
/// character), since OpenSearch's `wildcard` field mishandles an escaped
/// backslash (opensearch-project/OpenSearch#19719, still so in 2.19.1), so
/// a term holding one gives a superset, marked not exact.
pub(crate) fn search_literal(text: &str, text_field: TextField) -> (Value, bool) {
    let folded = fold_case(text);
    let (needle, _) = text_field.needle(&folded);
    if !needle.contains('\\') {
        return literal_text(text, text_field);
    }
    let mut pattern = String::with_capacity(needle.len().saturating_add(2));
    pattern.push('*');
    for c in needle.chars() {
        match c {
            '\\' => pattern.push('?'),
            '*' | '?' => {
                pattern.push('\\');
                pattern.push(c);
            }
            _ => pattern.push(c),
        }
    }
    pattern.push('*');
    (json!({"wildcard": {"text_lc": {"value": pattern}}}), false)
}

/// The most terms one `terms` query of the backend holds: the default
/// `index.max_terms_count` of Elasticsearch and OpenSearch.
pub(crate) const MAX_TERMS: usize = 65_536;

/// The largest value of a `long` field (`i64::MAX`).
pub(crate) const MAX_LONG: u64 = 9_223_372_036_854_775_807;

/// The most rewound ranges one query leaves out. A cluster refuses a query
/// of more than 1,024 leaf clauses (`indices.query.bool.max_clause_count`);
/// this leaves room for the filter's own clauses.
pub(crate) const DEAD_RANGES_PER_QUERY: usize = 512;

/// `ranges` sorted, with overlapping and adjacent ones merged.
pub(crate) fn merge_ranges(ranges: &[[u64; 2]]) -> Vec<[u64; 2]> {
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<[u64; 2]> = Vec::with_capacity(sorted.len());
    for [a, b] in sorted {
        match out.last_mut() {
            Some(last) if a <= last[1].saturating_add(1) => last[1] = last[1].max(b),
            _ => out.push([a, b]),
        }
    }
    out
}

/// The filter and must-not clauses of one incarnation of one session, seqs
/// in `(after, up_to]`, rewound ranges out: one query per
/// [`DEAD_RANGES_PER_QUERY`] rewound ranges in the window, their seq
/// windows consecutive, so that reading them in order reads the window in
/// order. At least one.
pub(crate) fn session_events(
    session_id: &str,
    inc: &str,
    after: u64,
    up_to: u64,
    dead: &[[u64; 2]],
) -> Vec<(Vec<Value>, Vec<Value>)> {
    // `seq` is a `long`: an engine refuses a bound above `i64::MAX` (a
    // cursor past every event, say), and no seq is that high.
    let long = |v: u64| v.min(MAX_LONG);
    let segment = |lo: u64, hi: u64, dead: &[[u64; 2]]| {
        let filter = vec![
            json!({"term": {"session_id": session_id}}),
            json!({"term": {"inc": inc}}),
            json!({"range": {"seq": {"gt": long(lo), "lte": long(hi)}}}),
        ];
        let must_not = dead
            .iter()
            .map(|[a, b]| json!({"range": {"seq": {"gte": long(*a), "lte": long(*b)}}}))
            .collect();
        (filter, must_not)
    };
    let ranges: Vec<[u64; 2]> = merge_ranges(dead)
        .into_iter()
        .filter(|[a, b]| *b > after && *a <= up_to)
        .collect();
    let groups: Vec<&[[u64; 2]]> = ranges.chunks(DEAD_RANGES_PER_QUERY).collect();
    let mut out = Vec::with_capacity(groups.len().max(1));
    let mut lo = after;
    for (i, group) in groups.iter().enumerate() {
        let hi = match group.last() {
            Some([_, b]) if i.saturating_add(1) < groups.len() => (*b).min(up_to),
            _ => up_to,
        };
        out.push(segment(lo, hi, group));
        lo = hi;
    }
    if out.is_empty() {
        out.push(segment(after, up_to, &[]));
    }
    out
}

/// The per-event criteria of an [`EventFilter`] (branch, time, roles,
/// synthetic, invocation, keyword) as filter clauses. A keyword longer than
/// a `keyword` text field answers exactly ([`TextField::EXACT_CHARS`]) is
/// refused: the view's counts and pages come from the engine.
pub(crate) fn filter_clauses(
    f: &EventFilter,
    text_field: TextField,
) -> session_core::Result<Vec<Value>> {
    let mut out = Vec::new();
    if let Some(viewer) = &f.branch {
        out.push(json!({"bool": {
            "should": [
                {"bool": {"must_not": {"exists": {"field": "branch"}}}},
                {"terms": {"branch": visible_branches(viewer)}}
            ],
            "minimum_should_match": 1
        }}));
    }
    if f.from.is_some() || f.to.is_some() {
        let mut range = serde_json::Map::new();
        if let Some(t) = f.from {
            range.insert("gte".into(), json!(micros(t)));
        }
        if let Some(t) = f.to {
            range.insert("lt".into(), json!(micros(t)));
        }
        out.push(json!({"range": {"ts_us": range}}));
    }
    if !f.roles.is_empty() {
        let roles: Vec<&str> = f.roles.iter().map(|r| r.as_str()).collect();
        out.push(json!({"terms": {"role": roles}}));
    }
    match f.synthetic {
        SyntheticFilter::Include => {}
        SyntheticFilter::Exclude => out.push(json!({"term": {"synthetic": false}})),
        SyntheticFilter::Only => out.push(json!({"term": {"synthetic": true}})),
    }
    if let Some(i) = &f.invocation_id {
        out.push(json!({"term": {"invocation_id": i}}));
    }
    if let Some(k) = &f.keyword {
        let (clause, exact) = literal_text(k, text_field);
        if !exact {
            return Err(SessionError::Unsupported {
                backend: crate::error::BACKEND,
                operation: "a keyword filter longer than 4,001 characters on an events index \
                            whose text field is a keyword (no wildcard field type)",
            });
        }
        out.push(clause);
    }
    Ok(out)
}

/// A `bool` query of filter and must-not clauses.
#[allow(clippy::needless_pass_by_value)] // built for this call and consumed by `json!`
pub(crate) fn bool_query(filter: Vec<Value>, must_not: Vec<Value>) -> Value {
    json!({"bool": {"filter": filter, "must_not": must_not}})
}

/// The query of `list`: owner, key, status, activity window, not expired at `now_us`.
pub(crate) fn sessions_query(q: &SessionQuery, now_us: i64) -> Value {
    let mut filter = vec![json!({"bool": {
        "should": [
            {"bool": {"must_not": {"exists": {"field": "expires_us"}}}},
            {"range": {"expires_us": {"gt": now_us}}}
        ],
        "minimum_should_match": 1
    }})];
    if let Some(a) = &q.app {
        filter.push(json!({"term": {"app": a}}));
    }
    if let Some(u) = &q.user_id {
        filter.push(json!({"term": {"user_id": u}}));
    }
    if let Some(k) = &q.key {
        filter.push(json!({"term": {"key": k}}));
    }
    if let Some(s) = q.status {
        filter.push(json!({"term": {"status": s.as_str()}}));
    }
    if q.active_from.is_some() || q.active_to.is_some() {
        let mut range = serde_json::Map::new();
        if let Some(t) = q.active_from {
            range.insert("gte".into(), json!(micros(t)));
        }
        if let Some(t) = q.active_to {
            range.insert("lt".into(), json!(micros(t)));
        }
        filter.push(json!({"range": {"updated_us": range}}));
    }
    bool_query(filter, Vec::new())
}

/// One `_search` request: a query, a sort with a unique tiebreaker, a page
/// size, where the previous page ended, and which source fields to return.
pub(crate) fn search_request(
    query: &Value,
    sort: &Value,
    size: usize,
    after: Option<&Value>,
    source: &Value,
) -> Value {
    let mut req = json!({
        "query": query,
        "sort": sort,
        "size": size,
        "track_total_hits": false,
        "_source": source,
    });
    if let (Some(a), Some(map)) = (after, req.as_object_mut()) {
        map.insert("search_after".into(), a.clone());
    }
    req
}

/// Appends one bulk action line and its document to an NDJSON body.
pub(crate) fn bulk_line(
    out: &mut String,
    action: &str,
    index: &str,
    id: &str,
    doc: Option<&Value>,
) {
    out.push_str(&json!({ action: {"_index": index, "_id": id} }).to_string());
    out.push('\n');
    if let Some(d) = doc {
        out.push_str(&d.to_string());
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_core::{Message, Role};

    #[test]
    fn wildcard_escaping_keeps_every_character_literal() {
        assert_eq!(escape_wildcard(r"a*b?c\d"), r"a\*b\?c\\d");
        assert_eq!(escape_wildcard("100%_[x]\"'"), "100%_[x]\"'");
        let (q, exact) = literal_text("Hello*World", TextField::Wildcard);
        assert!(exact);
        assert_eq!(q["wildcard"]["text_lc"]["value"], r"*hello\*world*");
        let (q, exact) = literal_text("Hello*World", TextField::Keyword);
        assert!(exact);
        assert_eq!(q["wildcard"]["text_lc"]["value"], r"*hello\*world*");
    }

    #[test]
    fn event_documents_carry_filter_fields_and_the_stored_body() {
        let e = SessionEvent::builder(Message::user("Where is Paris?"))
            .id("e1")
            .branch("orch.r")
            .invocation_id("inv-1")
            .state("user:lang", "fr")
            .token_estimate(7)
            .build()
            .unwrap();
        let owner = DocOwner {
            session_id: "s1",
            inc: "abc",
            app: "app",
            user_id: "alice",
        };
        let doc = event_doc(owner, 3, &e, "{\"x\":1}", TextField::Wildcard).unwrap();
        assert_eq!(doc["seq"], 3);
        assert_eq!(doc["event_id"], "e1");
        assert_eq!(doc["role"], "user");
        assert_eq!(doc["branch"], "orch.r");
        assert_eq!(doc["invocation_id"], "inv-1");
        assert_eq!(doc["tokens"], 7);
        assert_eq!(doc["text_lc"], "where is paris?");
        assert_eq!(doc["text"], "Where is Paris?");
        assert_eq!(doc["has_delta"], true);
        assert_eq!(doc["delta"], "{\"user:lang\":\"fr\"}");
        assert_eq!(doc["body"], "{\"x\":1}");
        assert_eq!(event_doc_id("s1", "abc", 3), "s1|abc|3");
        let plain = SessionEvent::new(Message::assistant("ok"));
        let doc = event_doc(owner, 4, &plain, "{}", TextField::Keyword).unwrap();
        assert!(doc.get("branch").is_none() && doc.get("delta").is_none());
    }

    #[test]
    fn filter_clauses_cover_every_criterion() {
        let t = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let f = EventFilter::archive()
            .branch("a.b")
            .between(Some(t), Some(t + chrono::Duration::seconds(1)))
            .roles([Role::User, Role::Tool])
            .synthetic(SyntheticFilter::Exclude)
            .invocation("inv")
            .keyword("50%");
        let c = filter_clauses(&f, TextField::Wildcard).unwrap();
        assert_eq!(c.len(), 6);
        assert_eq!(
            c[0]["bool"]["should"][1]["terms"]["branch"],
            json!(["a", "a.b"])
        );
        assert_eq!(c[1]["range"]["ts_us"]["gte"], 1_700_000_000_000_000_i64);
        assert_eq!(c[1]["range"]["ts_us"]["lt"], 1_700_000_001_000_000_i64);
        assert_eq!(c[2]["terms"]["role"], json!(["user", "tool"]));
        assert_eq!(c[3]["term"]["synthetic"], false);
        assert_eq!(c[4]["term"]["invocation_id"], "inv");
        assert_eq!(c[5]["wildcard"]["text_lc"]["value"], "*50%*");
        assert!(filter_clauses(&EventFilter::context(), TextField::Keyword)
            .unwrap()
            .is_empty());
        let long = EventFilter::archive().keyword("x".repeat(TextField::EXACT_CHARS + 1));
        assert!(filter_clauses(&long, TextField::Wildcard).is_ok());
        assert!(filter_clauses(&long, TextField::Keyword).is_err());
    }

    #[test]
    fn session_events_leave_out_rewound_ranges() {
        let queries = session_events("s", "i", 2, 9, &[[7, 7], [4, 5], [12, 13]]);
        assert_eq!(queries.len(), 1);
        let (filter, must_not) = &queries[0];
        assert_eq!(filter[2]["range"]["seq"], json!({"gt": 2, "lte": 9}));
        assert_eq!(must_not.len(), 2, "only the ranges inside the window");
        assert_eq!(must_not[0]["range"]["seq"], json!({"gte": 4, "lte": 5}));
        assert_eq!(must_not[1]["range"]["seq"], json!({"gte": 7, "lte": 7}));
    }

    #[test]
    fn rewound_ranges_merge_when_they_touch_or_overlap() {
        assert_eq!(
            merge_ranges(&[[9, 12], [3, 4], [5, 6], [10, 20], [30, 30]]),
            vec![[3, 6], [9, 20], [30, 30]]
        );
    }

    #[test]
    fn many_rewound_ranges_split_the_window_into_consecutive_queries() {
        let dead: Vec<[u64; 2]> = (1..=1_100u64).map(|k| [2 * k, 2 * k]).collect();
        let queries = session_events("s", "i", 0, 2_201, &dead);
        assert_eq!(queries.len(), 3);
        let windows: Vec<Value> = queries
            .iter()
            .map(|(f, _)| f[2]["range"]["seq"].clone())
            .collect();
        assert_eq!(
            windows,
            [
                json!({"gt": 0, "lte": 1_024}),
                json!({"gt": 1_024, "lte": 2_048}),
                json!({"gt": 2_048, "lte": 2_201})
            ]
        );
        for (filter, must_not) in &queries {
            assert!(filter.len() + must_not.len() <= 1_024);
        }
        assert_eq!(queries.iter().map(|(_, m)| m.len()).sum::<usize>(), 1_100);
    }

    #[test]
    fn list_query_hides_expired_sessions_and_filters_owner() {
        let q = SessionQuery::new().app("a").user("u").key("k");
        let body = sessions_query(&q, 42);
        let filter = body["bool"]["filter"].as_array().unwrap();
        assert_eq!(
            filter[0]["bool"]["should"][1]["range"]["expires_us"]["gt"],
            42
        );
        assert_eq!(filter[1]["term"]["app"], "a");
        assert_eq!(filter[2]["term"]["user_id"], "u");
        assert_eq!(filter[3]["term"]["key"], "k");
    }

    #[test]
    fn search_requests_page_with_search_after() {
        let q = json!({"match_all": {}});
        let sort = json!([{"seq": "asc"}]);
        let r = search_request(&q, &sort, 100, Some(&json!([17])), &json!(["seq"]));
        assert_eq!(r["search_after"], json!([17]));
        assert_eq!(r["size"], 100);
        assert!(r.get("from").is_none());
        let r = search_request(&q, &sort, 100, None, &json!(false));
        assert!(r.get("search_after").is_none());
    }

    #[test]
    fn search_looks_for_a_backslash_as_any_character() {
        let (q, exact) = search_literal("C:\\Path*", TextField::Wildcard);
        assert!(!exact);
        assert_eq!(q["wildcard"]["text_lc"]["value"], r"*c:?path\**");
        let (q, exact) = search_literal("plain", TextField::Wildcard);
        assert!(exact);
        assert_eq!(q["wildcard"]["text_lc"]["value"], "*plain*");
    }

    #[test]
    fn seq_bounds_fit_a_long() {
        let q = session_events(
            "s",
            "i",
            u64::MAX - 5,
            u64::MAX,
            &[[u64::MAX - 1, u64::MAX]],
        );
        let (filter, must_not) = &q[0];
        assert_eq!(filter[2]["range"]["seq"]["gt"], json!(i64::MAX));
        assert_eq!(must_not[0]["range"]["seq"]["lte"], json!(i64::MAX));
        assert_eq!(MAX_LONG, u64::try_from(i64::MAX).unwrap());
    }

    #[test]
    fn bulk_lines_are_ndjson() {
        let mut s = String::new();
        bulk_line(
            &mut s,
            "create",
            "p-events",
            "s|i|1",
            Some(&json!({"a": 1})),
        );
        bulk_line(&mut s, "delete", "p-events", "s|i|2", None);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 3);
        let action: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(action["create"]["_id"], "s|i|1");
        assert!(s.ends_with('\n'));
    }

    /// Every field an event document can carry (all optional ones set) is in
    /// the events mapping: a strict mapping would refuse the document.
    #[test]
    fn every_event_document_field_is_mapped() {
        let e = SessionEvent::builder(session_core::Message::user("hi"))
            .branch("a.b")
            .invocation_id("inv")
            .state("k", 1)
            .build()
            .unwrap();
        let owner = DocOwner {
            session_id: "s",
            inc: "i",
            app: "a",
            user_id: "u",
        };
        let doc = event_doc(owner, 1, &e, "{}", TextField::Wildcard).unwrap();
        let mapping = events_mapping(TextField::Wildcard);
        let props = mapping["mappings"]["properties"].as_object().unwrap();
        for key in doc.as_object().unwrap().keys() {
            assert!(
                props.contains_key(key),
                "{key} is not in the events mapping"
            );
        }
        assert!(doc.get("branch").is_some() && doc.get("delta").is_some());
    }

    #[test]
    fn mappings_are_strict_and_keep_user_data_unindexed() {
        for m in [
            sessions_mapping(),
            events_mapping(TextField::Wildcard),
            events_mapping(TextField::Keyword),
            state_mapping(),
        ] {
            assert_eq!(m["mappings"]["dynamic"], "strict");
        }
        assert_eq!(
            events_mapping(TextField::Wildcard)["mappings"]["properties"]["body"]["enabled"],
            false
        );
        assert_eq!(
            events_mapping(TextField::Wildcard)["mappings"]["properties"]["text_lc"]["type"],
            "wildcard"
        );
        assert_eq!(
            events_mapping(TextField::Keyword)["mappings"]["properties"]["text_lc"]["type"],
            "keyword"
        );
        assert_eq!(
            sessions_mapping()["mappings"]["properties"]["head"]["enabled"],
            false
        );
        let t = index_template("p-events", &events_mapping(TextField::Wildcard));
        assert_eq!(t["index_patterns"], json!(["p-events"]));
        assert_eq!(t["template"]["mappings"]["dynamic"], "strict");
    }
}
