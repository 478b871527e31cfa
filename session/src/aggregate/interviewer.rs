//! The interviewer's commands: claiming and completing an utterance, showing a widget, a
//! decision (judged in `judge.rs`, carried out in `decide.rs`), an extraction decided alongside an utterance, the screening
//! verdict, and the participant's reply to the summary.

use super::*;
use crate::commands as cmd;
use crate::events::SessionStatus::*;

impl Session {
    /// The interviewer claims the next utterance; only one may be open at a time. An open claim
    /// is replaced only when it is stale, or when `takes_over` names its run: the harness found
    /// that run's process dead (that check is I/O, so it happens outside the aggregate).
    pub(super) async fn claim_utterance(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::StartAgentMessage,
    ) -> Result<(), SessionError> {
        let cmd::StartAgentMessage {
            message_id,
            run_id,
            process_id,
            takes_over,
            at,
        } = c;
        self.ensure_open()?;
        self.ensure_status(&[Active])?;
        let mut replaced = None;
        if let Some(open) = self.open_message {
            // Another run holds the turn, unless its claim is stale or its process is
            // known to be dead.
            let stale = (at - open.at).num_seconds() >= CLAIM_TIMEOUT_SECS;
            if !stale && takes_over != Some(open.run_id) {
                return Err(SessionError::InvalidState {
                    status: self.status,
                });
            }
            replaced = Some(open.run_id);
        }
        self.emit(
            sink,
            EventBody::AgentMessageStarted {
                message_id,
                run_id,
                process_id,
                takes_over: replaced,
            },
            at,
        )
        .await;
        Ok(())
    }

    /// The interviewer's utterance is complete; with `await_reply` the session waits for the
    /// participant.
    pub(super) async fn complete_utterance(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::CompleteAgentMessage,
    ) -> Result<(), SessionError> {
        let cmd::CompleteAgentMessage {
            message_id,
            content,
            await_reply,
            at,
        } = c;
        self.ensure_open()?;
        if self.open_message.map(|c| c.message_id) != Some(message_id) {
            return Err(SessionError::InvalidState {
                status: self.status,
            });
        }
        self.emit(
            sink,
            EventBody::AgentMessageCompleted {
                message_id,
                content,
            },
            at,
        )
        .await;
        if await_reply {
            self.change_status(sink, WaitingForUser, at).await;
        }
        Ok(())
    }

    /// Show a widget and wait for its answer (FR-04-16/17).
    pub(super) async fn render_interaction(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::RenderInteraction,
    ) -> Result<(), SessionError> {
        let cmd::RenderInteraction { interaction, at } = c;
        self.ensure_open()?;
        self.ensure_no_pending()?;
        self.ensure_status(&[Active])?;
        self.render(sink, interaction, at).await?;
        Ok(())
    }

    /// An interviewer decision, under the claim `message_id` (see `claim_utterance`). The
    /// aggregate judges it: a decision that breaks a rule is rewritten (`proposed_action` kept)
    /// or refused. `interaction_id` names the widget a `render_interaction` shows.
    pub(super) async fn decide(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::Decide,
    ) -> Result<(), SessionError> {
        let cmd::Decide {
            message_id,
            interaction_id,
            proposal,
            at,
        } = c;
        self.ensure_open()?;
        self.ensure_no_pending()?;
        self.ensure_status(&[Active])?;
        if self.open_message.map(|c| c.message_id) != Some(message_id) {
            return Err(SessionError::InvalidState {
                status: self.status,
            });
        }
        let judged = self.judge(&proposal, interaction_id, at)?;
        self.carry_out(sink, message_id, *proposal, judged, at)
            .await?;
        Ok(())
    }

    /// A rules decision with no claim open (see `SessionCommand::DecideUnclaimed`): one with
    /// words writes its claim first, in the same commit.
    pub(super) async fn decide_unclaimed(
        &mut self,
        sink: &EventSink<Self>,
        step: cmd::DecideUnclaimed,
    ) -> Result<(), SessionError> {
        let cmd::DecideUnclaimed {
            after_hash,
            message_id,
            run_id,
            process_id,
            interaction_id,
            proposal,
            at,
        } = step;
        self.ensure_open()?;
        // Only on the state its run weighed: anything committed since refuses it.
        if self.head_hash() != after_hash {
            return Err(SessionError::InvalidState {
                status: self.status,
            });
        }
        self.ensure_no_pending()?;
        self.ensure_status(&[Active])?;
        let judged = self.judge(&proposal, interaction_id, at)?;
        // An open claim holds the turn for its run; and a decision its run did not weigh as it
        // stands is not taken for it.
        if self.open_message.is_some() || judged.proposed.is_some() {
            return Err(SessionError::InvalidState {
                status: self.status,
            });
        }
        if judged.message().is_some() {
            let claim = cmd::StartAgentMessage {
                message_id,
                run_id,
                process_id,
                takes_over: None,
                at,
            };
            self.claim_utterance(sink, claim).await?;
        }
        self.carry_out(sink, message_id, *proposal, judged, at)
            .await
    }

    /// An extraction decided alongside the utterance the open claim `message_id` is for (the
    /// `llm` policy asks for both at once, so the participant waits on one model call): it is
    /// logged as its own decision, and the claim stays open for the utterance's `decide`.
    pub(super) async fn record_extraction_alongside(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::RecordExtraction,
    ) -> Result<(), SessionError> {
        let cmd::RecordExtraction {
            message_id,
            proposal,
            at,
        } = c;
        self.ensure_open()?;
        self.ensure_status(&[Active])?;
        if self.open_message.map(|c| c.message_id) != Some(message_id) {
            return Err(SessionError::InvalidState {
                status: self.status,
            });
        }
        self.record_extraction(sink, message_id, *proposal, at)
            .await?;
        Ok(())
    }

    /// The screening verdict (the study's rules, or the model's judgement), once every
    /// screening question is answered.
    pub(super) async fn evaluate_screening(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::EvaluateScreening,
    ) -> Result<(), SessionError> {
        let cmd::EvaluateScreening {
            eligible,
            rationale,
            decided_by,
            at,
        } = c;
        self.ensure_open()?;
        if self.consent != Some(true) || !self.screening_awaits_verdict() {
            return Err(SessionError::InvalidState {
                status: self.status,
            });
        }
        if rationale.trim().is_empty() {
            return Err(SessionError::InvalidValue {
                field: "rationale".into(),
                message: "a screening verdict needs a rationale".into(),
            });
        }
        let answers = self.screening_answers.clone();
        let body = EventBody::ScreeningEvaluated {
            eligible,
            rationale,
            answers,
            decided_by,
        };
        self.emit(sink, body, at).await;
        Ok(())
    }

    /// The participant's reply to the proposed summary: a confirmation, or an addition.
    pub(super) async fn confirm_summary(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::ConfirmSummary,
    ) -> Result<(), SessionError> {
        let cmd::ConfirmSummary {
            confirmed,
            addition,
            at,
        } = c;
        self.ensure_open()?;
        // One reply per proposed summary: a second run classifying the same reply is
        // refused (a new proposal resets this).
        if self.summary.is_none() || self.summary_confirmed.is_some() {
            return Err(SessionError::InvalidState {
                status: self.status,
            });
        }
        self.emit(
            sink,
            EventBody::SummaryConfirmed {
                confirmed,
                addition,
            },
            at,
        )
        .await;
        Ok(())
    }

    /// Shows a widget: the tool call, the rendered interaction, and the wait for its answer.
    pub(super) async fn render(
        &mut self,
        sink: &EventSink<Self>,
        interaction: Box<InteractionToolCall>,
        at: DateTime<Utc>,
    ) -> Result<(), SessionError> {
        if self.answered.contains(&interaction.interaction_id) {
            return Err(SessionError::InteractionAlreadyAnswered {
                interaction_id: interaction.interaction_id.clone(),
            });
        }
        let tool_input = serde_json::to_value(&interaction).expect("interactions serialize");
        let created = EventBody::ToolCallCreated {
            tool_call_id: interaction.tool_call_id.clone(),
            tool_name: "render_interaction".into(),
            tool_input,
        };
        self.emit(sink, created, at).await;
        self.emit(sink, EventBody::InteractionRendered { interaction }, at)
            .await;
        self.change_status(sink, SessionStatus::WaitingForTool, at)
            .await;
        Ok(())
    }

    /// What a decision's action tells the fold about its objective.
    pub(super) fn record_action(&mut self, action: &AgentAction) {
        match action {
            AgentAction::AskQuestion { objective_id } => {
                self.objectives
                    .entry(objective_id.clone())
                    .or_default()
                    .asked = true;
                self.current_objective = Some(objective_id.clone());
            }
            AgentAction::Probe { objective_id, .. } => {
                self.objectives
                    .entry(objective_id.clone())
                    .or_default()
                    .probes += 1;
                self.current_objective = Some(objective_id.clone());
            }
            AgentAction::RenderInteraction {
                objective_id: Some(objective_id),
            } => {
                self.objectives
                    .entry(objective_id.clone())
                    .or_default()
                    .interaction_rendered = true;
                self.current_objective = Some(objective_id.clone());
            }
            _ => {}
        }
    }
}
