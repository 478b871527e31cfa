//! `RunAgentInput` (AG-UI 1.0) as this endpoint reads it: the thread is the session, the last
//! user message is the participant's new message, and `resume` entries answer the pending
//! interaction. Unknown keys are allowed (AG-UI objects are open); what we read is checked.

use serde::Deserialize;
use serde_json::Value;

use crate::http::error::ApiError;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    pub thread_id: String,
    pub run_id: String,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub resume: Option<Vec<ResumeEntry>>,
}

#[derive(Debug, Deserialize)]
pub struct Message {
    pub id: String,
    pub role: String,
    #[serde(default)]
    pub content: Option<Value>,
    /// Everything else the client sent (tool calls, names …), kept so a MESSAGES_SNAPSHOT can
    /// hand the client's history back unchanged.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

impl Message {
    /// The message as the client sent it.
    pub fn to_value(&self) -> Value {
        let mut m = self.rest.clone();
        m.insert("id".into(), Value::String(self.id.clone()));
        m.insert("role".into(), Value::String(self.role.clone()));
        if let Some(content) = &self.content {
            m.insert("content".into(), content.clone());
        }
        Value::Object(m)
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    pub interrupt_id: String,
    pub status: ResumeStatus,
    #[serde(default)]
    pub payload: Option<Value>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ResumeStatus {
    Resolved,
    Cancelled,
}

fn bad(code: &'static str, message: &str, field: &str) -> ApiError {
    ApiError::BadRequest {
        code,
        message: message.into(),
        details: Some(serde_json::json!({ "field": field })),
    }
}

impl RunAgentInput {
    /// Checks what the runtime relies on, against the session the URL names.
    pub fn check(&self, session_id: &str) -> Result<(), ApiError> {
        if self.thread_id != session_id {
            return Err(bad(
                "invalid_thread_id",
                "threadId must be the session id",
                "threadId",
            ));
        }
        if self.run_id.trim().is_empty() || self.run_id.len() > 200 {
            return Err(bad(
                "invalid_run_id",
                "runId must be 1 to 200 characters",
                "runId",
            ));
        }
        for (i, m) in self.messages.iter().enumerate() {
            if m.id.is_empty() || m.id.len() > 200 {
                return Err(bad(
                    "invalid_message_id",
                    "every message needs an id of 1 to 200 characters",
                    &format!("messages[{i}].id"),
                ));
            }
        }
        if let Some(resume) = &self.resume {
            if resume.len() > 1 {
                return Err(bad(
                    "invalid_resume",
                    "only one interaction can be pending at a time",
                    "resume",
                ));
            }
        }
        Ok(())
    }

    /// The participant's new message: the last message, when it is the user's, with its text.
    pub fn new_user_message(&self) -> Option<(&str, String)> {
        let last = self.messages.last().filter(|m| m.role == "user")?;
        let text = match &last.content {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        Some((last.id.as_str(), text))
    }
}
