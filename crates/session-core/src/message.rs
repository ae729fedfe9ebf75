//! The chat message an LLM sees, in the OpenAI chat-completions shape.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Serialization: the wire form, borrowed.
mod wire_ref;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The human (or a synthetic prompt standing in for one).
    User,
    /// The model: text and/or tool calls.
    Assistant,
    /// The result of one tool call.
    Tool,
}

impl Role {
    /// The role's name as the chat-completions API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = crate::SessionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "system" => Ok(Self::System),
            "user" => Ok(Self::User),
            "assistant" => Ok(Self::Assistant),
            "tool" => Ok(Self::Tool),
            other => Err(crate::SessionError::invalid(
                "role",
                format!("{other:?} is not one of system, user, assistant, tool"),
            )),
        }
    }
}

/// One tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call id the tool result refers back to.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments exactly as the model produced them (normally a JSON object as text).
    pub arguments: String,
}

impl ToolCall {
    /// A tool call with JSON arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: &Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.to_string(),
        }
    }

    /// The arguments parsed as JSON.
    pub fn arguments_json(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(&self.arguments)
    }
}

/// A non-text part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentPart {
    /// An image by URL (or data URL).
    ImageUrl {
        /// The image reference.
        image_url: ImageUrl,
    },
    /// A file by id or inline data.
    File {
        /// The file reference.
        file: FileRef,
    },
    /// A structured JSON value (lowered to a text part by [`Message::to_openai`]).
    Json {
        /// The value.
        json: Value,
    },
}

/// An image reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImageUrl {
    /// `https://...` or `data:image/png;base64,...`.
    pub url: String,
    /// `low`, `high` or `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A file reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FileRef {
    /// A provider file id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// The file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Inline base64 data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<String>,
}

/// Message content: text plus optional typed parts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Content {
    /// The text.
    pub text: String,
    /// Images, files and JSON values that accompany the text.
    pub parts: Vec<ContentPart>,
}

impl Content {
    /// Text-only content.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            parts: Vec::new(),
        }
    }

    /// Adds a part.
    pub fn with_part(mut self, part: ContentPart) -> Self {
        self.parts.push(part);
        self
    }
}

impl From<&str> for Content {
    fn from(s: &str) -> Self {
        Self::text(s)
    }
}

impl From<String> for Content {
    fn from(s: String) -> Self {
        Self::text(s)
    }
}

/// A chat message as a model sees it.
///
/// Serializes to and from the OpenAI chat-completions message JSON, so a
/// history can be handed to any compatible model unchanged:
///
/// ```
/// use session_core::Message;
/// let m = Message::user("What is the capital of France?");
/// let json = serde_json::to_value(&m).unwrap();
/// assert_eq!(json, serde_json::json!({"role": "user", "content": "What is the capital of France?"}));
/// let back: Message = serde_json::from_value(json).unwrap();
/// assert_eq!(back, m);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Instructions for the model.
    System {
        /// The instructions.
        content: Content,
    },
    /// Input from the user.
    User {
        /// The input.
        content: Content,
        /// An optional participant name (group conversations).
        name: Option<String>,
    },
    /// The model's answer: text and/or tool calls.
    Assistant {
        /// The answer text (may be empty when there are tool calls).
        content: Content,
        /// Tools the model asked to run.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The [`ToolCall::id`] this answers.
        tool_call_id: String,
        /// The tool's name, when known.
        name: Option<String>,
        /// The result.
        content: Content,
    },
}

impl Message {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::System {
            content: Content::text(text),
        }
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::User {
            content: Content::text(text),
            name: None,
        }
    }

    /// An assistant text answer.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::Assistant {
            content: Content::text(text),
            tool_calls: Vec::new(),
        }
    }

    /// An assistant message that calls tools.
    pub fn assistant_tool_calls(text: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self::Assistant {
            content: Content::text(text),
            tool_calls,
        }
    }

    /// A tool result.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self::Tool {
            tool_call_id: tool_call_id.into(),
            name: Some(name.into()),
            content: Content::text(text),
        }
    }

    /// The message's role.
    pub fn role(&self) -> Role {
        match self {
            Self::System { .. } => Role::System,
            Self::User { .. } => Role::User,
            Self::Assistant { .. } => Role::Assistant,
            Self::Tool { .. } => Role::Tool,
        }
    }

    /// The message's content.
    pub fn content(&self) -> &Content {
        match self {
            Self::System { content }
            | Self::User { content, .. }
            | Self::Assistant { content, .. }
            | Self::Tool { content, .. } => content,
        }
    }

    /// The message's text.
    pub fn text(&self) -> &str {
        &self.content().text
    }

    /// The tool calls of an assistant message (empty for other roles).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            Self::Assistant { tool_calls, .. } => tool_calls,
            _ => &[],
        }
    }

    /// The text keyword search matches: the message text, then each tool call's
    /// name and arguments on lines of their own.
    pub fn search_text(&self) -> String {
        let calls = self.tool_calls();
        if calls.is_empty() {
            return self.text().to_owned();
        }
        let mut out = self.text().to_owned();
        for call in calls {
            out.push('\n');
            out.push_str(&call.name);
            out.push(' ');
            out.push_str(&call.arguments);
        }
        out
    }

    /// The strict OpenAI chat-completions JSON: like serde's form, with JSON
    /// parts lowered to text parts, for endpoints that reject unknown part types.
    pub fn to_openai(&self) -> Value {
        let mut wire = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(Value::Array(parts)) = wire.get_mut("content") {
            for part in parts.iter_mut() {
                if part.get("type").and_then(Value::as_str) == Some("json") {
                    let text = part.get("json").map(Value::to_string).unwrap_or_default();
                    *part = serde_json::json!({"type": "text", "text": text});
                }
            }
        }
        wire
    }
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Message))]
struct Wire {
    role: WireRole,
    #[serde(default, deserialize_with = "nullable")]
    content: Option<WireContent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<WireToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
}

fn nullable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<WireContent>, D::Error> {
    Option::<WireContent>::deserialize(d)
}

#[derive(Serialize, Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = MessageRole))]
enum WireRole {
    System,
    /// OpenAI's newer name for system instructions; read as `System`.
    Developer,
    User,
    Assistant,
    Tool,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = MessageContent))]
enum WireContent {
    Text(String),
    Parts(Vec<WirePart>),
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = ContentPart))]
enum WirePart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
    File { file: FileRef },
    Json { json: Value },
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = ToolCall))]
struct WireToolCall {
    id: String,
    #[serde(rename = "type", default = "function_type")]
    kind: String,
    function: WireFunction,
}

fn function_type() -> String {
    "function".to_owned()
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = ToolFunction))]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

fn content_from_wire(content: Option<WireContent>) -> Content {
    match content {
        None => Content::default(),
        Some(WireContent::Text(text)) => Content::text(text),
        Some(WireContent::Parts(parts)) => {
            let mut out = Content::default();
            for part in parts {
                match part {
                    WirePart::Text { text } => {
                        if !out.text.is_empty() {
                            out.text.push('\n');
                        }
                        out.text.push_str(&text);
                    }
                    WirePart::ImageUrl { image_url } => {
                        out.parts.push(ContentPart::ImageUrl { image_url });
                    }
                    WirePart::File { file } => out.parts.push(ContentPart::File { file }),
                    WirePart::Json { json } => out.parts.push(ContentPart::Json { json }),
                }
            }
            out
        }
    }
}

impl TryFrom<Wire> for Message {
    type Error = String;

    fn try_from(w: Wire) -> Result<Self, Self::Error> {
        let content = content_from_wire(w.content);
        Ok(match w.role {
            WireRole::System | WireRole::Developer => Message::System { content },
            WireRole::User => Message::User {
                content,
                name: w.name,
            },
            WireRole::Assistant => Message::Assistant {
                content,
                tool_calls: w
                    .tool_calls
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| ToolCall {
                        id: c.id,
                        name: c.function.name,
                        arguments: c.function.arguments,
                    })
                    .collect(),
            },
            WireRole::Tool => Message::Tool {
                tool_call_id: w
                    .tool_call_id
                    .ok_or_else(|| "a tool message needs `tool_call_id`".to_owned())?,
                name: w.name,
                content,
            },
        })
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(d)?;
        Message::try_from(wire).map_err(serde::de::Error::custom)
    }
}

/// The schema of a message is the schema of its chat shape.
#[cfg(feature = "openapi")]
impl utoipa::__dev::ComposeSchema for Message {
    fn compose(
        _generics: Vec<utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>>,
    ) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        <Wire as utoipa::PartialSchema>::schema()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for Message {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("Message")
    }

    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        <Wire as utoipa::ToSchema>::schemas(schemas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(m: &Message) -> Message {
        let text = serde_json::to_string(m).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn assistant_tool_call_matches_openai_shape() {
        let m = Message::assistant_tool_calls(
            "",
            vec![ToolCall::new(
                "call_1",
                "get_weather",
                &json!({"city": "Paris"}),
            )],
        );
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]
            })
        );
        assert_eq!(round_trip(&m), m);
    }

    #[test]
    fn reads_openai_tool_result_and_parts() {
        let v = json!({"role": "tool", "tool_call_id": "call_1", "content": "18C"});
        let m: Message = serde_json::from_value(v).unwrap();
        assert_eq!(m.role(), Role::Tool);
        assert_eq!(m.text(), "18C");

        let v = json!({"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}}
        ]});
        let m: Message = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(m.text(), "what is this?");
        assert_eq!(m.content().parts.len(), 1);
        assert_eq!(serde_json::to_value(&m).unwrap(), v);
    }

    #[test]
    fn developer_role_reads_as_system_and_tool_needs_call_id() {
        let m: Message =
            serde_json::from_value(json!({"role": "developer", "content": "be brief"})).unwrap();
        assert_eq!(m, Message::system("be brief"));
        let err = serde_json::from_value::<Message>(json!({"role": "tool", "content": "x"}));
        assert!(err.is_err());
    }

    #[test]
    fn json_parts_are_lowered_for_strict_endpoints() {
        let m = Message::User {
            content: Content::text("data").with_part(ContentPart::Json {
                json: json!({"a": 1}),
            }),
            name: None,
        };
        assert_eq!(round_trip(&m), m);
        assert_eq!(
            m.to_openai(),
            json!({"role": "user", "content": [
                {"type": "text", "text": "data"}, {"type": "text", "text": "{\"a\":1}"}]})
        );
    }

    #[test]
    fn nul_and_astral_text_round_trips() {
        let m = Message::user("a\0b 𝄞 🦀 \u{10FFFF}");
        assert_eq!(round_trip(&m), m);
    }

    #[test]
    fn search_text_includes_tool_calls() {
        let m = Message::assistant_tool_calls(
            "checking",
            vec![ToolCall::new("c1", "lookup", &json!({"q": "zebra"}))],
        );
        assert!(m.search_text().contains("zebra"));
        assert!(m.search_text().starts_with("checking\nlookup"));
    }
}
