//! Writes of the fake node: one document (create, index, compare-and-swap
//! on seq no and primary term) and `_bulk`, with the conflicts a node answers.

use std::collections::{BTreeSet, HashMap};

use serde_json::{json, Value};

use super::{error, index_missing, shards, template_mappings, Answer, Doc, Index, State};

fn conflict(id: &str, (seq_no, term): (i64, i64), have: &Doc) -> (u16, Value) {
    error(
        409,
        "version_conflict_engine_exception",
        &format!(
            "[{id}]: version conflict, required seqNo [{seq_no}], primary term [{term}]. current document has seqNo [{}] and primary term [{}]",
            have.seq_no, have.term
        ),
    )
}

fn conflict_missing(id: &str, (seq_no, term): (i64, i64)) -> (u16, Value) {
    error(
        409,
        "version_conflict_engine_exception",
        &format!("[{id}]: version conflict, required seqNo [{seq_no}], primary term [{term}]. but no document was found"),
    )
}

pub(super) fn doc_json(index: &str, id: &str, d: &Doc) -> Value {
    json!({"_index": index, "_id": id, "_version": d.version, "_seq_no": d.seq_no,
        "_primary_term": d.term, "found": true, "_source": d.source})
}

/// A write's compare-and-swap condition: `if_seq_no` and `if_primary_term`.
fn cas_of(query: &HashMap<String, String>) -> Option<(i64, i64)> {
    let n = |k: &str| query.get(k).map(|s| s.parse::<i64>().unwrap());
    n("if_seq_no").zip(n("if_primary_term"))
}

/// `PUT|POST {index}/_doc|_create/{id}`: a create (`_create` or
/// `op_type=create`), a compare-and-swap (`if_seq_no` with
/// `if_primary_term`) or a plain write. `Err`: refused before applying.
pub(super) fn put_doc(
    st: &mut State,
    index: &str,
    kind: &str,
    id: &str,
    query: &HashMap<String, String>,
    body: &str,
) -> Result<Answer, Answer> {
    let create = kind == "_create" || query.get("op_type").map(String::as_str) == Some("create");
    let source: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => return Err(error(400, "parse_exception", &e.to_string())),
    };
    if query.contains_key("if_seq_no") != query.contains_key("if_primary_term") {
        return Err(error(
            400,
            "action_request_validation_exception",
            "Validation Failed: 1: ifSeqNo is set, but primary term is [0];",
        ));
    }
    Ok(write_doc(st, index, id, source, create, cas_of(query)))
}

/// `DELETE {index}/_doc/{id}`, by compare-and-swap when asked. `Err`: no such index.
pub(super) fn delete_doc(
    st: &mut State,
    index: &str,
    id: &str,
    query: &HashMap<String, String>,
) -> Result<Answer, Answer> {
    let cas = cas_of(query);
    let term = st.term();
    let Some(i) = st.indices.get_mut(index) else {
        return Err(index_missing(index));
    };
    Ok(match (i.live.docs.get(id), cas) {
        (None, Some(want)) => conflict_missing(id, want),
        (None, None) => (
            404,
            json!({"_index": index, "_id": id, "result": "not_found", "_shards": shards()}),
        ),
        (Some(d), Some(want)) if (d.seq_no, d.term) != want => conflict(id, want, d),
        (Some(d), _) => {
            let version = d.version + 1;
            i.remove(id);
            let seq_no = i.take_seq_no();
            (
                200,
                json!({"_index": index, "_id": id, "_version": version, "result": "deleted",
                "_shards": shards(), "_seq_no": seq_no, "_primary_term": term}),
            )
        }
    })
}

pub(super) fn write_doc(
    st: &mut State,
    index: &str,
    id: &str,
    source: Value,
    create: bool,
    cas: Option<(i64, i64)>,
) -> (u16, Value) {
    let term = st.term();
    if !st.indices.contains_key(index) {
        // Created by its first write, with the mapping of a matching template.
        let mappings = template_mappings(st, index);
        st.indices.insert(
            index.to_owned(),
            Index {
                mappings,
                ..Index::default()
            },
        );
    }
    let i = st.indices.entry(index.to_owned()).or_default();
    if let Some(field) = i.unmapped_field(&source) {
        return error(
            400,
            "strict_dynamic_mapping_exception",
            &format!("[1:2] mapping set to strict, dynamic introduction of [{field}] within [_doc] is not allowed"),
        );
    }
    let existing = i.live.docs.get(id).cloned();
    if create {
        if let Some(d) = &existing {
            return error(
                409,
                "version_conflict_engine_exception",
                &format!(
                    "[{id}]: version conflict, document already exists (current version [{}])",
                    d.version
                ),
            );
        }
    }
    if let Some(want) = cas {
        match &existing {
            None => return conflict_missing(id, want),
            Some(d) if (d.seq_no, d.term) != want => return conflict(id, want, d),
            _ => {}
        }
    }
    let version = existing.as_ref().map_or(1, |d| d.version + 1);
    let seq_no = i.take_seq_no();
    i.insert(
        id,
        Doc {
            source,
            seq_no,
            term,
            version,
        },
    );
    let (status, result) = if existing.is_some() {
        (200, "updated")
    } else {
        (201, "created")
    };
    (
        status,
        json!({"_index": index, "_id": id, "_version": version, "result": result,
        "_shards": shards(), "_seq_no": seq_no, "_primary_term": term}),
    )
}

/// The indices a `_bulk` body names.
pub(super) fn bulk_indices(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let (_, meta) = v.as_object()?.iter().next()?;
            meta.get("_index")?.as_str().map(str::to_owned)
        })
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect()
}

pub(super) fn bulk(st: &mut State, body: &str) -> (u16, Value) {
    let actions = body
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| {
            serde_json::from_str::<Value>(l).is_ok_and(|v| {
                v.as_object().is_some_and(|o| {
                    o.len() == 1
                        && o.keys()
                            .all(|k| matches!(k.as_str(), "create" | "index" | "delete"))
                })
            })
        })
        .count();
    let reject_last = st.reject_last_bulk_item > 0;
    if reject_last {
        st.reject_last_bulk_item -= 1;
    }
    let mut lines = body.lines().filter(|l| !l.trim().is_empty());
    let mut items = Vec::new();
    let mut errors = false;
    let mut n = 0;
    while let Some(action_line) = lines.next() {
        n += 1;
        let action: Value = serde_json::from_str(action_line).unwrap();
        let (op, meta) = action
            .as_object()
            .unwrap()
            .iter()
            .next()
            .map(|(k, v)| (k.clone(), v.clone()))
            .unwrap();
        let index = meta["_index"].as_str().unwrap().to_owned();
        let id = meta["_id"].as_str().unwrap().to_owned();
        if reject_last && n == actions {
            if op != "delete" {
                lines.next();
            }
            errors = true;
            let (status, body) = error(
                429,
                "es_rejected_execution_exception",
                "rejected execution of coordinating operation",
            );
            items.push(json!({ op: {"_index": index, "_id": id, "status": status, "error": body["error"]} }));
            continue;
        }
        let (status, mut result) = match op.as_str() {
            "create" | "index" => {
                let doc: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
                write_doc(st, &index, &id, doc, op == "create", None)
            }
            "delete" => {
                let existed = st
                    .indices
                    .get_mut(&index)
                    .and_then(|i| i.remove(&id))
                    .is_some();
                if existed {
                    (
                        200,
                        json!({"_index": index, "_id": id, "result": "deleted"}),
                    )
                } else {
                    (
                        404,
                        json!({"_index": index, "_id": id, "result": "not_found"}),
                    )
                }
            }
            other => error(
                400,
                "illegal_argument_exception",
                &format!("unknown action {other}"),
            ),
        };
        if status >= 300 && !(op == "delete" && status == 404) {
            errors = true;
            let err = result["error"].clone();
            result = json!({"_index": index, "_id": id, "status": status, "error": err});
        } else if let Some(m) = result.as_object_mut() {
            m.insert("status".into(), json!(status));
            m.remove("found");
        }
        items.push(json!({ op: result }));
    }
    (200, json!({"took": 3, "errors": errors, "items": items}))
}
