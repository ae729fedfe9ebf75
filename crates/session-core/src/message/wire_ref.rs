//! How a message is written: its wire form ([`Wire`]'s fields, in its
//! order), borrowing the message's strings instead of copying them first
//! (every store encodes each event it appends).

use serde::{Serialize, Serializer};
use serde_json::Value;

use super::{Content, ContentPart, FileRef, ImageUrl, Message, WireRole};

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        WireRef::from(self).serialize(s)
    }
}

/// A message as its wire form, borrowed.
#[derive(Serialize)]
struct WireRef<'a> {
    role: WireRole,
    content: Option<WireContentRef<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<WireToolCallRef<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

/// [`WireContent`], borrowed.
#[derive(Serialize)]
#[serde(untagged)]
enum WireContentRef<'a> {
    Text(&'a str),
    Parts(Vec<WirePartRef<'a>>),
}

/// [`WirePart`], borrowed.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePartRef<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: &'a ImageUrl },
    File { file: &'a FileRef },
    Json { json: &'a Value },
}

/// [`WireToolCall`], borrowed.
#[derive(Serialize)]
struct WireToolCallRef<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionRef<'a>,
}

/// [`WireFunction`], borrowed.
#[derive(Serialize)]
struct WireFunctionRef<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// A message's content in its wire form: text alone, `null` when empty
/// and `null_when_empty`, else parts with the text first.
fn content_to_wire(content: &Content, null_when_empty: bool) -> Option<WireContentRef<'_>> {
    if content.parts.is_empty() {
        if null_when_empty && content.text.is_empty() {
            return None;
        }
        return Some(WireContentRef::Text(&content.text));
    }
    let text = (!content.text.is_empty()).then(|| WirePartRef::Text {
        text: &content.text,
    });
    let parts = text
        .into_iter()
        .chain(content.parts.iter().map(|part| match part {
            ContentPart::ImageUrl { image_url } => WirePartRef::ImageUrl { image_url },
            ContentPart::File { file } => WirePartRef::File { file },
            ContentPart::Json { json } => WirePartRef::Json { json },
        }));
    Some(WireContentRef::Parts(parts.collect()))
}

impl<'a> From<&'a Message> for WireRef<'a> {
    fn from(m: &'a Message) -> Self {
        let (role, content, name, tool_calls, tool_call_id) = match m {
            Message::System { content } => (
                WireRole::System,
                content_to_wire(content, false),
                None,
                None,
                None,
            ),
            Message::User { content, name } => (
                WireRole::User,
                content_to_wire(content, false),
                name.as_deref(),
                None,
                None,
            ),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let calls = (!tool_calls.is_empty()).then(|| {
                    tool_calls
                        .iter()
                        .map(|c| WireToolCallRef {
                            id: &c.id,
                            kind: "function",
                            function: WireFunctionRef {
                                name: &c.name,
                                arguments: &c.arguments,
                            },
                        })
                        .collect()
                });
                (
                    WireRole::Assistant,
                    content_to_wire(content, !tool_calls.is_empty()),
                    None,
                    calls,
                    None,
                )
            }
            Message::Tool {
                tool_call_id,
                name,
                content,
            } => (
                WireRole::Tool,
                content_to_wire(content, false),
                name.as_deref(),
                None,
                Some(tool_call_id.as_str()),
            ),
        };
        WireRef {
            role,
            content,
            name,
            tool_calls,
            tool_call_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{ToolCall, Wire};
    use super::*;

    #[test]
    fn the_borrowed_wire_writes_the_bytes_of_the_owned_one() {
        let image = ImageUrl {
            url: "https://x/cat.png".into(),
            detail: Some("low".into()),
        };
        let file = FileRef {
            file_id: Some("f1".into()),
            filename: None,
            file_data: None,
        };
        let calls = vec![
            ToolCall::new("c1", "lookup", &json!({"q": "zebra \"quoted\""})),
            ToolCall::new("c2", "other", &json!([1, 2])),
        ];
        let messages = [
            Message::system("be brief"),
            Message::system(""),
            Message::user("a\0b 𝄞 \n \"q\""),
            Message::User {
                content: Content::default(),
                name: Some("ann".into()),
            },
            Message::User {
                content: Content::text("look")
                    .with_part(ContentPart::ImageUrl { image_url: image })
                    .with_part(ContentPart::File { file })
                    .with_part(ContentPart::Json {
                        json: json!({"a": [1, {"b": null}]}),
                    }),
                name: None,
            },
            Message::User {
                content: Content::default().with_part(ContentPart::Json { json: json!(7) }),
                name: None,
            },
            Message::assistant("done"),
            Message::assistant(""),
            Message::assistant_tool_calls("", calls.clone()),
            Message::assistant_tool_calls("checking", calls),
            Message::tool_result("c1", "lookup", "18C"),
            Message::Tool {
                tool_call_id: "c2".into(),
                name: None,
                content: Content::default(),
            },
        ];
        for m in &messages {
            // Read back into the owned wire form and written again, the
            // text must not change: the same fields, in the same order.
            let written = serde_json::to_string(m).unwrap();
            let owned: Wire = serde_json::from_str(&written).unwrap();
            assert_eq!(written, serde_json::to_string(&owned).unwrap(), "{m:?}");
            assert_eq!(
                &serde_json::from_str::<Message>(&serde_json::to_string(m).unwrap()).unwrap(),
                m
            );
        }
    }
}
