//! The query DSL subset of the fake node (`bool`, `term`, `terms`, `range`,
//! `exists`, `wildcard`, `match`), sorting and `search_after` paging.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use super::{error, index_missing, Doc, State};

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

/// A query prepared for matching many documents: each `terms` list of
/// strings becomes a set, keyed by where the list sits in the query.
pub(super) struct Prepared<'q> {
    root: &'q Value,
    sets: Sets,
}

type Sets = HashMap<*const Value, HashSet<String>>;

impl<'q> Prepared<'q> {
    pub(super) fn new(root: &'q Value) -> Self {
        fn walk(v: &Value, sets: &mut Sets) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::Object(t)) = m.get("terms") {
                        for list in t.values() {
                            if let Some(a) = list.as_array() {
                                if a.iter().all(Value::is_string) {
                                    let set = a.iter().filter_map(Value::as_str).map(str::to_owned);
                                    sets.insert(std::ptr::from_ref(list), set.collect());
                                }
                            }
                        }
                    }
                    m.values().for_each(|x| walk(x, sets));
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, sets)),
                _ => {}
            }
        }
        let mut sets = HashMap::new();
        walk(root, &mut sets);
        Self { root, sets }
    }

    pub(super) fn score(&self, source: &Value) -> Option<f64> {
        score(self.root, source, &self.sets)
    }
}

/// `Some(score)` if `source` matches `q`.
fn score(q: &Value, source: &Value, sets: &Sets) -> Option<f64> {
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
                score(c, source, sets)?;
            }
            for c in list("must") {
                total += score(c, source, sets)?;
            }
            for c in list("must_not") {
                if score(c, source, sets).is_some() {
                    return None;
                }
            }
            let should = list("should");
            if !should.is_empty() {
                let matched: Vec<f64> = should
                    .iter()
                    .filter_map(|c| score(c, source, sets))
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
            eq_values(field(source, f)?, v).then_some(1.0)
        }
        "terms" => {
            let (f, vs) = body.as_object()?.iter().next()?;
            let have = field(source, f)?;
            if let (Some(set), Some(have)) = (sets.get(&std::ptr::from_ref(vs)), have.as_str()) {
                return set.contains(have).then_some(1.0);
            }
            vs.as_array()?
                .iter()
                .any(|v| eq_values(have, v))
                .then_some(1.0)
        }
        "range" => {
            let (f, r) = body.as_object()?.iter().next()?;
            let have = field(source, f)?;
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
        "exists" => field(source, body.get("field")?.as_str()?).map(|_| 1.0),
        "wildcard" => {
            let (f, v) = body.as_object()?.iter().next()?;
            let pattern = v.get("value").unwrap_or(v).as_str()?;
            wildcard(pattern, field(source, f)?.as_str()?).then_some(1.0)
        }
        "match" => {
            let (f, v) = body.as_object()?.iter().next()?;
            let text = v.get("query").unwrap_or(v).as_str()?;
            // Lucene's classic shape: term frequency, damped by field length.
            let have = tokens(field(source, f)?.as_str()?);
            let wanted: HashSet<String> = tokens(text).into_iter().collect();
            let tf = have.iter().filter(|t| wanted.contains(*t)).count();
            (tf > 0).then(|| tf as f64 / (have.len().max(1) as f64).sqrt())
        }
        other => panic!("fake Elasticsearch: unsupported query {other}"),
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

pub(super) fn search(st: &State, index: &str, req: &Value) -> (u16, Value) {
    let Some(i) = st.indices.get(index) else {
        return index_missing(index);
    };
    if req.get("from").and_then(Value::as_u64).unwrap_or(0)
        + req.get("size").and_then(Value::as_u64).unwrap_or(10)
        > 10_000
    {
        return error(
            400,
            "illegal_argument_exception",
            "Result window is too large, from + size must be less than or equal to: [10000]",
        );
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
    let prepared = Prepared::new(&q);
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
