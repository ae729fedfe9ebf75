//! Store URLs as the command line shows them.

/// A URL with any password replaced by `***`, for messages.
///
/// The credentials are what lies between `://` and the last `@`; the
/// password is what follows their first `:`.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let (scheme, creds, host) = (&url[..s], &url[s + 3..at], &url[at + 1..]);
            match creds.split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u:p@ss@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("sqlite://x.db"), "sqlite://x.db");
        assert_eq!(redact("@://"), "@://");
        assert_eq!(redact("é://ü:ö@ä"), "é://ü:***@ä");
    }
}
