//! The steps that judge what the participant said outside the interview proper: their reply to
//! the summary (confirmed, an addition, or an end), and their screening answers (the model in
//! `llm` mode, the study's qualify/disqualify rules otherwise). Each is one command; another run
//! that recorded the verdict first is no error.

use chrono::{DateTime, Utc};
use cqrs_es::AggregateError;
use interview_session::commands as cmd;
use interview_session::input_class::classify;
use interview_session::study::AgentMode;
use interview_session::{Session, SessionCommand, SessionError};
use uuid::Uuid;

use super::{llm_step, Interviewer, InterviewerError, Loaded};

impl Interviewer {
    /// Records whether the participant's reply to the summary confirmed it.
    pub(super) async fn classify_summary_reply(
        &self,
        session_id: &str,
        run_id: Uuid,
        session: &Session,
        reply: &str,
        now: DateTime<Utc>,
    ) -> Result<(), InterviewerError> {
        let phrases = session
            .study()
            .map(|s| s.agent_config.confirm_phrases.as_slice())
            .unwrap_or_default();
        let confirmed = interview_session::text::matches_phrase(reply, phrases);
        // Only an answer is an addition. "结束" / "I'm done" / "can we wrap up?" ends the
        // interview, its summary unconfirmed (as a second press of End would); "nothing to
        // add", "没有了", a refusal or a question back adds nothing either.
        let ends = session
            .study()
            .map_or(&[][..], |s| &s.agent_config.end_phrases[..]);
        let adds = classify(reply, ends).is_answer();
        let command = SessionCommand::ConfirmSummary(cmd::ConfirmSummary {
            confirmed,
            addition: (!confirmed && adds).then(|| reply.to_string()),
            at: now,
        });
        self.execute_unless_done(session_id, command, run_id).await
    }

    /// Records the screening verdict on the participant's answers.
    pub(super) async fn judge_screening(
        &self,
        session_id: &str,
        run_id: Uuid,
        loaded: &Loaded,
        now: DateTime<Utc>,
    ) -> Result<(), InterviewerError> {
        let session = &loaded.session;
        let study = session.study().expect("a running session has its study");
        let (eligible, rationale, decided_by) = match (&self.gateway, study.agent_config.mode) {
            (Some(gateway), AgentMode::Llm) => {
                let step = llm_step::Step {
                    session_id,
                    run_id,
                    message_id: Uuid::nil(),
                    now,
                };
                self.llm_judge_screening(gateway, &step, session, &loaded.events)
                    .await
            }
            _ => {
                let (eligible, rationale) = study
                    .study_config
                    .screening
                    .evaluate(session.screening_answers());
                (eligible, rationale, None)
            }
        };
        let command = SessionCommand::EvaluateScreening(cmd::EvaluateScreening {
            eligible,
            rationale,
            decided_by,
            at: now,
        });
        self.execute_unless_done(session_id, command, run_id).await
    }

    /// Executes a command that another run may have carried out first (the aggregate then
    /// refuses it as out of state, and that is no error).
    pub(super) async fn execute_unless_done(
        &self,
        session_id: &str,
        command: SessionCommand,
        run_id: Uuid,
    ) -> Result<(), InterviewerError> {
        match self.execute(session_id, command, run_id).await {
            Ok(()) | Err(AggregateError::UserError(SessionError::InvalidState { .. })) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
