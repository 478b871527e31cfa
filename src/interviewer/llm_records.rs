//! The model calls whose output the participant does not read as it streams: the screening
//! verdict on what the study's rules leave open, and the extraction of a participant's input
//! that runs alongside the next step (`docs/llm-contract.md`).

use interview_session::commands as cmd;
use std::time::Duration;

use chrono::{DateTime, Utc};
use interview_session::decision::{ExtractedField, Proposal, Provenance};
use interview_session::events::{EventBody, SessionEvent};
use interview_session::input_class::classify;
use interview_session::study::AgentMode;
use interview_session::Session;

use super::step::Step;
use super::Interviewer;
use crate::llm::prompt::{self, Listing};
use crate::llm::{prompt_records, tools, ModelGateway};
use interview_session::conversation::Conversation;

impl Interviewer {
    /// The final extraction's fields over the whole transcript, and the model call that made
    /// them: in `llm` mode one model call (value, confidence, evidence, quote per field), with
    /// the fields widgets answered taken from the widgets; in `rules` mode, or when the call
    /// fails (recorded, source `final_extraction`) or a budget is spent, the rules copier.
    // Long by design: the steps of one final extraction in order: the rules copier where no model
    // is used, the budget and the request, one model call charged whether it failed or not, then
    // the guards on what it sent, in order (the schema, answers only, unfounded values from the
    // copier, widget fields over the model's, declined fields, the schema again); every failure is
    // carried as one (code, message) to the single fallback to the copier at the end.
    pub(crate) async fn final_fields(
        &self,
        session_id: &str,
        loaded: &super::Loaded,
        now: DateTime<Utc>,
    ) -> (Vec<ExtractedField>, Option<Provenance>) {
        let (session, conversation) = (&loaded.session, &loaded.conversation);
        let copier = || super::rules_fields::extract_all(session, conversation);
        let (Some(gateway), Some(study)) = (&self.gateway, session.study()) else {
            return (copier(), None);
        };
        if study.agent_config.mode != AgentMode::Llm {
            return (copier(), None);
        }
        let failed = |code: &str, message: String| (code.to_string(), message);
        let listing = Listing::from_events(&loaded.events);
        let transcript = format!(
            "{}{}",
            crate::llm::quoted::known_block(session, &loaded.events),
            listing.render_all()
        );
        let outcome = match (
            super::budget::check(&loaded.events, study, &self.budgets, session_id, now, false),
            prompt_records::final_extraction_request(session, transcript),
        ) {
            (Some(spent), _) => Err(failed("model_budget_spent", spent.reason())),
            (None, None) => return (copier(), None),
            (None, Some(request)) => {
                let prompt_chars = request.sent_chars();
                let timeout = Duration::from_secs(u64::from(study.model_config.timeout_seconds));
                match gateway.stream(request, timeout, |_, _| {}).await {
                    Ok(turn) => {
                        let call = self.charge(
                            &turn,
                            session_id,
                            study,
                            prompt_records::final_version_id(),
                            prompt_chars,
                            now,
                        );
                        tools::proposal_from_call(
                            "extract_fields",
                            &turn.arguments,
                            call.clone(),
                            String::new(),
                            &|t| listing.resolve(t),
                        )
                        .map(|p| (p.fields, call))
                        .map_err(|e| failed("model_bad_arguments", e))
                    }
                    Err((error, turn)) => {
                        self.charge(
                            &turn,
                            session_id,
                            study,
                            prompt_records::final_version_id(),
                            prompt_chars,
                            now,
                        );
                        Err(failed(error.code(), error.to_string()))
                    }
                }
            }
        };
        // What a widget answered is not the model's to read again: it fills its fields as the
        // rules extraction does, over whatever the model made of them. Fields that do not fit
        // the schema (an unknown id, a value of the wrong type) go to the rules copier at once,
        // recorded — never to a retry that would pay for the same answer again.
        let schema = &study.output_schema;
        let mut unfounded_note = None;
        let outcome = outcome.and_then(|(fields, call)| {
            // What the model sent, before any guard drops a part of it: a field that does not
            // fit is a model failure, not something to pass over in silence.
            interview_session::field_values::check_model_fields(schema, &fields)
                .map_err(|e| failed("model_bad_arguments", e))?;
            let mut fields = answers_only(fields, session, conversation, &listing, &loaded.events);
            // A text value the participant would not recognise as theirs is the copier's.
            let unfounded = super::founded::take_unfounded(&mut fields, session, &loaded.events);
            if !unfounded.is_empty() {
                let copied = copier();
                fields.extend(
                    copied
                        .into_iter()
                        .filter(|f| unfounded.contains(&f.field_id)),
                );
                unfounded_note = Some(unfounded);
            }
            let widgets = super::rules::all_widget_fields(session, conversation);
            fields.retain(|f| !widgets.iter().any(|w| w.field_id == f.field_id));
            fields.extend(widgets);
            // What the participant declined or did not know, where the model put nothing.
            let declined = super::rules::all_declined_fields(session, conversation, &fields);
            fields.extend(declined);
            interview_session::field_values::check_fields(schema, &fields)
                .map(|()| (fields, call))
                .map_err(|e| failed("model_bad_arguments", e))
        });
        if let (Ok(_), Some(ids)) = (&outcome, unfounded_note) {
            let message = format!(
                "the values of {ids:?} are not in the participant's words; the rules copier made them"
            );
            self.record_final_failure(session_id, "model_unfounded_value", message, now)
                .await;
        }
        match outcome {
            Ok((fields, call)) => (fields, Some(call)),
            Err((code, message)) => {
                let message = crate::llm::redact::redact(&message, None);
                let message = format!("{message}; the rules copier made the final extraction");
                self.record_final_failure(session_id, &code, message, now)
                    .await;
                (copier(), None)
            }
        }
    }

    /// Records what went wrong with the final extraction's model call (source
    /// `final_extraction`); a failure to record it is logged.
    async fn record_final_failure(
        &self,
        session_id: &str,
        code: &str,
        message: String,
        now: DateTime<Utc>,
    ) {
        let command = interview_session::SessionCommand::RecordError(cmd::RecordError {
            source: "final_extraction".into(),
            code: code.to_string(),
            message,
            at: Utc::now().max(now),
        });
        let actor = crate::command::store::Actor::System;
        if let Err(e) = self
            .store
            .execute(session_id, command, actor, "final-extraction")
            .await
        {
            tracing::warn!(session_id, error = %e, "cannot record a final extraction failure");
        }
    }

    /// The screening verdict in llm mode. The study's rules decide whatever they cover: a
    /// rule that disqualifies is final, and when every question has a rule the model is not
    /// asked. Otherwise the model (`judge_screening`) judges the questions no rule covers; on any
    /// failure, recorded, the rules' verdict stands. The model call, when there is one, is
    /// returned for the log.
    // Long by design: a priority list where the order is the behaviour: the study's rules decide
    // what they cover (a disqualification is final), a spent budget leaves the rules' verdict, then
    // one model call with one arm per kind of reply (the right tool with usable arguments, another
    // tool, a failed call), charged in every case; the rules' verdict worked out first is what
    // every failure falls back on.
    pub(super) async fn llm_judge_screening(
        &self,
        gateway: &ModelGateway,
        step: &Step<'_>,
        session: &Session,
        events: &[SessionEvent],
    ) -> (bool, String, Option<Provenance>) {
        let study = session.study().expect("a running session has its study");
        let screening = &study.study_config.screening;
        let (eligible, rules_rationale) = screening.evaluate(session.screening_answers());
        if !eligible || screening.unruled_questions().is_empty() {
            return (
                eligible,
                format!("By the study's rules: {rules_rationale}"),
                None,
            );
        }
        if let Some(spent) = super::budget::check(
            events,
            study,
            &self.budgets,
            step.session_id,
            step.now,
            false,
        ) {
            let rationale = format!(
                "{}: by the study's rules, {rules_rationale}",
                spent.reason()
            );
            return (eligible, rationale, None);
        }
        let Some(request) = prompt_records::screening_request(session) else {
            return (eligible, rules_rationale, None);
        };
        let prompt_chars = request.sent_chars();
        let timeout = Duration::from_secs(u64::from(study.model_config.timeout_seconds));
        let (verdict, turn) = match gateway.stream(request, timeout, |_, _| {}).await {
            Ok(turn) if turn.tool_name.as_deref() == Some("judge_screening") => {
                let args: serde_json::Value =
                    serde_json::from_str(&turn.arguments).unwrap_or_default();
                let verdict = match (
                    args["eligible"].as_bool(),
                    args["rationale"].as_str().map(str::trim),
                ) {
                    (Some(eligible), Some(rationale)) if !rationale.is_empty() => {
                        Ok((eligible, rationale.to_string()))
                    }
                    _ => Err((
                        "model_bad_arguments".to_string(),
                        format!("judge_screening arguments: {}", turn.arguments),
                    )),
                };
                (verdict, turn)
            }
            Ok(turn) => (
                Err((
                    "model_bad_arguments".to_string(),
                    format!("expected judge_screening, got {:?}", turn.tool_name),
                )),
                turn,
            ),
            Err((error, turn)) => (Err((error.code().to_string(), error.to_string())), turn),
        };
        let call = self.charge(
            &turn,
            step.session_id,
            study,
            prompt_records::screening_version_id(),
            prompt_chars,
            step.now,
        );
        match verdict {
            Ok((eligible, rationale)) => (eligible, rationale, Some(call)),
            Err((code, message)) => {
                self.record_error(step.session_id, step.run_id, "model", &code, &message)
                    .await;
                (
                    eligible,
                    format!("Fallback after a model failure ({code}): {rules_rationale}"),
                    None,
                )
            }
        }
    }

    /// The extraction of the participant's last input, asked for alongside the next step (one
    /// round trip for the participant). A failure is recorded (source `extraction`: the
    /// participant did not wait on it) and the turn goes on without it.
    // Long by design: the steps of one model call in order: the prompt, the call and its charge,
    // one arm per kind of reply (a failure, the extract_fields tool, any other tool), then the
    // checks on a parsed extraction (the latest turn cited, the schema, answers only, the input's
    // class); every failure is recorded under source `extraction` and the turn goes on without it.
    pub(super) async fn llm_extract(
        &self,
        gateway: &ModelGateway,
        step: &Step<'_>,
        session: &Session,
        conversation: &Conversation,
        events: &[SessionEvent],
    ) -> Option<Proposal> {
        let study = session.study()?;
        let listing = Listing::from_events(events);
        let mut transcript = prompt::transcript(session, events, &listing, conversation);
        transcript
            .push_str("\nRecord what the participant's latest input tells: call extract_fields.");
        let request = prompt_records::extraction_request(session, transcript)?;
        let prompt_chars = request.sent_chars();
        let timeout = Duration::from_secs(u64::from(study.model_config.timeout_seconds));
        let result = gateway.stream(request, timeout, |_, _| {}).await;
        let (turn, failure, provenance) = self.settle(
            result,
            step.session_id,
            study,
            prompt::prompt_version_id(),
            prompt_chars,
            step.now,
        );
        let parsed = match (failure, turn.tool_name.as_deref()) {
            (Some(f), _) => Err(f),
            (None, Some("extract_fields")) => tools::proposal_from_call(
                "extract_fields",
                &turn.arguments,
                provenance,
                format!(
                    "{} turns; extraction alongside the next step",
                    session.turn_count()
                ),
                &|t| listing.resolve(t),
            )
            .map_err(|e| ("model_bad_arguments".to_string(), e)),
            (None, other) => Err((
                "model_bad_arguments".to_string(),
                format!("expected extract_fields, got {other:?}"),
            )),
        };
        match parsed {
            Ok(mut proposal) => {
                cite_latest(&mut proposal.fields, session);
                let study = session.study().expect("a running session has its study");
                if let Err(e) = interview_session::field_values::check_model_fields(
                    &study.output_schema,
                    &proposal.fields,
                ) {
                    self.record_error(
                        step.session_id,
                        step.run_id,
                        "extraction",
                        "model_bad_arguments",
                        &e,
                    )
                    .await;
                    return None;
                }
                proposal.fields =
                    answers_only(proposal.fields, session, conversation, &listing, events);
                proposal.input_class = super::rules::input_class(session, conversation);
                Some(proposal)
            }
            Err((code, message)) => {
                self.record_error(step.session_id, step.run_id, "extraction", &code, &message)
                    .await;
                None
            }
        }
    }
}

/// An extraction during the interview is of the participant's latest input: a value the model
/// gave without citing a turn rests on that one (the guards want evidence for every value).
pub(super) fn cite_latest(fields: &mut [ExtractedField], session: &Session) {
    let latest = session.last_turn_id();
    for f in fields {
        if f.evidence_turn_ids.is_empty() && !f.value.is_null() {
            f.evidence_turn_ids.extend(latest);
        }
    }
}

/// Whether the participant's last input (a message, or a widget answered during the interview)
/// has not been extracted yet: then the extraction runs alongside the next step.
pub(super) fn extraction_due(session: &Session, events: &[SessionEvent]) -> bool {
    let has_fields = session
        .study()
        .is_some_and(|s| !s.output_schema.fields.is_empty());
    // Only where the guards would take an extraction now (not, say, after a confirmed summary).
    if !has_fields
        || !session.interviewing()
        || !super::streamed::accepted_as_is(
            session,
            interview_session::decision::AgentAction::ExtractFields,
            chrono::Utc::now(),
        )
    {
        return false;
    }
    // Widgets shown for an objective (consent and screening widgets have none).
    let objective_widgets: std::collections::HashSet<&str> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::InteractionRendered { interaction }
                if interaction.objective_id.is_some() =>
            {
                Some(interaction.interaction_id.as_str())
            }
            _ => None,
        })
        .collect();
    for e in events.iter().rev() {
        match &e.body {
            EventBody::ExtractionCompleted { .. } => return false,
            EventBody::ParticipantMessageCreated { .. } => return true,
            EventBody::InteractionSubmitted { interaction_id, .. } => {
                return objective_widgets.contains(interaction_id.as_str())
            }
            _ => {}
        }
    }
    false
}

/// What a model extracted, without what no answer supports (issue 29): a field whose cited
/// turns all answered another objective's questions, or are all replies that answer nothing — "Nothing more.", a question back, a refusal, an
/// end wish, a "Yes, that's right." to the summary — or whose value is such a reply itself, is
/// left out. A model may judge a message an answer the rules would not; it may not turn a
/// non-answer into data.
// Long by design: three lookups built once from the log (the replies to a proposed summary, the
// participant turns that answer nothing, the objective each answer answered), then one filter over
// the fields applying a rule list, each rule a few lines: declined only on the participant's word,
// not cited only from non-answers, no non-answer as the value, not resting on another objective's
// answers; split, the lookups would travel as arguments to every check.
fn answers_only(
    fields: Vec<ExtractedField>,
    session: &Session,
    conversation: &Conversation,
    listing: &Listing,
    events: &[SessionEvent],
) -> Vec<ExtractedField> {
    let Some(study) = session.study() else {
        return fields;
    };
    let (ends, confirms) = (
        &study.agent_config.end_phrases,
        &study.agent_config.confirm_phrases,
    );
    // The participant's replies to a proposed summary.
    let mut summary_replies = Vec::new();
    let mut proposed = false;
    for e in events {
        match &e.body {
            EventBody::SummaryProposed { .. } => proposed = true,
            EventBody::ParticipantMessageCreated { turn_id, .. } if proposed => {
                summary_replies.push(*turn_id);
                proposed = false;
            }
            _ => {}
        }
    }
    // Participant turns that answer nothing.
    let mut not_answers: Vec<(uuid::Uuid, &str)> = Vec::new();
    for line in listing.lines.iter().filter(|l| l.role == "participant") {
        let widget = line.text.starts_with("(widget ");
        let confirmation = summary_replies.contains(&line.id)
            && interview_session::text::matches_phrase(&line.text, confirms);
        if !widget && (confirmation || !classify(&line.text, ends).is_answer()) {
            not_answers.push((line.id, &line.text));
        }
    }
    // Which objective each answer answered (summary replies answer none): the conversation the
    // caller already folded, not a second fold of the log.
    let answered_for: std::collections::HashMap<uuid::Uuid, &str> = conversation
        .answers
        .iter()
        .filter_map(|a| Some((a.turn_id, a.objective_id.as_deref()?)))
        .collect();
    let objective_of = |field_id: &str| {
        study
            .output_schema
            .fields
            .iter()
            .find(|f| f.id == field_id)
            .map(|f| f.objective_id.clone())
    };
    let normalized = |t: &str| interview_session::text::normalize(t);
    fields
        .into_iter()
        // A declined or unknown field holds no value; its evidence is the reply that said so.
        .map(|mut f| {
            if !f.status.is_answered() {
                f.value = serde_json::Value::Null;
            }
            f
        })
        .filter(|f| {
            // Declined or unknown only on the participant's word: every cited turn a refusal
            // or a non-answer, and never over a value they did give.
            if !f.status.is_answered() {
                let on_their_word = !f.evidence_turn_ids.is_empty()
                    && f.evidence_turn_ids
                        .iter()
                        .all(|t| not_answers.iter().any(|(id, _)| id == t));
                let answered_before = session
                    .fields()
                    .get(&f.field_id)
                    .is_some_and(|known| known.status.is_answered() && !known.value.is_null());
                return on_their_word && !answered_before;
            }
            let cited_only_non_answers = !f.evidence_turn_ids.is_empty()
                && f.evidence_turn_ids
                    .iter()
                    .all(|t| not_answers.iter().any(|(id, _)| id == t));
            let value_is_non_answer = f.value.as_str().is_some_and(|v| {
                not_answers
                    .iter()
                    .any(|(_, text)| normalized(text) == normalized(v))
                    || !classify(v, ends).is_answer()
            });
            // A value resting only on answers to other objectives' questions is not this
            // field's ("Lists." said about a tool is no planning method).
            let elsewhere = !f.evidence_turn_ids.is_empty()
                && f.evidence_turn_ids.iter().all(|t| {
                    answered_for
                        .get(t)
                        .is_some_and(|o| Some(*o) != objective_of(&f.field_id).as_deref())
                });
            !cited_only_non_answers && !value_is_non_answer && !elsewhere
        })
        .collect()
}
