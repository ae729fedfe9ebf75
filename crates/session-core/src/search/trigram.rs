//! A trigram index over one session's archive: which events can hold a
//! term, so a selective query checks a few candidates instead of every event.

use rustc_hash::FxHashMap;

use super::fold::fold_case;
use super::query::MatchTerms;
use super::terms::ParsedQuery;

/// One trigram: three characters of folded text, 21 bits each.
pub type Trigram = u64;

/// The distinct trigrams of folded text (NUL read as a space), sorted.
pub fn trigrams_of_folded(folded: &str) -> Vec<Trigram> {
    let mut out = Vec::with_capacity(folded.len());
    let mut window = [0u64; 3];
    for (n, c) in folded.chars().enumerate() {
        let c = if c == '\0' { ' ' } else { c };
        window = [window[1], window[2], u64::from(u32::from(c))];
        if n >= 2 {
            out.push((window[0] << 42) | (window[1] << 21) | window[2]);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The distinct trigrams an event's search text is indexed under.
pub fn trigrams_of(text: &str) -> Vec<Trigram> {
    trigrams_of_folded(&fold_case(text))
}

/// Intersects two sorted lists.
fn intersect(a: &[u64], b: &[u64]) -> Vec<u64> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
        match x.cmp(y) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(*x);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// Intersects sorted lists one after another (the first taken as it is):
/// `None` for no list; stops early once the intersection is empty.
pub fn intersect_all(lists: impl IntoIterator<Item = Vec<u64>>) -> Option<Vec<u64>> {
    let mut acc: Option<Vec<u64>> = None;
    for list in lists {
        let next = match &acc {
            None => list,
            Some(prev) => intersect(prev, &list),
        };
        let empty = next.is_empty();
        acc = Some(next);
        if empty {
            break;
        }
    }
    acc
}

/// Merges two sorted lists into their sorted union.
fn union(a: &[u64], b: &[u64]) -> Vec<u64> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len().saturating_add(b.len()));
    loop {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => {
                out.push(*x.min(y));
                i += usize::from(x <= y);
                j += usize::from(y <= x);
            }
            (Some(x), None) => {
                out.push(*x);
                i += 1;
            }
            (None, Some(y)) => {
                out.push(*y);
                j += 1;
            }
            (None, None) => return out,
        }
    }
}

/// Combines the candidates of each included term (in query order; `None`:
/// the term narrows nothing) as `query`'s mode asks: in
/// [`MatchTerms::All`] the intersection of the terms that narrow (`None`
/// if none does; stops reading terms once it is empty), in
/// [`MatchTerms::Any`] the union (`None` as soon as one term narrows
/// nothing, since any event may hold it).
pub fn combine_term_candidates(
    query: &ParsedQuery,
    per_term: impl IntoIterator<Item = Option<Vec<u64>>>,
) -> Option<Vec<u64>> {
    match query.match_terms() {
        MatchTerms::All => intersect_all(per_term.into_iter().flatten()),
        MatchTerms::Any => {
            let mut acc: Vec<u64> = Vec::new();
            for list in per_term {
                acc = union(&acc, &list?);
            }
            Some(acc)
        }
    }
}

/// The seqs holding every trigram of one (folded) term: `None` when the
/// term is shorter than three characters (nothing narrows).
pub fn term_candidates_from(
    term: &str,
    mut postings: impl FnMut(Trigram) -> Option<Vec<u64>>,
) -> Option<Vec<u64>> {
    intersect_all(
        trigrams_of_folded(&term.replace('\0', " "))
            .into_iter()
            .map(|t| postings(t).unwrap_or_default()),
    )
}

/// Candidates of a query from per-trigram posting lists (sorted seqs),
/// each term's from [`term_candidates_from`], combined by
/// [`combine_term_candidates`]: every trigram of every term of three
/// characters or more (`None` if there is none) in [`MatchTerms::All`]
/// mode; in [`MatchTerms::Any`] mode the union over the terms, `None` if
/// one is shorter. A superset of the matches: callers check each
/// candidate with [`ParsedQuery::matches`].
pub fn candidates_from(
    query: &ParsedQuery,
    mut postings: impl FnMut(Trigram) -> Option<Vec<u64>>,
) -> Option<Vec<u64>> {
    combine_term_candidates(
        query,
        query
            .include()
            .iter()
            .map(|term| term_candidates_from(term, &mut postings)),
    )
}

/// Appends `v` as LEB128 (7 bits a byte, low first): how stores write posting lists.
pub fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = u8::try_from(v & 0x7f).unwrap_or(0);
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Reads one LEB128 number off the front of `bytes`; `None` if it is cut
/// short or too long for 64 bits.
pub fn read_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        v |= u64::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// An in-process trigram index of one session's archive: trigram → the
/// seqs (ascending) of the events holding it.
#[derive(Debug, Clone, Default)]
pub struct TrigramIndex {
    postings: FxHashMap<Trigram, Vec<u64>>,
    last_seq: Option<u64>,
}

impl TrigramIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Indexes event `seq` (above every seq indexed so far) with its search text.
    pub fn add(&mut self, seq: u64, text: &str) {
        self.add_trigrams(seq, &trigrams_of(text));
    }

    /// Indexes event `seq` under already computed trigrams.
    pub fn add_trigrams(&mut self, seq: u64, trigrams: &[Trigram]) {
        if self.last_seq.is_some_and(|last| seq <= last) {
            // Posting lists stay sorted: an out-of-order seq is put in its place.
            for t in trigrams {
                let list = self.postings.entry(*t).or_default();
                if let Err(at) = list.binary_search(&seq) {
                    list.insert(at, seq);
                }
            }
            return;
        }
        for t in trigrams {
            self.postings.entry(*t).or_default().push(seq);
        }
        self.last_seq = Some(seq);
    }

    /// Every trigram with its seqs (ascending), in no particular order.
    pub fn postings(&self) -> impl Iterator<Item = (Trigram, &[u64])> {
        self.postings.iter().map(|(t, list)| (*t, list.as_slice()))
    }

    /// An index from posting lists as [`Self::postings`] gave them (each
    /// list is sorted and deduplicated here, so a damaged source cannot
    /// break the ordering the lookups rely on).
    pub fn from_postings(lists: impl IntoIterator<Item = (Trigram, Vec<u64>)>) -> Self {
        let mut out = Self::default();
        for (t, mut list) in lists {
            list.sort_unstable();
            list.dedup();
            if let Some(last) = list.last() {
                out.last_seq = out.last_seq.max(Some(*last));
                out.postings.entry(t).or_default().extend(list);
            }
        }
        for list in out.postings.values_mut() {
            list.sort_unstable();
            list.dedup();
        }
        out
    }

    /// The highest seq indexed.
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// Forgets every event at or after `seq` (a rewind).
    pub fn remove_from(&mut self, seq: u64) {
        self.postings.retain(|_, list| {
            let keep = list.partition_point(|s| *s < seq);
            list.truncate(keep);
            !list.is_empty()
        });
        if self.last_seq.is_some_and(|last| last >= seq) {
            self.last_seq = seq.checked_sub(1);
        }
    }

    /// Forgets the events at `seqs` (an archive prune); the highest seq
    /// indexed stays, since seqs are never handed out again.
    pub fn remove(&mut self, seqs: &std::collections::HashSet<u64>) {
        self.postings.retain(|_, list| {
            list.retain(|s| !seqs.contains(s));
            !list.is_empty()
        });
    }

    /// The seqs that can match `query` (see [`candidates_from`]).
    pub fn candidates(&self, query: &ParsedQuery) -> Option<Vec<u64>> {
        candidates_from(query, |t| self.postings.get(&t).cloned())
    }

    /// How many events can hold one folded term (`None`: shorter than three characters).
    pub fn doc_freq(&self, term: &str) -> Option<u64> {
        term_candidates_from(term, |t| self.postings.get(&t).cloned())
            .map(|c| u64::try_from(c.len()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> ParsedQuery {
        ParsedQuery::parse(text).unwrap()
    }

    #[test]
    fn candidates_hold_every_trigram_of_every_long_term() {
        let mut ix = TrigramIndex::new();
        ix.add(1, "my locker is 4711");
        ix.add(2, "the LOCKER room");
        ix.add(3, "Café au lait");
        assert_eq!(ix.candidates(&q("locker 4711")), Some(vec![1]));
        assert_eq!(ix.candidates(&q("lock")), Some(vec![1, 2]));
        assert_eq!(ix.candidates(&q("CAFE")), Some(vec![3]));
        assert_eq!(ix.candidates(&q("absent")), Some(vec![]));
        assert_eq!(
            ix.candidates(&q("my")),
            None,
            "two characters narrow nothing"
        );
        assert_eq!(ix.candidates(&q("my room")), Some(vec![2]));
    }

    #[test]
    fn any_of_candidates_are_the_union_unless_a_term_is_short() {
        let mut ix = TrigramIndex::new();
        ix.add(1, "my locker is 4711");
        ix.add(2, "the LOCKER room");
        ix.add(3, "Café au lait");
        ix.add(4, "ticket 4711");
        let any = |t: &str| q(t).matching(MatchTerms::Any);
        assert_eq!(ix.candidates(&any("4711 cafe")), Some(vec![1, 3, 4]));
        assert_eq!(ix.candidates(&any("room absent")), Some(vec![2]));
        assert_eq!(ix.candidates(&any("room my")), None, "`my` can be anywhere");
        assert_eq!(union(&[1, 3, 5], &[2, 3, 6]), [1, 2, 3, 5, 6]);
        assert_eq!(union(&[], &[4]), [4]);
    }

    #[test]
    fn rewind_forgets_later_events() {
        let mut ix = TrigramIndex::new();
        for s in 1..=5 {
            ix.add(s, "same words");
        }
        ix.remove_from(3);
        assert_eq!(ix.candidates(&q("words")), Some(vec![1, 2]));
        assert_eq!(ix.last_seq(), Some(2));
        ix.add(7, "same words");
        ix.add(6, "same words");
        assert_eq!(ix.candidates(&q("words")), Some(vec![1, 2, 6, 7]));
    }

    #[test]
    fn varints_round_trip_and_refuse_a_cut() {
        let mut bytes = Vec::new();
        for v in [0, 127, 128, 300, u64::MAX] {
            push_varint(&mut bytes, v);
        }
        let mut rest = bytes.as_slice();
        let back: Vec<u64> = std::iter::from_fn(|| read_varint(&mut rest)).collect();
        assert_eq!(back, [0, 127, 128, 300, u64::MAX]);
        assert_eq!(read_varint(&mut &[0x80u8][..]), None);
    }

    #[test]
    fn nul_is_indexed_as_a_space() {
        let mut ix = TrigramIndex::new();
        ix.add(1, "a\0bc");
        assert_eq!(ix.candidates(&q("a\0b")), Some(vec![1]));
    }
}
