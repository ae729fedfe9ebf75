//! The query language, parsed once: words and quoted phrases that must all
//! (or, in any-of mode, any) occur, `-` exclusions, each a folded literal substring.

use memchr::memmem;

use super::fold::{fold_case, FoldedText};
use crate::error::{Result, SessionError};

/// Which of a query's terms an event must hold. A mode of the query,
/// never syntax: `OR` in a query's text stays a word to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum MatchTerms {
    /// Every word and phrase (`a b` is a and b): the default.
    #[default]
    All,
    /// At least one word or phrase (`a b` is a or b); exclusions still exclude.
    Any,
}

impl MatchTerms {
    /// Whether this is the default, [`MatchTerms::All`].
    pub fn is_all(&self) -> bool {
        *self == MatchTerms::All
    }
}

/// The most terms (words, phrases and exclusions) one query may hold.
pub const MAX_QUERY_TERMS: usize = 32;

/// Characters of context a snippet shows before the first match.
const SNIPPET_BEFORE: usize = 40;
/// The longest snippet, in characters (ellipses aside).
const SNIPPET_CHARS: usize = 160;

/// A search text parsed into the terms it requires and excludes, folded
/// (see [`fold_case`]). The reference matcher: every store's results are
/// exactly the events whose [`crate::Message::search_text`] this matches.
///
/// | Query | Matches an event whose text |
/// |---|---|
/// | `locker 4711` | contains `locker` and `4711`, anywhere, in any order |
/// | `lock` | contains `lock` (so "Locker" matches: substrings, any case) |
/// | `cafe` | contains `café`, `CAFÉ` or `cafe` (accents are ignored) |
/// | `"blue car"` | contains `blue car` as one piece |
/// | `refund -paypal` | contains `refund` and not `paypal` |
/// | `100% a_b *` | contains `100%`, `a_b` and `*`: nothing is a wildcard |
///
/// In [`MatchTerms::Any`] mode (see [`Self::matching`]) an event matches
/// when it holds at least one of the words and phrases and none of the
/// exclusions: `locker 4711` then finds "my locker" and "ticket 4711".
///
/// Terms are separated by whitespace. A term starting with `"` runs to the
/// next `"` (a phrase, kept with its inner spaces); without a closing quote
/// the `"` is an ordinary character. A term starting with `-` (and more
/// than the `-`) is excluded. Nothing else is syntax: `\`, `*`, `%`, `_`,
/// `AND`, `NOT`, regex and engine operators are literal text.
///
/// ```
/// use session_core::ParsedQuery;
/// let q = ParsedQuery::parse("Locker \"gate B\" -cancelled").unwrap();
/// assert!(q.matches("my locker 4711 is at Gate B"));
/// assert!(!q.matches("locker at gate B cancelled"));
/// assert!(ParsedQuery::parse("   ").is_err());
/// let any = q.matching(session_core::MatchTerms::Any);
/// assert!(any.matches("the locker room"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedQuery {
    include: Vec<String>,
    exclude: Vec<String>,
    terms: MatchTerms,
}

/// Splits `text` into `(excluded, raw term)` pairs.
fn split_terms(text: &str) -> Vec<(bool, &str)> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let (negated, body) = match rest.strip_prefix('-') {
            Some(b) if b.chars().next().is_some_and(|c| !c.is_whitespace()) => (true, b),
            _ => (false, rest),
        };
        let phrase_end = body
            .strip_prefix('"')
            .and_then(|inner| inner.find('"').map(|end| (inner, end)));
        let (term, after) = if let Some((inner, end)) = phrase_end {
            (&inner[..end], &inner[end + 1..])
        } else {
            let end = body.find(char::is_whitespace).unwrap_or(body.len());
            (&body[..end], &body[end..])
        };
        out.push((negated, term));
        rest = after.trim_start();
    }
    out
}

impl ParsedQuery {
    /// Parses a search text. Empty or whitespace-only text, a query of
    /// exclusions only, or more than [`MAX_QUERY_TERMS`] terms is `InvalidInput`.
    pub fn parse(text: &str) -> Result<Self> {
        let mut include: Vec<String> = Vec::new();
        let mut exclude: Vec<String> = Vec::new();
        for (negated, raw) in split_terms(text) {
            let folded = fold_case(raw);
            // An empty phrase (`""`), or a term that folds to nothing (a lone accent), says nothing.
            if folded.is_empty() {
                continue;
            }
            let list = if negated { &mut exclude } else { &mut include };
            if !list.contains(&folded) {
                list.push(folded);
            }
        }
        if include.len() + exclude.len() > MAX_QUERY_TERMS {
            return Err(SessionError::invalid(
                "query",
                format!("has more than {MAX_QUERY_TERMS} terms"),
            ));
        }
        if include.is_empty() {
            let why = if exclude.is_empty() {
                "must contain a word or a quoted phrase to find"
            } else {
                "has only exclusions (`-word`); add a word or a quoted phrase to find"
            };
            return Err(SessionError::invalid("query", why));
        }
        Ok(Self {
            include,
            exclude,
            terms: MatchTerms::All,
        })
    }

    /// The same terms in `terms` mode (a parsed query starts in [`MatchTerms::All`]).
    pub fn matching(mut self, terms: MatchTerms) -> Self {
        self.terms = terms;
        self
    }

    /// Whether every included term must occur, or any one.
    pub fn match_terms(&self) -> MatchTerms {
        self.terms
    }

    /// The folded terms to find (all of them, or any one: [`Self::match_terms`]),
    /// in query order, without repeats.
    pub fn include(&self) -> &[String] {
        &self.include
    }

    /// The folded terms that must not occur.
    pub fn exclude(&self) -> &[String] {
        &self.exclude
    }

    /// The included terms as an index that stores NUL as a space sees them
    /// (a candidate filter: the real text is checked with [`Self::matches`]).
    pub fn index_terms(&self) -> impl Iterator<Item = String> + '_ {
        self.include.iter().map(|t| t.replace('\0', " "))
    }

    /// Whether an already folded text matches.
    pub fn matches_folded(&self, folded: &str) -> bool {
        let has = |t: &String| memmem::find(folded.as_bytes(), t.as_bytes()).is_some();
        let found = match self.terms {
            MatchTerms::All => self.include.iter().all(has),
            MatchTerms::Any => self.include.iter().any(has),
        };
        found && !self.exclude.iter().any(has)
    }

    /// Whether `text` matches: every included term (any one in
    /// [`MatchTerms::Any`] mode) occurs, no excluded one does.
    pub fn matches(&self, text: &str) -> bool {
        self.matches_folded(&fold_case(text))
    }

    /// How often each included term occurs in a folded text (non-overlapping), in [`Self::include`] order.
    pub fn term_counts(&self, folded: &str) -> Vec<u32> {
        self.include
            .iter()
            .map(|t| {
                let n = memmem::find_iter(folded.as_bytes(), t.as_bytes()).count();
                u32::try_from(n).unwrap_or(u32::MAX)
            })
            .collect()
    }

    /// A short excerpt of `text` around the first occurrence of an included
    /// term (whichever occurs first, in either mode): at most 160 characters, whitespace runs shown as one space,
    /// `…` where text was cut.
    pub fn snippet(&self, text: &str) -> String {
        let folded = FoldedText::new(text);
        let first = self
            .include
            .iter()
            .filter_map(|t| memmem::find(folded.text.as_bytes(), t.as_bytes()))
            .min()
            .unwrap_or(0);
        let at = folded.original_offset(first, text.len());
        let chars_before = text[..at].chars().count();
        let skip = chars_before.saturating_sub(SNIPPET_BEFORE);
        let total = text.chars().count();
        let take = SNIPPET_CHARS.min(total.saturating_sub(skip));
        let mut out = String::new();
        if skip > 0 {
            out.push('…');
        }
        let mut in_space = false;
        for c in text.chars().skip(skip).take(take) {
            if c.is_whitespace() {
                if !in_space {
                    out.push(' ');
                }
                in_space = true;
            } else {
                out.push(c);
                in_space = false;
            }
        }
        if skip.saturating_add(take) < total {
            out.push('…');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(q: &str) -> (Vec<String>, Vec<String>) {
        let p = ParsedQuery::parse(q).unwrap();
        (p.include().to_vec(), p.exclude().to_vec())
    }

    #[test]
    fn words_phrases_and_exclusions() {
        assert_eq!(
            parts("Locker  4711"),
            (vec!["locker".into(), "4711".into()], vec![])
        );
        assert_eq!(
            parts("\"Gate  B\" -x -\"y z\""),
            (vec!["gate  b".into()], vec!["x".into(), "y z".into()])
        );
        assert_eq!(parts("a a A"), (vec!["a".into()], vec![]));
    }

    #[test]
    fn syntax_characters_alone_are_literal() {
        assert_eq!(parts("-").0, ["-"]);
        assert_eq!(parts("\"").0, ["\""]);
        assert_eq!(parts("say\"hi\"").0, ["say\"hi\""]);
        assert_eq!(parts("\"open phrase").0, ["\"open", "phrase"]);
        assert_eq!(parts("a\\*b %_").0, ["a\\*b", "%_"]);
        assert_eq!(parts("- x").0, ["-", "x"]);
    }

    #[test]
    fn empty_and_exclusion_only_queries_are_invalid() {
        for q in ["", "   \n\t", "\"\"", "-a -b", "\u{301}"] {
            let e = ParsedQuery::parse(q).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidInput, "{q:?}");
        }
        let many: Vec<String> = (0..=MAX_QUERY_TERMS).map(|i| format!("t{i}")).collect();
        let many = many.join(" ");
        assert!(ParsedQuery::parse(&many).is_err());
    }

    #[test]
    fn all_terms_must_match_in_any_order_accents_ignored() {
        let q = ParsedQuery::parse("4711 LOCKER").unwrap();
        assert!(q.matches("my locker is 4711"));
        assert!(!q.matches("my locker is 4712"));
        let q = ParsedQuery::parse("creme brulee").unwrap();
        assert!(q.matches("Crème brûlée for two"));
        let q = ParsedQuery::parse("refund -paypal").unwrap();
        assert!(q.matches("refund by card"));
        assert!(!q.matches("refund via PayPal"));
    }

    #[test]
    fn snippets_cut_around_the_first_match() {
        let q = ParsedQuery::parse("needle").unwrap();
        let text = format!("{} NEEDLE\n\n here {}", "x".repeat(100), "y".repeat(300));
        let s = q.snippet(&text);
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("NEEDLE here"), "{s}");
        assert!(s.chars().count() <= SNIPPET_CHARS + 2);
        assert_eq!(q.snippet("a short needle"), "a short needle");
        let q = ParsedQuery::parse("ecole").unwrap();
        assert_eq!(q.snippet("École"), "École");
    }

    #[test]
    fn any_of_needs_one_term_and_no_exclusion() {
        let q = ParsedQuery::parse("locker \"gate b\" -cancelled")
            .unwrap()
            .matching(MatchTerms::Any);
        assert_eq!(q.match_terms(), MatchTerms::Any);
        assert!(q.matches("my LOCKER"));
        assert!(q.matches("at gate B"));
        assert!(!q.matches("gate, b"));
        assert!(!q.matches("locker cancelled"));
        assert!(!q.matches("nothing here"));
        let text = format!("{} gate b then locker", "x".repeat(100));
        assert!(
            q.snippet(&text).starts_with("…xxx"),
            "around the first term found"
        );
        assert!(q.snippet(&text).contains("gate b then locker"));
    }

    #[test]
    fn term_counts_follow_include_order() {
        let q = ParsedQuery::parse("ab c").unwrap();
        assert_eq!(q.term_counts("ab ab abc"), [3, 1]);
    }
}
