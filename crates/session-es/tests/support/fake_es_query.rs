//! The query DSL subset of the fake node (`bool`, `term`, `terms`, `range`,
//! `exists`, `wildcard`, `match`), sorting and `search_after` paging.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use super::{error, index_missing, Answer, Doc, State};

fn field<'a>(source: &'a Value, name: &str) -> Option<&'a Value> {
    source.get(name).filter(|v| !v.is_null())
}

fn cmp_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => x
                .as_f64()
                .unwrap_or(0.0)
                .total_cmp(&y.as_f64().unwrap_or(0.0)),
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        _ => Ordering::Equal,
    }
}

fn eq_values(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => cmp_values(a, b) == Ordering::Equal,
        (Value::Bool(x), Value::String(y)) | (Value::String(y), Value::Bool(x)) => {
            x.to_string() == *y
        }
        _ => a == b,
    }
}

/// Matches an ES wildcard pattern (`*`, `?`, `\` escapes) against `text`.
fn wildcard(pattern: &str, text: &str) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Tok {
        Any,
        One,
        Lit(char),
    }
    let mut toks = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        toks.push(match c {
            '*' => Tok::Any,
            '?' => Tok::One,
            '\\' => Tok::Lit(chars.next().unwrap_or('\\')),
            c => Tok::Lit(c),
        });
    }
    let text: Vec<char> = text.chars().collect();
    // Classic DP over (token, char) with a rolling row.
    let mut row = vec![false; text.len() + 1];
    row[0] = true;
    for t in &toks {
        let mut next = vec![false; text.len() + 1];
        match t {
            Tok::Any => {
                let mut seen = false;
                for j in 0..=text.len() {
                    seen |= row[j];
                    next[j] = seen;
                }
            }
            Tok::One => {
                next[1..].copy_from_slice(&row[..text.len()]);
            }
            Tok::Lit(c) => {
                for j in 1..=text.len() {
                    next[j] = row[j - 1] && text[j - 1] == *c;
                }
            }
        }
        row = next;
    }
    row[text.len()]
}

fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The most terms one `terms` query may hold (`index.max_terms_count`).
pub(super) const MAX_TERMS_COUNT: usize = 65_536;
/// The most leaf queries one query may hold, nested `bool`s included
/// (`indices.query.bool.max_clause_count`, Lucene's `maxClauseCount`).
pub(super) const MAX_CLAUSE_COUNT: usize = 1_024;

/// How an index's mapping holds a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mapped {
    /// Indexed: queries can match it.
    Indexed,
    /// Mapped with `index: false`: a query on it is refused.
    NotIndexed,
    /// Not in the mapping (or inside an `enabled: false` object): a query on it matches nothing.
    Unmapped,
}

/// How `mappings` holds the (dotted) field `name`; no mappings: dynamic, everything indexed.
fn mapped(mappings: Option<&Value>, name: &str) -> Mapped {
    let Some(mut props) = mappings.and_then(|m| m.get("properties")) else {
        return Mapped::Indexed;
    };
    let mut parts = name.split('.').peekable();
    while let Some(part) = parts.next() {
        let Some(m) = props.get(part) else {
            return Mapped::Unmapped;
        };
        if m.get("enabled") == Some(&Value::Bool(false)) {
            return Mapped::Unmapped;
        }
        if parts.peek().is_none() {
            return if m.get("index") == Some(&Value::Bool(false)) {
                Mapped::NotIndexed
            } else if m.get("properties").is_some() && m.get("type").is_none() {
                Mapped::Unmapped // an object itself holds no terms
            } else {
                Mapped::Indexed
            };
        }
        match m.get("properties") {
            Some(p) => props = p,
            None => return Mapped::Unmapped,
        }
    }
    Mapped::Unmapped
}

/// A refusal of a query, as the node answers it.
type Refusal = (u16, Value);

/// A query checked against the index's mapping and the cluster's limits,
/// prepared for matching many documents: each `terms` list of strings
/// becomes a set, keyed by where the list sits in the query; fields the
/// mapping does not index match nothing.
pub(super) struct Prepared<'q> {
    root: &'q Value,
    sets: Sets,
    /// The fields the query names that the mapping does not hold.
    unmapped: HashSet<String>,
}

type Sets = HashMap<*const Value, HashSet<String>>;

/// The field a leaf query names (`exists` names it in `field`).
fn leaf_field<'a>(kind: &str, body: &'a Value) -> Option<&'a str> {
    if kind == "exists" {
        return body.get("field").and_then(Value::as_str);
    }
    body.as_object()?.keys().next().map(String::as_str)
}

impl<'q> Prepared<'q> {
    /// Checks `root` as a node would before running it: at most
    /// [`MAX_CLAUSE_COUNT`] leaf queries, at most [`MAX_TERMS_COUNT`] terms
    /// in one `terms`, no query on a field mapped `index: false`.
    pub(super) fn new(root: &'q Value, mappings: Option<&Value>) -> Result<Self, Refusal> {
        let mut p = Self {
            root,
            sets: HashMap::new(),
            unmapped: HashSet::new(),
        };
        let mut leaves = 0usize;
        p.check(root, mappings, &mut leaves)?;
        Ok(p)
    }

    fn check(
        &mut self,
        q: &Value,
        mappings: Option<&Value>,
        leaves: &mut usize,
    ) -> Result<(), Refusal> {
        let Some((kind, body)) = q.as_object().and_then(|m| m.iter().next()) else {
            return Ok(());
        };
        if kind == "bool" {
            for occur in ["filter", "must", "should", "must_not"] {
                match body.get(occur) {
                    Some(Value::Array(a)) => {
                        for c in a {
                            self.check(c, mappings, leaves)?;
                        }
                    }
                    Some(c @ Value::Object(_)) => self.check(c, mappings, leaves)?,
                    _ => {}
                }
            }
            return Ok(());
        }
        *leaves += 1;
        if *leaves > MAX_CLAUSE_COUNT {
            return Err(error(
                400,
                "too_many_nested_clauses",
                &format!("Query contains too many nested clauses; maxClauseCount is set to {MAX_CLAUSE_COUNT}"),
            ));
        }
        if kind == "match_all" {
            return Ok(());
        }
        if let Some(f) = leaf_field(kind, body) {
            match mapped(mappings, f) {
                Mapped::Indexed => {}
                Mapped::NotIndexed => {
                    return Err(error(
                        400,
                        "query_shard_exception",
                        &format!("failed to create query: Cannot search on field [{f}] since it is not indexed."),
                    ))
                }
                Mapped::Unmapped => {
                    self.unmapped.insert(f.to_owned());
                }
            }
        }
        if kind == "terms" {
            for list in body.as_object().into_iter().flat_map(|t| t.values()) {
                let Some(a) = list.as_array() else { continue };
                if a.len() > MAX_TERMS_COUNT {
                    return Err(error(
                        400,
                        "illegal_argument_exception",
                        &format!(
                            "The number of terms [{}] used in the Terms Query request has exceeded the allowed maximum of [{MAX_TERMS_COUNT}]. This maximum can be set by changing the [index.max_terms_count] index level setting.",
                            a.len()
                        ),
                    ));
                }
                if a.iter().all(Value::is_string) {
                    let set = a.iter().filter_map(Value::as_str).map(str::to_owned);
                    self.sets.insert(std::ptr::from_ref(list), set.collect());
                }
            }
        }
        Ok(())
    }

    pub(super) fn score(&self, source: &Value) -> Option<f64> {
        self.score_of(self.root, source)
    }

    /// The value of a field a query names: none where the mapping does not index it.
    fn field<'a>(&self, source: &'a Value, name: &str) -> Option<&'a Value> {
        if self.unmapped.contains(name) {
            return None;
        }
        field(source, name)
    }

    /// `Some(score)` if `source` matches `q`.
    fn score_of(&self, q: &Value, source: &Value) -> Option<f64> {
        let (kind, body) = q.as_object()?.iter().next()?;
        match kind.as_str() {
            "match_all" => Some(1.0),
            "bool" => {
                let list = |k: &str| -> &[Value] {
                    match body.get(k) {
                        Some(Value::Array(a)) => a.as_slice(),
                        Some(v @ Value::Object(_)) => std::slice::from_ref(v),
                        _ => &[],
                    }
                };
                let mut total = 0.0;
                for c in list("filter") {
                    self.score_of(c, source)?;
                }
                for c in list("must") {
                    total += self.score_of(c, source)?;
                }
                for c in list("must_not") {
                    if self.score_of(c, source).is_some() {
                        return None;
                    }
                }
                let should = list("should");
                if !should.is_empty() {
                    let matched: Vec<f64> = should
                        .iter()
                        .filter_map(|c| self.score_of(c, source))
                        .collect();
                    let min = body
                        .get("minimum_should_match")
                        .and_then(Value::as_u64)
                        .unwrap_or(u64::from(
                            list("must").is_empty() && list("filter").is_empty(),
                        ));
                    if (matched.len() as u64) < min {
                        return None;
                    }
                    total += matched.iter().sum::<f64>();
                }
                Some(total)
            }
            "term" => {
                let (f, v) = body.as_object()?.iter().next()?;
                let v = v.get("value").unwrap_or(v);
                eq_values(self.field(source, f)?, v).then_some(1.0)
            }
            "terms" => {
                let (f, vs) = body.as_object()?.iter().next()?;
                let have = self.field(source, f)?;
                if let (Some(set), Some(have)) =
                    (self.sets.get(&std::ptr::from_ref(vs)), have.as_str())
                {
                    return set.contains(have).then_some(1.0);
                }
                vs.as_array()?
                    .iter()
                    .any(|v| eq_values(have, v))
                    .then_some(1.0)
            }
            "range" => {
                let (f, r) = body.as_object()?.iter().next()?;
                let have = self.field(source, f)?;
                for (op, v) in r.as_object()? {
                    let o = cmp_values(have, v);
                    let ok = match op.as_str() {
                        "gt" => o == Ordering::Greater,
                        "gte" => o != Ordering::Less,
                        "lt" => o == Ordering::Less,
                        "lte" => o != Ordering::Greater,
                        _ => true,
                    };
                    if !ok {
                        return None;
                    }
                }
                Some(1.0)
            }
            "exists" => self
                .field(source, body.get("field")?.as_str()?)
                .map(|_| 1.0),
            "wildcard" => {
                let (f, v) = body.as_object()?.iter().next()?;
                let pattern = v.get("value").unwrap_or(v).as_str()?;
                // A field holding an array matches when one of its values does.
                let have = self.field(source, f)?;
                let values = match have.as_array() {
                    Some(a) => a.iter().filter_map(Value::as_str).collect(),
                    None => vec![have.as_str()?],
                };
                values.iter().any(|v| wildcard(pattern, v)).then_some(1.0)
            }
            "match" => {
                let (f, v) = body.as_object()?.iter().next()?;
                let text = v.get("query").unwrap_or(v).as_str()?;
                // Lucene's classic shape: term frequency, damped by field length.
                let have = tokens(self.field(source, f)?.as_str()?);
                let wanted: HashSet<String> = tokens(text).into_iter().collect();
                let tf = have.iter().filter(|t| wanted.contains(*t)).count();
                (tf > 0).then(|| tf as f64 / (have.len().max(1) as f64).sqrt())
            }
            other => panic!("fake Elasticsearch: unsupported query {other}"),
        }
    }
}

fn sort_key(sort: &[(String, bool)], id: &str, source: &Value, score: f64) -> Vec<Value> {
    sort.iter()
        .map(|(f, _)| match f.as_str() {
            "_score" => json!(score),
            "_id" => json!(id),
            f => field(source, f).cloned().unwrap_or(Value::Null),
        })
        .collect()
}

fn cmp_keys(sort: &[(String, bool)], a: &[Value], b: &[Value]) -> Ordering {
    for ((_, desc), (x, y)) in sort.iter().zip(a.iter().zip(b)) {
        let o = match (x.is_null(), y.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater, // missing values sort last
            (false, true) => Ordering::Less,
            _ if *desc => cmp_values(y, x),
            _ => cmp_values(x, y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// `POST {index}/_count`: the searchable documents matching the query. `Err`: refused.
pub(super) fn count(st: &State, index: &str, body: &str) -> Result<Answer, Answer> {
    let req: Value = serde_json::from_str(body).unwrap_or(json!({}));
    let Some(i) = st.indices.get(index) else {
        return Err(index_missing(index));
    };
    let q = req
        .get("query")
        .cloned()
        .unwrap_or(json!({"match_all": {}}));
    let prepared = Prepared::new(&q, i.mappings.as_ref())?;
    let n = i
        .candidates(&q)
        .into_iter()
        .filter(|(_, d)| prepared.score(&d.source).is_some())
        .count();
    Ok((
        200,
        json!({"count": n, "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0}}),
    ))
}

/// `POST {index}/_delete_by_query`: deletes the searchable documents
/// matching the query. `Err`: refused.
pub(super) fn delete_by_query(st: &mut State, index: &str, body: &str) -> Result<Answer, Answer> {
    let req: Value = serde_json::from_str(body).unwrap_or(json!({}));
    let Some(i) = st.indices.get_mut(index) else {
        return Err(index_missing(index));
    };
    let q = req
        .get("query")
        .cloned()
        .unwrap_or(json!({"match_all": {}}));
    let prepared = Prepared::new(&q, i.mappings.as_ref())?;
    let doomed: Vec<String> = i
        .candidates(&q)
        .into_iter()
        .filter(|(_, d)| prepared.score(&d.source).is_some())
        .map(|(id, _)| id.clone())
        .collect();
    for id in &doomed {
        i.remove(id);
    }
    let deleted = doomed.len();
    Ok((
        200,
        json!({"took": 1, "timed_out": false, "total": deleted, "deleted": deleted, "batches": 1,
        "version_conflicts": 0, "noops": 0, "retries": {"bulk": 0, "search": 0},
        "throttled_millis": 0, "requests_per_second": -1.0, "throttled_until_millis": 0, "failures": []}),
    ))
}

pub(super) fn search(st: &State, index: &str, req: &Value) -> (u16, Value) {
    let Some(i) = st.indices.get(index) else {
        return index_missing(index);
    };
    if req.get("from").and_then(Value::as_u64).unwrap_or(0)
        + req.get("size").and_then(Value::as_u64).unwrap_or(10)
        > 10_000
    {
        // A shard failure, wrapped as a node wraps it.
        let reason =
            "Result window is too large, from + size must be less than or equal to: [10000]";
        let (status, mut body) =
            error(400, "search_phase_execution_exception", "all shards failed");
        body["error"]["root_cause"] =
            json!([{"type": "illegal_argument_exception", "reason": reason}]);
        body["error"]["caused_by"] =
            json!({"type": "illegal_argument_exception", "reason": reason});
        return (status, body);
    }
    let q = req
        .get("query")
        .cloned()
        .unwrap_or(json!({"match_all": {}}));
    let sort: Vec<(String, bool)> = req
        .get("sort")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| {
                    let (f, d) = s.as_object()?.iter().next()?;
                    let dir = d
                        .as_str()
                        .or_else(|| d.get("order").and_then(Value::as_str))
                        .unwrap_or("asc");
                    Some((f.clone(), dir == "desc"))
                })
                .collect()
        })
        .unwrap_or_else(|| vec![("_score".to_owned(), true)]);
    let prepared = match Prepared::new(&q, i.mappings.as_ref()) {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    if let Some((f, _)) = sort.iter().find(|(f, _)| {
        f != "_score" && f != "_id" && mapped(i.mappings.as_ref(), f) == Mapped::Unmapped
    }) {
        return error(
            400,
            "query_shard_exception",
            &format!("No mapping found for [{f}] in order to sort on"),
        );
    }
    let mut hits: Vec<(Vec<Value>, &String, &Doc, f64)> = i
        .candidates(&q)
        .into_iter()
        .filter_map(|(id, d)| {
            prepared
                .score(&d.source)
                .map(|s| (sort_key(&sort, id, &d.source, s), id, d, s))
        })
        .collect();
    let total = hits.len();
    if let Some(after) = req.get("search_after").and_then(Value::as_array) {
        hits.retain(|h| cmp_keys(&sort, &h.0, after) == Ordering::Greater);
    }
    let from = req.get("from").and_then(Value::as_u64).unwrap_or(0) as usize;
    let size = req.get("size").and_then(Value::as_u64).unwrap_or(10) as usize;
    // Only the first `from + size` in order are needed: select them, then sort those.
    let order = |a: &(Vec<Value>, &String, &Doc, f64), b: &(Vec<Value>, &String, &Doc, f64)| {
        cmp_keys(&sort, &a.0, &b.0).then_with(|| a.1.cmp(b.1))
    };
    let wanted = from.saturating_add(size);
    if wanted > 0 && hits.len() > wanted {
        hits.select_nth_unstable_by(wanted - 1, order);
        hits.truncate(wanted);
    }
    hits.sort_by(order);
    let source_filter = req.get("_source").cloned().unwrap_or(Value::Bool(true));
    let out: Vec<Value> = hits
        .iter()
        .skip(from)
        .take(size)
        .map(|(key, id, d, s)| {
            let mut h = json!({"_index": index, "_id": id, "_score": s, "sort": key});
            match &source_filter {
                Value::Bool(false) => {}
                Value::Array(fields) => {
                    let mut src = serde_json::Map::new();
                    for f in fields.iter().filter_map(Value::as_str) {
                        if let Some(v) = d.source.get(f) {
                            src.insert(f.to_owned(), v.clone());
                        }
                    }
                    h["_source"] = Value::Object(src);
                }
                _ => h["_source"] = d.source.clone(),
            }
            h
        })
        .collect();
    (
        200,
        json!({"took": 1, "timed_out": false,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {"total": {"value": total, "relation": "eq"}, "max_score": null, "hits": out}}),
    )
}

#[cfg(test)]
mod tests {
    use super::wildcard;

    #[test]
    fn wildcard_patterns_follow_elasticsearch_escaping() {
        assert!(wildcard("*a\\*b*", "xxa*byy"));
        assert!(!wildcard("*a\\*b*", "xxaxbyy"));
        assert!(wildcard("*50%*", "it is 50% done"));
        assert!(wildcard("a?c", "abc"));
        assert!(wildcard("*\\\\*", "back\\slash"));
    }
}
