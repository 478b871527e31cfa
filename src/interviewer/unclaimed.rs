//! Steps taken without a claim first. A claim (`agent.message.started`) holds the turn so that
//! only one run asks the model and streams; a step the rules decide streams nothing before its
//! commit, so the commit itself is the lock. A widget or an extraction is committed with no claim
//! at all (one event fewer); an utterance with its claim in the same commit, its words streamed
//! to live subscribers once it is committed (`StreamNotifier` in `src/live/stream_hub.rs`): one
//! commit fewer for every step of a rules interview.

use chrono::Utc;
use cqrs_es::AggregateError;
use interview_session::commands as cmd;
use interview_session::decision::Proposal;
use interview_session::study::AgentMode;
use interview_session::{Session, SessionCommand};
use uuid::Uuid;

use super::{rules, Interviewer, InterviewerError};
use interview_session::conversation::Conversation;

/// What became of a step tried without a claim first (`Interviewer::unclaimed_step`).
pub(super) enum Unclaimed {
    Committed,
    /// The session moved under it: load it again.
    SessionChanged,
    /// Not a rules step as proposed: take it the claimed way (with the rules' proposal, when it
    /// was worked out: the same session and time give the same one).
    NotTaken(Option<Box<Proposal>>),
}

impl Interviewer {
    /// Takes the next step in one commit when the rules decide it (not the model) and the
    /// guards take it as proposed (`SessionCommand::DecideUnclaimed`): nothing is streamed
    /// before its commit, so no turn needs holding first. A claim still open (a dead run's, to be
    /// taken over) and a step the guards would rewrite go the claimed way.
    pub(super) async fn unclaimed_step(
        &self,
        session_id: &str,
        run_id: Uuid,
        session: &Session,
        conversation: &Conversation,
        now: chrono::DateTime<Utc>,
    ) -> Result<Unclaimed, InterviewerError> {
        let mode = session.study().map(|s| s.agent_config.mode);
        let model_decides =
            self.gateway.is_some() && mode == Some(AgentMode::Llm) && session.interviewing();
        if model_decides
            || session.open_claim().is_some()
            || session.pending_interaction().is_some()
        {
            return Ok(Unclaimed::NotTaken(None));
        }
        let interaction_id = Uuid::new_v4().to_string();
        let proposal = rules::propose(session, conversation, now);
        let as_proposed = session
            .judge(&proposal, Some(interaction_id.clone()), now)
            .is_ok_and(|judged| judged.proposed.is_none());
        if !as_proposed {
            return Ok(Unclaimed::NotTaken(Some(Box::new(proposal))));
        }
        let decide = SessionCommand::DecideUnclaimed(cmd::DecideUnclaimed {
            after_hash: session.head_hash().to_string(),
            message_id: Uuid::new_v4(),
            run_id,
            process_id: Some(self.process_id),
            interaction_id: Some(interaction_id),
            proposal: Box::new(proposal),
            at: now,
        });
        match self.execute(session_id, decide, run_id).await {
            Ok(()) => Ok(Unclaimed::Committed),
            // The session moved after the run loaded it (another run's step, the participant's
            // words, the end): the run loads it again and decides on what it finds — never
            // the claimed way on the state it had (it would stream words from it).
            Err(AggregateError::AggregateConflict | AggregateError::UserError(_)) => {
                Ok(Unclaimed::SessionChanged)
            }
            Err(e) => Err(e.into()),
        }
    }
}
