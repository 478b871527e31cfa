//! The model's words while they stream: shown as they arrive once the guards would carry out
//! the action as proposed and the text checks let them through, held back otherwise
//! (`docs/llm-contract.md`, "What the participant reads").

use chrono::{DateTime, Utc};
use interview_session::decision::{AgentAction, Proposal, Provenance};
use interview_session::Session;
use uuid::Uuid;

use crate::llm::tools;
use crate::llm::visible::{Refused, Visible};

/// Whether the guards would carry out `action` as is (so its text may be shown now).
pub(super) fn accepted_as_is(session: &Session, action: AgentAction, now: DateTime<Utc>) -> bool {
    let stub = Proposal {
        action,
        rationale: "pre-check".into(),
        message: Some("pre-check".into()),
        interaction: None,
        fields: Vec::new(),
        summary: Some("pre-check".into()),
        input_summary: String::new(),
        provenance: Provenance {
            model: String::new(),
            prompt_version_id: String::new(),
            latency_ms: 0,
            token_usage: Default::default(),
        },
        input_class: None,
        refused: None,
    };
    match session.judge(&stub, Some(Uuid::nil().to_string()), now) {
        Ok(j) => {
            j.proposed.is_none()
                // A closing message stands whatever reason the runtime records.
                || matches!(
                    (&j.action, &stub.action),
                    (AgentAction::Conclude { .. }, AgentAction::Conclude { .. })
                )
        }
        Err(_) => false,
    }
}

/// The streaming side of one call: what was shown, and what the check decided.
pub(super) struct Progress<'a> {
    pub(super) session: &'a Session,
    pub(super) visible: &'a Visible,
    pub(super) now: DateTime<Utc>,
    /// The action the shown text was judged for: `None` until known; `Some(None)` when the
    /// guards would rewrite it (nothing is shown).
    pub(super) verdict: Option<Option<AgentAction>>,
    /// Set when the text was judged for the objective the session expected because the model
    /// sent its words before naming one.
    pub(super) assumed: bool,
    pub(super) shown: String,
    /// The message argument arrived whole and all of it was shown.
    pub(super) complete: bool,
    pub(super) refused: Option<Refused>,
}

impl Progress<'_> {
    /// The part of the message that may be shown now, beyond what already was.
    pub(super) fn advance(&mut self, name: &str, args: &str) -> Option<String> {
        if self.refused.is_some() {
            return None;
        }
        let message = tools::partial_message(args);
        if self.verdict.is_none() {
            // The guard needs the tool and its target; a model that writes its words first gets
            // them judged for the objective the session expects (docs/llm-contract.md).
            let action = match tools::partial_action(name, args) {
                Some(action) => Some(action),
                None if message.is_some() => {
                    self.assumed = true;
                    tools::expected_action(name, self.session)
                }
                None => None,
            };
            if let Some(action) = action {
                let ok = accepted_as_is(self.session, action.clone(), self.now);
                self.verdict = Some(ok.then_some(action));
            }
        }
        let Some(Some(action)) = &self.verdict else {
            return None;
        };
        let (message, complete) = message?;
        // What no later character can mend (a path or a lower-case word first, letters run
        // together, a second question, a run-on) is refused before any more of it is shown.
        let refused = super::step_text::refused_start(&message)
            .or_else(|| super::said::manner_so_far(action, &message));
        if let Some(refused) = refused {
            self.refused = Some(refused);
            return None;
        }
        match self.visible.check(&message, complete) {
            Err(refused) => {
                self.refused = Some(refused);
                None
            }
            Ok(ready) => {
                let ready = &message[..ready];
                let delta = ready
                    .strip_prefix(self.shown.as_str())
                    .filter(|d| !d.is_empty())
                    .map(String::from);
                if delta.is_some() {
                    self.shown = ready.to_string();
                }
                // Whole only when everything the model wrote is what was shown.
                self.complete = complete && self.shown == message;
                delta
            }
        }
    }
}
