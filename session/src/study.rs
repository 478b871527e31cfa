//! Study definitions and the pinned configuration a session runs under.
//!
//! A researcher writes one [`StudyDefinition`] (JSON). Publishing splits it into four versioned
//! documents — study config, agent config, output schema, model config — each identified by a
//! hash of its canonical JSON, so republishing an unchanged part keeps its id. A session copies
//! all four into its `session.created` event ([`PinnedStudy`]): later republishing never changes
//! a running session, and a session's own events are enough to replay it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::hash::{canonical_json, sha256_hex};
use crate::interaction::{InteractionKind, InteractionSpec};

/// What a researcher submits to create or replace a study draft.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyDefinition {
    pub title: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_locale")]
    pub locale: String,
    /// The public link's slug; generated from the title at first publish when absent.
    #[serde(default)]
    pub public_slug: Option<String>,
    pub consent: Consent,
    #[serde(default)]
    pub screening: Screening,
    pub objectives: Vec<Objective>,
    pub output_schema: OutputSchema,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub agent: AgentConfig,
    #[serde(default)]
    pub model: ModelConfig,
    #[serde(default)]
    pub completion_redirect_url: Option<String>,
    /// One open session per `participant_ref` at a time (the default): a second
    /// create for a reference with an open session answers 409 with that session's id.
    /// `false` lets one reference hold several sessions at once.
    #[serde(default = "yes")]
    pub one_active_session_per_participant: bool,
    /// About how long the interview takes, shown before consent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_minutes: Option<u32>,
    /// The name the interviewer goes by on the page (and for screen readers), if the study gives
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interviewer_name: Option<String>,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn default_locale() -> String {
    "en".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consent {
    pub text: String,
    pub version: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Screening {
    #[serde(default)]
    pub questions: Vec<ScreeningQuestion>,
    #[serde(default)]
    pub rules: Vec<ScreeningRule>,
}

/// A screening question, asked as an interaction of the given kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScreeningQuestion {
    pub id: String,
    #[serde(flatten)]
    pub spec: InteractionSpec,
}

/// A rule on one screening answer: the participant qualifies only if the answer is one of
/// `qualify_if`, and is screened out if it is one of `disqualify_if`. Exactly one is given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScreeningRule {
    pub question_id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qualify_if: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disqualify_if: Vec<Value>,
}

impl Screening {
    /// Questions no rule judges: what a model may decide on (the rules decide the rest).
    pub fn unruled_questions(&self) -> Vec<&ScreeningQuestion> {
        self.questions
            .iter()
            .filter(|q| !self.rules.iter().any(|r| r.question_id == q.id))
            .collect()
    }

    /// The study's qualify/disqualify rules applied to the answers (`None` = skipped):
    /// eligibility and a rationale a researcher can read. A skipped answer never qualifies.
    pub fn evaluate(
        &self,
        answers: &std::collections::BTreeMap<String, Option<Value>>,
    ) -> (bool, String) {
        let matches = |answer: &Value, values: &[Value]| match answer {
            Value::Array(items) => items.iter().any(|i| values.contains(i)),
            other => values.contains(other),
        };
        let mut reasons = Vec::new();
        for rule in &self.rules {
            let answer = answers.get(&rule.question_id).cloned().flatten();
            let shown = answer
                .as_ref()
                .map_or("no answer".to_string(), |a| a.to_string());
            if !rule.qualify_if.is_empty()
                && !answer
                    .as_ref()
                    .is_some_and(|a| matches(a, &rule.qualify_if))
            {
                reasons.push(format!(
                    "{}: {shown} is not one of the qualifying answers",
                    rule.question_id
                ));
            }
            if answer
                .as_ref()
                .is_some_and(|a| matches(a, &rule.disqualify_if))
            {
                reasons.push(format!("{}: {shown} disqualifies", rule.question_id));
            }
        }
        if reasons.is_empty() {
            (
                true,
                format!("All {} screening rules are met.", self.rules.len()),
            )
        } else {
            (false, reasons.join("; "))
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Must,
    Should,
    Could,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Objective {
    pub id: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    pub priority: Priority,
    pub opening_question: String,
    #[serde(default)]
    pub probe_hints: Vec<String>,
    #[serde(default = "default_max_probe_count")]
    pub max_probe_count: u32,
    #[serde(default)]
    pub interaction: Option<InteractionSpec>,
}

fn default_max_probe_count() -> u32 {
    3
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSchema {
    pub fields: Vec<OutputField>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(strum::EnumIter))]
#[serde(rename_all = "snake_case")]
#[derive(strum::AsRefStr)]
#[strum(serialize_all = "snake_case")]
pub enum FieldType {
    String,
    Number,
    Integer,
    Boolean,
    StringList,
    Enum,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputField {
    pub id: String,
    #[serde(rename = "type")]
    pub field_type: FieldType,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub required: bool,
    pub objective_id: String,
    /// Allowed values of an `enum` field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// How the summary the participant confirms names this field ("How you plan"), in the
    /// study's language. Without one the summary shows the participant's own words (or the
    /// option, or the answer to the question) with no name. Serialized only when set, so schemas
    /// published before it keep their version id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub participant_label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub max_turn_count: u32,
    pub max_duration_minutes: u32,
    pub confidence_threshold: f64,
    pub idle_ttl_minutes: u32,
    /// At most this many sessions (previews aside); further creates answer 409 `study_full`.
    /// Serialized only when set, so studies published before it existed keep their version id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<u32>,
    /// Days an ended session's data is kept; then the sweeper erases it (`docs/privacy.md`).
    /// Fractions count (`0.5` is twelve hours); `0` erases at the first sweep after the end.
    /// Unset: kept until someone erases it. Serialized only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<f64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_turn_count: 20,
            max_duration_minutes: 30,
            confidence_threshold: 0.7,
            idle_ttl_minutes: 24 * 60,
            max_sessions: None,
            retention_days: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentMode {
    /// The built-in rules interviewer: deterministic, no model needed.
    #[default]
    Rules,
    /// An LLM through an OpenAI-compatible API, guarded by the aggregate.
    Llm,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    pub mode: AgentMode,
    pub instructions: String,
    pub prompt_version: String,
    /// Whole-message phrases that mean "I want to stop" (compared trimmed, case- and
    /// punctuation-insensitively; never as substrings).
    pub end_phrases: Vec<String>,
    /// Case-insensitive substrings of participant text that end the session for safety.
    pub safety_patterns: Vec<String>,
    /// Whole-message replies that confirm a proposed summary (compared like end phrases).
    pub confirm_phrases: Vec<String>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            mode: AgentMode::Rules,
            instructions: String::new(),
            prompt_version: "v1".into(),
            end_phrases: [
                "结束",
                "我说完了",
                "stop",
                "end",
                "i'm done",
                "im done",
                "i am done",
                "that's all",
                "thats all",
                "that is all",
                "end the interview",
            ]
            .map(String::from)
            .to_vec(),
            safety_patterns: Vec::new(),
            confirm_phrases: crate::text::AFFIRMATIVE_PHRASES
                .iter()
                .map(|p| p.to_string())
                .collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    pub model: String,
    pub temperature: f64,
    pub max_output_tokens: u32,
    pub timeout_seconds: u32,
    /// Tokens (prompt and completion) the model may spend on one session; past it the rules
    /// interviewer decides. `None`: no per-session budget. Serialized only when set, so
    /// configs published before it existed keep their version id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens_per_session: Option<u64>,
    /// What the model costs, for the study overview's spend per completed interview. Serialized
    /// only when set, so configs published before it existed keep their version id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_per_million_tokens: Option<ModelPrice>,
    /// US dollars the model may spend on one session, at `price_per_million_tokens` (which it
    /// needs); past it the rules interviewer decides. Serialized only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_usd_per_session: Option<f64>,
    /// US dollars the model may spend on this study per UTC day on one server process, at
    /// `price_per_million_tokens`. Serialized only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_usd_per_day: Option<f64>,
}

/// US dollars per million tokens, prompt and completion apart. (Dollars per million tokens are
/// micro-dollars per token, which is how the overview counts spend: in whole micro-dollars.)
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    pub prompt: f64,
    pub completion: f64,
}

impl ModelPrice {
    /// What these tokens cost, in whole micro-dollars (rounded up: a budget is never overrun
    /// by rounding).
    pub fn micro_usd(&self, prompt_tokens: u64, completion_tokens: u64) -> u64 {
        (self.prompt * prompt_tokens as f64 + self.completion * completion_tokens as f64).ceil()
            as u64
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            model: "gpt-4o-mini".into(),
            temperature: 0.3,
            max_output_tokens: 600,
            timeout_seconds: 30,
            max_tokens_per_session: None,
            price_per_million_tokens: None,
            max_usd_per_session: None,
            max_usd_per_day: None,
        }
    }
}

/// The study-config document: everything about the study that is not the agent, the output
/// schema or the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyConfig {
    pub title: String,
    pub description: String,
    pub locale: String,
    pub consent: Consent,
    pub screening: Screening,
    pub objectives: Vec<Objective>,
    pub limits: Limits,
    pub completion_redirect_url: Option<String>,
    /// Serialized only when off, so studies published before it existed keep their version id.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub one_active_session_per_participant: bool,
    /// These two serialized only when set, for the same reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_minutes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interviewer_name: Option<String>,
}

/// The four version ids a session pins (FR-04-2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigVersions {
    pub study_config_version_id: String,
    pub agent_config_version_id: String,
    pub output_schema_version_id: String,
    pub model_config_version_id: String,
}

/// A published study as a session pins it: ids and full documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PinnedStudy {
    pub study_id: String,
    pub public_slug: String,
    pub config_versions: ConfigVersions,
    pub study_config: StudyConfig,
    pub agent_config: AgentConfig,
    pub output_schema: OutputSchema,
    pub model_config: ModelConfig,
}

/// The four documents of a definition with their content-addressed ids.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionedDocuments {
    pub config_versions: ConfigVersions,
    pub study_config: StudyConfig,
    pub agent_config: AgentConfig,
    pub output_schema: OutputSchema,
    pub model_config: ModelConfig,
}

impl VersionedDocuments {
    pub fn pin(self, study_id: &str, public_slug: &str) -> PinnedStudy {
        PinnedStudy {
            study_id: study_id.to_string(),
            public_slug: public_slug.to_string(),
            config_versions: self.config_versions,
            study_config: self.study_config,
            agent_config: self.agent_config,
            output_schema: self.output_schema,
            model_config: self.model_config,
        }
    }
}

/// `prefix_` + the first 128 bits of the SHA-256 of the document's canonical JSON.
pub fn content_id<T: Serialize>(prefix: &str, doc: &T) -> String {
    let mut value = serde_json::to_value(doc).expect("configuration documents serialize");
    // As a store gives it back (see `hash::normalize_numbers`).
    crate::hash::normalize_numbers(&mut value);
    let digest = sha256_hex(canonical_json(&value).as_bytes());
    format!("{prefix}_{}", &digest[..32])
}

/// A definition that breaks a rule: `field` is a path such as `objectives[1].id`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct DefinitionError {
    pub field: String,
    pub message: String,
}

/// Objectives and output fields a study may have: each is a row of every completed interview's
/// study overview counts, and a line of every prompt.
const MAX_OBJECTIVES: usize = 100;
const MAX_FIELDS: usize = 500;
/// Characters an objective or field id may have (ids key the overview's rows and CSV columns).
const MAX_ID_CHARS: usize = 100;

/// A non-empty id of at most [`MAX_ID_CHARS`] characters.
fn short_id(field: &str, id: &str) -> Result<(), DefinitionError> {
    non_empty(field, id)?;
    if id.chars().count() > MAX_ID_CHARS {
        return Err(invalid(field, format!("at most {MAX_ID_CHARS} characters")));
    }
    Ok(())
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> DefinitionError {
    DefinitionError {
        field: field.into(),
        message: message.into(),
    }
}

/// Public slugs: 2–63 characters of `a-z`, `0-9` and `-`, starting with a letter or digit.
pub fn is_valid_slug(slug: &str) -> bool {
    let bytes = slug.as_bytes();
    (2..=63).contains(&bytes.len())
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

impl StudyDefinition {
    /// Checks every rule a well-formed definition must also meet.
    // Long by design: the checks of one rule list, each a few lines, in the order of the
    // definition's fields; the larger groups (screening, objectives, output schema, limits) already
    // call their own checks.
    pub fn validate(&self) -> Result<(), DefinitionError> {
        non_empty("title", &self.title)?;
        non_empty("locale", &self.locale)?;
        if let Some(slug) = &self.public_slug {
            if !is_valid_slug(slug) {
                return Err(invalid(
                    "public_slug",
                    "use 2-63 lower-case letters, digits and dashes",
                ));
            }
        }
        non_empty("consent.text", &self.consent.text)?;
        non_empty("consent.version", &self.consent.version)?;
        self.validate_screening()?;
        self.validate_objectives()?;
        self.validate_output_schema()?;
        self.validate_limits()?;
        let m = &self.model;
        if !(0.0..=2.0).contains(&m.temperature) {
            return Err(invalid("model.temperature", "must be between 0 and 2"));
        }
        if !(1..=300).contains(&m.timeout_seconds) {
            return Err(invalid(
                "model.timeout_seconds",
                "must be between 1 and 300",
            ));
        }
        non_empty("model.model", &m.model)?;
        if m.max_tokens_per_session == Some(0) {
            return Err(invalid(
                "model.max_tokens_per_session",
                "must be at least 1 (leave it out for no budget)",
            ));
        }
        if let Some(price) = m.price_per_million_tokens {
            for (field, usd) in [("prompt", price.prompt), ("completion", price.completion)] {
                if !(0.0..=10_000.0).contains(&usd) {
                    return Err(invalid(
                        format!("model.price_per_million_tokens.{field}"),
                        "US dollars per million tokens, between 0 and 10000",
                    ));
                }
            }
        }
        for (field, usd) in [
            ("model.max_usd_per_session", m.max_usd_per_session),
            ("model.max_usd_per_day", m.max_usd_per_day),
        ] {
            match usd {
                Some(_) if m.price_per_million_tokens.is_none() => {
                    return Err(invalid(field, "needs model.price_per_million_tokens"))
                }
                Some(usd) if !(0.000_001..=1_000_000.0).contains(&usd) => {
                    return Err(invalid(
                        field,
                        "US dollars, more than 0 and at most 1000000",
                    ))
                }
                _ => {}
            }
        }
        if let Some(url) = &self.completion_redirect_url {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(invalid("completion_redirect_url", "must be an http(s) URL"));
            }
        }
        if self
            .estimated_minutes
            .is_some_and(|m| !(1..=600).contains(&m))
        {
            return Err(invalid(
                "estimated_minutes",
                "must be between 1 and 600 (leave it out to show none)",
            ));
        }
        if let Some(name) = &self.interviewer_name {
            non_empty("interviewer_name", name)?;
            if name.chars().count() > 60 {
                return Err(invalid("interviewer_name", "at most 60 characters"));
            }
        }
        Ok(())
    }

    fn validate_screening(&self) -> Result<(), DefinitionError> {
        let questions = &self.screening.questions;
        for (i, q) in questions.iter().enumerate() {
            let at = format!("screening.questions[{i}]");
            non_empty(&format!("{at}.id"), &q.id)?;
            if questions[..i].iter().any(|p| p.id == q.id) {
                return Err(invalid(
                    format!("{at}.id"),
                    format!("duplicate question id {:?}", q.id),
                ));
            }
            q.spec.validate(&at).map_err(|(f, m)| invalid(f, m))?;
        }
        for (i, rule) in self.screening.rules.iter().enumerate() {
            let at = format!("screening.rules[{i}]");
            if !questions.iter().any(|q| q.id == rule.question_id) {
                return Err(invalid(
                    format!("{at}.question_id"),
                    format!("no screening question has id {:?}", rule.question_id),
                ));
            }
            if rule.qualify_if.is_empty() == rule.disqualify_if.is_empty() {
                return Err(invalid(
                    at,
                    "give exactly one of qualify_if and disqualify_if",
                ));
            }
        }
        Ok(())
    }

    fn validate_objectives(&self) -> Result<(), DefinitionError> {
        if self.objectives.is_empty() {
            return Err(invalid(
                "objectives",
                "a study needs at least one objective",
            ));
        }
        if self.objectives.len() > MAX_OBJECTIVES {
            return Err(invalid(
                "objectives",
                format!("at most {MAX_OBJECTIVES} objectives"),
            ));
        }
        for (i, o) in self.objectives.iter().enumerate() {
            let at = format!("objectives[{i}]");
            short_id(&format!("{at}.id"), &o.id)?;
            if self.objectives[..i].iter().any(|p| p.id == o.id) {
                return Err(invalid(
                    format!("{at}.id"),
                    format!("duplicate objective id {:?}", o.id),
                ));
            }
            non_empty(&format!("{at}.title"), &o.title)?;
            non_empty(&format!("{at}.opening_question"), &o.opening_question)?;
            if o.max_probe_count > 10 {
                return Err(invalid(
                    format!("{at}.max_probe_count"),
                    "must be between 0 and 10",
                ));
            }
            if let Some(spec) = &o.interaction {
                if matches!(spec.kind, InteractionKind::Consent { .. }) {
                    return Err(invalid(
                        format!("{at}.interaction.type"),
                        "consent is asked by the runtime, not by an objective",
                    ));
                }
                spec.validate(&format!("{at}.interaction"))
                    .map_err(|(f, m)| invalid(f, m))?;
            }
        }
        Ok(())
    }

    fn validate_output_schema(&self) -> Result<(), DefinitionError> {
        let fields = &self.output_schema.fields;
        if fields.len() > MAX_FIELDS {
            return Err(invalid(
                "output_schema.fields",
                format!("at most {MAX_FIELDS} fields"),
            ));
        }
        for (i, f) in fields.iter().enumerate() {
            let at = format!("output_schema.fields[{i}]");
            short_id(&format!("{at}.id"), &f.id)?;
            if fields[..i].iter().any(|p| p.id == f.id) {
                return Err(invalid(
                    format!("{at}.id"),
                    format!("duplicate field id {:?}", f.id),
                ));
            }
            if !self.objectives.iter().any(|o| o.id == f.objective_id) {
                return Err(invalid(
                    format!("{at}.objective_id"),
                    format!("no objective has id {:?}", f.objective_id),
                ));
            }
            if f.field_type == FieldType::Enum && f.options.is_empty() {
                return Err(invalid(
                    format!("{at}.options"),
                    "an enum field needs options",
                ));
            }
        }
        Ok(())
    }

    fn validate_limits(&self) -> Result<(), DefinitionError> {
        let l = &self.limits;
        if !(1..=500).contains(&l.max_turn_count) {
            return Err(invalid(
                "limits.max_turn_count",
                "must be between 1 and 500",
            ));
        }
        if !(1..=1440).contains(&l.max_duration_minutes) {
            return Err(invalid(
                "limits.max_duration_minutes",
                "must be between 1 and 1440",
            ));
        }
        if !(0.0..=1.0).contains(&l.confidence_threshold) {
            return Err(invalid(
                "limits.confidence_threshold",
                "must be between 0 and 1",
            ));
        }
        if !(1..=43_200).contains(&l.idle_ttl_minutes) {
            return Err(invalid(
                "limits.idle_ttl_minutes",
                "must be between 1 and 43200",
            ));
        }
        if l.max_sessions == Some(0) {
            return Err(invalid("limits.max_sessions", "must be at least 1"));
        }
        if l.retention_days
            .is_some_and(|d| !(0.0..=36_500.0).contains(&d))
        {
            return Err(invalid(
                "limits.retention_days",
                "must be between 0 and 36500 (days)",
            ));
        }
        Ok(())
    }

    /// Splits a (validated) definition into its four content-addressed documents.
    pub fn versioned_documents(&self) -> VersionedDocuments {
        let study_config = StudyConfig {
            title: self.title.clone(),
            description: self.description.clone(),
            locale: self.locale.clone(),
            consent: self.consent.clone(),
            screening: self.screening.clone(),
            objectives: self.objectives.clone(),
            limits: self.limits.clone(),
            completion_redirect_url: self.completion_redirect_url.clone(),
            one_active_session_per_participant: self.one_active_session_per_participant,
            estimated_minutes: self.estimated_minutes,
            interviewer_name: self.interviewer_name.clone(),
        };
        let config_versions = ConfigVersions {
            study_config_version_id: content_id("scv", &study_config),
            agent_config_version_id: content_id("acv", &self.agent),
            output_schema_version_id: content_id("osv", &self.output_schema),
            model_config_version_id: content_id("mcv", &self.model),
        };
        VersionedDocuments {
            config_versions,
            study_config,
            agent_config: self.agent.clone(),
            output_schema: self.output_schema.clone(),
            model_config: self.model.clone(),
        }
    }
}

fn non_empty(field: &str, value: &str) -> Result<(), DefinitionError> {
    if value.trim().is_empty() {
        Err(invalid(field, "must not be empty"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definition() -> StudyDefinition {
        serde_json::from_value(serde_json::json!({
            "title": "T",
            "consent": {"text": "We record answers.", "version": "1"},
            "objectives": [
                {"id": "a", "title": "A", "priority": "must", "opening_question": "Tell me?"},
                {"id": "b", "title": "B", "priority": "could", "opening_question": "And?",
                 "interaction": {"type": "likert", "prompt": "Rate it", "scale": 5}}
            ],
            "output_schema": {"fields": [
                {"id": "f", "type": "string", "objective_id": "a", "required": true}
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn screening_rules_qualify_and_disqualify() {
        let screening: Screening = serde_json::from_value(serde_json::json!({
            "questions": [
                {"id": "shops", "type": "yes_no", "prompt": "Do you buy groceries?"},
                {"id": "freq", "type": "single_choice", "prompt": "How often?",
                 "options": [{"id": "weekly", "label": "Weekly"}, {"id": "never", "label": "Never"}]}
            ],
            "rules": [
                {"question_id": "shops", "disqualify_if": [false]},
                {"question_id": "freq", "qualify_if": ["weekly"]}
            ]
        }))
        .unwrap();
        let answers = |shops: Option<Value>, freq: Option<Value>| {
            std::collections::BTreeMap::from([
                ("shops".to_string(), shops),
                ("freq".to_string(), freq),
            ])
        };
        let yes = |v: &str| Some(Value::String(v.into()));
        assert!(
            screening
                .evaluate(&answers(Some(Value::Bool(true)), yes("weekly")))
                .0
        );
        assert!(
            !screening
                .evaluate(&answers(Some(Value::Bool(false)), yes("weekly")))
                .0
        );
        let (eligible, why) = screening.evaluate(&answers(Some(Value::Bool(true)), yes("never")));
        assert!(!eligible && why.contains("freq"), "{why}");
        assert!(
            !screening
                .evaluate(&answers(Some(Value::Bool(true)), None))
                .0,
            "a skip never qualifies"
        );
    }

    #[test]
    fn a_minimal_definition_is_valid_and_gets_defaults() {
        let d = definition();
        d.validate().unwrap();
        assert_eq!(d.objectives[0].max_probe_count, 3);
        assert_eq!(d.limits, Limits::default());
    }

    #[test]
    fn unchanged_parts_keep_their_ids_and_changed_parts_get_new_ones() {
        let before = definition().versioned_documents().config_versions;
        let mut changed = definition();
        changed.model.temperature = 0.9;
        let after = changed.versioned_documents().config_versions;
        assert_eq!(
            before.study_config_version_id,
            after.study_config_version_id
        );
        assert_eq!(
            before.agent_config_version_id,
            after.agent_config_version_id
        );
        assert_eq!(
            before.output_schema_version_id,
            after.output_schema_version_id
        );
        assert_ne!(
            before.model_config_version_id,
            after.model_config_version_id
        );
    }

    // Long by design: a table of broken definitions, one row per rule: the edit that breaks it and
    // the field the error must name.
    #[test]
    fn rule_breaking_definitions_name_the_field() {
        type Mutation = fn(&mut StudyDefinition);
        let cases: Vec<(Mutation, &str)> = vec![
            (|d| d.objectives[1].id = "a".into(), "objectives[1].id"),
            (
                |d| d.output_schema.fields[0].objective_id = "zz".into(),
                "output_schema.fields[0].objective_id",
            ),
            (
                |d| d.objectives[0].max_probe_count = 11,
                "objectives[0].max_probe_count",
            ),
            (|d| d.title = " ".into(), "title"),
            (
                |d| d.limits.confidence_threshold = 1.5,
                "limits.confidence_threshold",
            ),
            (|d| d.public_slug = Some("Bad Slug".into()), "public_slug"),
            (
                |d| d.model.max_tokens_per_session = Some(0),
                "model.max_tokens_per_session",
            ),
            (|d| d.objectives.clear(), "objectives"),
            (|d| d.objectives[0].id = "o".repeat(101), "objectives[0].id"),
            (
                |d| d.output_schema.fields[0].id = "f".repeat(101),
                "output_schema.fields[0].id",
            ),
            (
                |d| {
                    let o = d.objectives[0].clone();
                    d.objectives = (0..101)
                        .map(|i| Objective {
                            id: format!("o{i}"),
                            ..o.clone()
                        })
                        .collect();
                },
                "objectives",
            ),
            (
                |d| {
                    d.model.price_per_million_tokens = Some(ModelPrice {
                        prompt: f64::NAN,
                        completion: 1.0,
                    })
                },
                "model.price_per_million_tokens.prompt",
            ),
            (
                |d| {
                    d.model.price_per_million_tokens = Some(ModelPrice {
                        prompt: 1.0,
                        completion: -1.0,
                    })
                },
                "model.price_per_million_tokens.completion",
            ),
            (
                |d| d.model.max_usd_per_session = Some(1.0),
                "model.max_usd_per_session",
            ),
            (
                |d| {
                    d.model.price_per_million_tokens = Some(ModelPrice {
                        prompt: 1.0,
                        completion: 1.0,
                    });
                    d.model.max_usd_per_day = Some(0.0);
                },
                "model.max_usd_per_day",
            ),
            (|d| d.estimated_minutes = Some(0), "estimated_minutes"),
            (
                |d| d.interviewer_name = Some("  ".into()),
                "interviewer_name",
            ),
            (
                |d| d.interviewer_name = Some("n".repeat(61)),
                "interviewer_name",
            ),
        ];
        for (mutate, field) in cases {
            let mut d = definition();
            mutate(&mut d);
            assert_eq!(d.validate().unwrap_err().field, field);
        }
    }
}
