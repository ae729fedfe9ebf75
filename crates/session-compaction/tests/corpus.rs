//! The corpus: `summarize --keep 2` with the offline summarizer compresses
//! each conversation to at most 35 % of its context tokens, keeps the
//! planted facts in the summary, and every fact stays reachable by recall.
#![allow(clippy::unwrap_used)]

#[path = "corpus/measure.rs"]
mod measure;

use session_testkit::corpus;

#[tokio::test]
async fn the_offline_summary_compresses_and_keeps_the_planted_facts() {
    println!("{}", measure::HEADER);
    for c in corpus::all() {
        let f = measure::summarize_keep_2(&c, measure::extractive()).await;
        println!("{}", f.row());
        let missing: Vec<&str> = c
            .facts
            .iter()
            .filter(|p| !f.in_summary.contains(&p.id))
            .map(|p| p.needle.as_str())
            .collect();
        println!("  not in the summary: {missing:?}");
        assert!(
            f.ratio() <= 0.35,
            "{}: {:.3} of the tokens left",
            c.name,
            f.ratio()
        );
        assert_eq!(
            f.by_recall, f.facts,
            "{}: every fact stays searchable",
            c.name
        );
        assert!(
            f.in_summary.len() * 10 >= f.facts * 9,
            "{}: only {}/{} facts in the summary; missing {missing:?}\n{}",
            c.name,
            f.in_summary.len(),
            f.facts,
            f.summary
        );
    }
}

/// What a provider counts for a chat prompt: its `o200k_base` tokens, the
/// chat format's overhead (3 per message, 3 to prime the answer) and the
/// tool definitions an agent sends with every call (here 240 tokens), which
/// no estimate of the messages can see.
fn provider_count(messages: &[session_core::Message]) -> u64 {
    use session_core::TokenEstimator;
    static BPE: std::sync::OnceLock<session_compaction::BpeEstimator> = std::sync::OnceLock::new();
    let bpe = BPE.get_or_init(|| session_compaction::BpeEstimator::o200k().unwrap());
    let mut n = 3 + 240u64;
    for m in messages {
        n += 3 + u64::from(bpe.estimate_text(m.text()));
        for c in m.tool_calls() {
            n += u64::from(bpe.estimate_text(&c.name)) + u64::from(bpe.estimate_text(&c.arguments));
        }
    }
    n
}

/// Errors of the estimate against the provider's count over an agent loop
/// replaying `c`, from the sixth model call on: (uncalibrated, calibrated).
async fn replay_errors(
    c: &corpus::Conversation,
    estimator: std::sync::Arc<dyn session_core::TokenEstimator>,
) -> (Vec<f64>, Vec<f64>) {
    use session_compaction::SessionMemory;
    use session_core::{ModelUsage, Role};

    let (_repo, service, owner, s) = measure::empty_session_for(c).await;
    let memory = SessionMemory::new(service.clone()).with_estimator(estimator);
    let (mut plain, mut calibrated) = (Vec::new(), Vec::new());
    let mut calls = 0u64;
    for e in &c.events {
        if !(e.role() == Role::Assistant && e.branch.is_none()) {
            memory.record_event(&owner, &s.id, e.clone()).await.unwrap();
            continue;
        }
        // A model call: the prompt, its estimate, then the answer with the provider's usage.
        let prompt = memory
            .prepare(&owner, &s.id, "You are a careful assistant.")
            .await
            .unwrap();
        let reported = provider_count(&prompt);
        let estimate = memory
            .estimate_prompt(&owner, &s.id, &prompt)
            .await
            .unwrap();
        #[allow(clippy::cast_precision_loss)]
        let err = |n: u64| (n as f64 - reported as f64).abs() / reported as f64;
        if calls >= 5 {
            plain.push(err(estimate.estimated));
            calibrated.push(err(estimate.calibrated));
        }
        let usage = ModelUsage::new("gpt-4o", reported, 50);
        memory
            .record_answer(&owner, &s.id, e.clone(), usage)
            .await
            .unwrap();
        calls += 1;
    }
    let usage = service.usage(&owner, &s.id).await.unwrap();
    assert_eq!(usage.total.calls, calls, "every call's usage is stored");
    assert_eq!(usage.by_model["gpt-4o"].output_tokens, 50 * calls);
    plain.sort_by(f64::total_cmp);
    calibrated.sort_by(f64::total_cmp);
    (plain, calibrated)
}

#[tokio::test]
async fn recorded_usage_calibrates_the_estimate_to_within_5_percent() {
    use session_compaction::estimator_for_model;

    let pct = |v: &[f64], q: f64| {
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let i = ((v.len() - 1) as f64 * q) as usize;
        v[i] * 100.0
    };
    for c in corpus::all() {
        // The model's own encoding, a neighbouring one (as for a provider
        // whose tokenizer is not public), and the offline heuristic.
        let setups = [
            ("o200k_base", estimator_for_model(Some("gpt-4o")).unwrap().0),
            ("cl100k_base", estimator_for_model(Some("gpt-4")).unwrap().0),
            ("heuristic", estimator_for_model(None).unwrap().0),
        ];
        for (name, estimator) in setups {
            let (plain, calibrated) = replay_errors(&c, estimator).await;
            println!(
                "{} with {name}: {} calls; error uncalibrated median {:.1} % worst {:.1} %; calibrated median {:.2} % p90 {:.2} % worst {:.2} %",
                c.name,
                plain.len() + 5,
                pct(&plain, 0.5),
                pct(&plain, 1.0),
                pct(&calibrated, 0.5),
                pct(&calibrated, 0.9),
                pct(&calibrated, 1.0),
            );
            assert!(plain.len() > 80, "{}: {} calls", c.name, plain.len());
            assert!(
                pct(&calibrated, 0.5) <= 5.0,
                "{} with {name}: median over 5 %",
                c.name
            );
            if name != "heuristic" {
                // With a BPE base, every call after the fifth is within 5 %.
                assert!(
                    pct(&calibrated, 1.0) <= 5.0,
                    "{} with {name}: worst over 5 %",
                    c.name
                );
            }
        }
    }
}

/// The heuristic overcounts, as documented, on every conversation of the
/// corpus against both BPE encodings (each message's text, tool calls and
/// the per-message overhead counted the same way by both): compaction
/// fires early rather than late. Prints the figure per conversation.
#[test]
fn the_heuristic_overcounts_every_corpus_conversation() {
    use session_core::{HeuristicEstimator, TokenEstimator};
    let encodings = [
        (
            "o200k_base",
            session_compaction::BpeEstimator::o200k().unwrap(),
        ),
        (
            "cl100k_base",
            session_compaction::BpeEstimator::cl100k().unwrap(),
        ),
    ];
    let total = |e: &dyn TokenEstimator, c: &corpus::Conversation| -> u64 {
        c.events
            .iter()
            .map(|ev| u64::from(e.estimate_message(&ev.message)))
            .sum()
    };
    println!("| conversation | heuristic | o200k_base | cl100k_base |");
    for c in corpus::all() {
        let heuristic = total(&HeuristicEstimator, &c);
        let mut row = format!("| {} | {heuristic} |", c.name);
        for (name, bpe) in &encodings {
            let exact = total(bpe, &c);
            #[allow(clippy::cast_precision_loss)]
            let over = (heuristic as f64 / exact as f64 - 1.0) * 100.0;
            row.push_str(&format!(" {exact} ({over:+.1} %) |"));
            assert!(
                heuristic >= exact,
                "{}: the heuristic's {heuristic} tokens undercount {name}'s {exact}",
                c.name
            );
        }
        println!("{row}");
    }
}
