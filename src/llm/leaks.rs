//! What else a participant never reads of a model's text (issue 30): the study's internal notes
//! repeated verbatim, and links, images or markup the study's own text does not contain.
//!
//! - **Internal text** is what the study's author wrote for the interviewer, not for the
//!   participant: `agent.instructions`, each objective's `description`, each output field's
//!   `description`, each widget's `research_intent`. A model text that repeats six words of it
//!   in a row (ten characters of Chinese or Japanese), or one of its code-like tokens
//!   (`INTERNAL-NOTE-7731`: letters and digits together), is refused — unless the same words are
//!   also in what participants read anyway (title, description, consent, questions, choices,
//!   probe hints, which the rules interviewer asks as they are).
//! - **Links and markup**: no `<tag`, no Markdown link or image (`](`, `![`), no spreadsheet
//!   formula (`=HYPERLINK(`), and no URL the study's participant-facing text does not itself
//!   contain. A page that renders Markdown (assistant-ui, behind the AG-UI endpoint) would
//!   otherwise fetch an image URL — a way out for anything the model read.
//!
//! Both work on the text as [`super::visible`] folds it (ASCII lower case, whitespace runs one
//! space) and, while it streams, hold back only what could still become a refusal: the words
//! that begin an internal span, a URL until it ends, a trailing `<` or `]`.

use std::collections::HashSet;

use interview_session::interaction::{InteractionKind, InteractionSpec};
use interview_session::study::PinnedStudy;

/// Why a text may not be shown: the term found (for the log; never the text itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// A span of internal text this many words long (no CJK character in it) is a copy.
const SPAN_WORDS: usize = 6;
/// …or this many tokens when it has CJK characters (each one a token).
const SPAN_CJK: usize = 10;

/// The study's internal spans and the links it may show.
#[derive(Debug, Clone, Default)]
pub struct Leaks {
    /// Internal spans (their tokens joined by one space), none of them in the public text.
    spans: HashSet<String>,
    /// Every span, sorted: a streaming text whose end begins one is held.
    starts: Vec<String>,
    /// The span lengths to look for.
    lengths: Vec<usize>,
    /// Code-like tokens of the internal text that the public text does not have.
    pub(super) codes: Vec<String>,
    /// URLs the study's participant-facing text contains (folded).
    links: HashSet<String>,
}

fn cjk(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30FF}' | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}'
        | '\u{AC00}'..='\u{D7AF}' | '\u{F900}'..='\u{FAFF}')
}

/// The words of a folded text with their byte ranges: runs of letters and digits, each CJK
/// character a word of its own.
fn words(folded: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in folded.char_indices() {
        let end = i + c.len_utf8();
        if cjk(c) {
            if let Some(s) = start.take() {
                out.push((s, i));
            }
            out.push((i, end));
        } else if c.is_alphanumeric() {
            start.get_or_insert(i);
        } else if let Some(s) = start.take() {
            out.push((s, i));
        }
    }
    if let Some(s) = start {
        out.push((s, folded.len()));
    }
    out
}

fn joined(folded: &str, words: &[(usize, usize)]) -> String {
    let parts: Vec<&str> = words.iter().map(|&(s, e)| &folded[s..e]).collect();
    parts.join(" ")
}

fn has_cjk(folded: &str, words: &[(usize, usize)]) -> bool {
    words.iter().any(|&(s, _)| folded[s..].starts_with(cjk))
}

/// The spans of a folded text: every window of the length its script asks for. (A note shorter
/// than that is too close to what an interviewer says anyway — "main reason for leaving" — to
/// refuse; its code-like tokens still are.)
fn spans(folded: &str) -> Vec<String> {
    let ws = words(folded);
    let mut out = Vec::new();
    for n in [SPAN_WORDS, SPAN_CJK] {
        let wanted = |w: &[(usize, usize)]| has_cjk(folded, w) == (n == SPAN_CJK);
        if ws.len() < n {
            continue;
        }
        out.extend(
            ws.windows(n)
                .filter(|w| wanted(w))
                .map(|w| joined(folded, w)),
        );
    }
    out
}

/// Letters and digits together (`internal-note-7731`, `q3x9`): a code, not a word.
fn codes(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| c.is_whitespace() || ",;:()[]{}\"'!?".contains(c))
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|t| {
            t.len() >= 5
                && t.chars().any(|c| c.is_ascii_digit())
                && t.chars().any(|c| c.is_ascii_alphabetic())
        })
        .map(str::to_ascii_lowercase)
}

/// Where the URL that contains byte `at` of `folded` starts and ends.
fn url_around(folded: &str, at: usize) -> (usize, usize) {
    let b = folded.as_bytes();
    let mut start = at;
    while start > 0 && (b[start - 1].is_ascii_alphanumeric() || b"+.-".contains(&b[start - 1])) {
        start -= 1;
    }
    let end = folded[at..]
        .find(|c: char| c.is_whitespace() || "<>\"'`)]".contains(c))
        .map_or(folded.len(), |i| at + i);
    (start, end)
}

/// The URLs of a folded text (schemes a page would follow, and bare `www.` addresses).
fn urls(folded: &str) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for marker in [
        "://",
        "www.",
        "javascript:",
        "data:",
        "mailto:",
        "vbscript:",
    ] {
        for (i, _) in folded.match_indices(marker) {
            // "your data: …" is a sentence; "data:image/…" is an address.
            let next = folded[i + marker.len()..].chars().next();
            if marker.ends_with(':') && next.is_none_or(char::is_whitespace) {
                continue;
            }
            let found = url_around(folded, i);
            if !out.iter().any(|&(s, e)| s <= found.0 && found.1 <= e) {
                out.push(found);
            }
        }
    }
    out
}

/// What a widget shows: its question and every label.
pub(crate) fn widget_texts(spec: &InteractionSpec) -> Vec<&str> {
    shown_texts(&spec.prompt, &spec.kind)
}

/// What a widget of `kind` asking `prompt` shows: the prompt and every label.
pub(crate) fn shown_texts<'a>(prompt: &'a str, kind: &'a InteractionKind) -> Vec<&'a str> {
    let mut texts = vec![prompt];
    match kind {
        InteractionKind::SingleChoice { options }
        | InteractionKind::MultipleChoice { options, .. }
        | InteractionKind::Ranking { options } => {
            texts.extend(options.iter().map(|c| c.label.as_str()))
        }
        InteractionKind::Likert { labels, .. } => texts.extend(labels.iter().map(String::as_str)),
        InteractionKind::Consent { consent_text, .. } => texts.push(consent_text),
        InteractionKind::Rating { .. }
        | InteractionKind::YesNo {}
        | InteractionKind::FreeText { .. } => {}
    }
    texts
}

/// What OpenAI-compatible servers' chat templates wrap the tools in, which a small model reads
/// as part of its prompt and echoes like the runtime's own instructions: SmolLM2-135M behind
/// llama-cpp-python's `chatml-function-calling` wrote "You have access to the following
/// functions: list, request.add(function), …" as a question.
const SERVER_TEMPLATE_TEXTS: [&str; 4] = [
    // llama-cpp-python, `chatml-function-calling`.
    "You have access to the following functions. You can respond to users messages with either a single message or one or more function calls. To respond with a message begin the message with 'message:', use the following format: message: <message>. To respond with one or more function calls begin the message with 'functions.<function_name>:', use the following format",
    // llama-cpp-python, `functionary` and the legacy function-calling formats.
    "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, detailed, and polite answers to the user's questions. The assistant calls functions with appropriate input when necessary",
    // Hermes-style templates (vLLM, Ollama, llama.cpp's generic tool format).
    "You are a function calling AI model. You are provided with function signatures within tools XML tags. You may call one or more functions to assist with the user query. Don't make assumptions about what values to plug into functions.",
    "You have access to the following tools. Respond with a JSON object containing the tool to call and its arguments.",
];

impl Leaks {
    pub fn for_study(study: &PinnedStudy, fold: impl Fn(&str) -> String) -> Self {
        let config = &study.study_config;
        let mut public: Vec<&str> = vec![&config.title, &config.description, &config.consent.text];
        public.extend(config.interviewer_name.as_deref());
        public.extend(config.completion_redirect_url.as_deref());
        let mut internal: Vec<&str> = vec![&study.agent_config.instructions];
        internal.extend(super::prompt::runtime_texts());
        internal.extend(SERVER_TEMPLATE_TEXTS);
        for o in &config.objectives {
            public.extend([o.title.as_str(), o.opening_question.as_str()]);
            public.extend(o.probe_hints.iter().map(String::as_str));
            internal.push(&o.description);
            if let Some(spec) = &o.interaction {
                public.extend(widget_texts(spec));
                internal.push(&spec.research_intent);
            }
        }
        for q in &config.screening.questions {
            public.extend(widget_texts(&q.spec));
            internal.push(&q.spec.research_intent);
        }
        internal.extend(
            study
                .output_schema
                .fields
                .iter()
                .map(|f| f.description.as_str()),
        );

        let public: Vec<String> = public.iter().map(|t| fold(t)).collect();
        let public_spans: HashSet<String> = public.iter().flat_map(|t| spans(t)).collect();
        let public_words: String = public.join(" ");
        let mut leaks = Leaks {
            links: public
                .iter()
                .flat_map(|t| urls(t).into_iter().map(|(s, e)| t[s..e].to_string()))
                .collect(),
            ..Default::default()
        };
        for text in internal.iter().map(|t| fold(t)) {
            for span in spans(&text) {
                if public_spans.contains(&span) {
                    continue;
                }
                let n = span.split(' ').count();
                if !leaks.lengths.contains(&n) {
                    leaks.lengths.push(n);
                }
                leaks.spans.insert(span);
            }
            for code in codes(&text) {
                if !public_words.contains(&code) && !leaks.codes.contains(&code) {
                    leaks.codes.push(code);
                }
            }
        }
        leaks.starts = leaks.spans.iter().cloned().collect();
        leaks.starts.sort_unstable();
        leaks
    }

    /// How much of `folded` may be shown now (all of it once `complete`), or why none of it may.
    pub fn check(&self, folded: &str, complete: bool) -> Result<usize, Refused> {
        let mut safe = folded.len();
        safe = safe.min(self.markup(folded, complete)?);
        safe = safe.min(self.links(folded, complete)?);
        safe = safe.min(self.internal(folded, complete)?);
        Ok(safe)
    }

    fn markup(&self, folded: &str, complete: bool) -> Result<usize, Refused> {
        let b = folded.as_bytes();
        let mut safe = folded.len();
        for (i, _) in folded.match_indices('<') {
            match b.get(i + 1) {
                Some(c) if c.is_ascii_alphabetic() || b"/!?".contains(c) => {
                    return Err(Refused("markup".into()))
                }
                None if !complete => safe = i, // it may still become a tag
                _ => {}
            }
        }
        // Inline links and images, reference links (`[x][1]`) and their definitions (`[1]: …`;
        // the text is folded, so a line break reads as a space).
        let definition = folded.match_indices("]:").any(|(i, _)| {
            folded[..i]
                .rfind('[')
                .is_some_and(|open| !folded[open + 1..i].contains([']', ' ']))
        });
        if folded.contains("](") || folded.contains("![") || folded.contains("][") || definition {
            return Err(Refused("a markdown link or image".into()));
        }
        // A formula a spreadsheet would run: `=NAME(`.
        for (i, _) in folded.match_indices('=') {
            let name = folded[i + 1..].trim_start();
            let letters = name.bytes().take_while(u8::is_ascii_alphabetic).count();
            if letters > 0 && name.as_bytes().get(letters) == Some(&b'(') {
                return Err(Refused("a formula".into()));
            }
        }
        if !complete && (folded.ends_with(']') || folded.ends_with('!')) {
            safe = safe.min(folded.len() - 1);
        }
        Ok(safe)
    }

    fn links(&self, folded: &str, complete: bool) -> Result<usize, Refused> {
        let mut safe = folded.len();
        for (start, end) in urls(folded) {
            if end == folded.len() && !complete {
                safe = safe.min(start); // it may still grow
            } else if !self
                .links
                .contains(folded[start..end].trim_end_matches(['.', ',']))
            {
                return Err(Refused("a link".into()));
            }
        }
        Ok(safe)
    }

    fn internal(&self, folded: &str, complete: bool) -> Result<usize, Refused> {
        if self.starts.is_empty() {
            return Ok(folded.len());
        }
        let ws = words(folded);
        // A word still being written is not a word yet.
        let open = (!complete && ws.last().is_some_and(|&(_, e)| e == folded.len()))
            .then(|| ws[ws.len() - 1]);
        let done = &ws[..ws.len() - usize::from(open.is_some())];
        for &n in &self.lengths {
            if done
                .windows(n)
                .any(|w| self.spans.contains(&joined(folded, w)))
            {
                return Err(Refused("the study's internal text".into()));
            }
        }
        if complete {
            return Ok(folded.len());
        }
        // The end may begin a span: hold it from its first word. Every tail length is tried,
        // the longest first, and the open word counts as the start of a word, so what was
        // held once stays held until it cannot be a span any more: the shown text never
        // shrinks.
        let longest = self.lengths.iter().max().copied().unwrap_or(0);
        for k in (0..longest.min(done.len() + 1)).rev() {
            let tail = &done[done.len() - k..];
            let mut candidate = joined(folded, tail);
            if let Some((s, e)) = open {
                if k > 0 {
                    candidate.push(' ');
                }
                candidate.push_str(&folded[s..e]);
            }
            let Some(start) = tail.first().or(open.as_ref()).map(|w| w.0) else {
                continue;
            };
            if self.begins_a_span(&candidate) {
                return Ok(start);
            }
        }
        Ok(folded.len())
    }

    /// Whether some internal span starts with `text` (words joined by one space).
    fn begins_a_span(&self, text: &str) -> bool {
        let i = self.starts.partition_point(|s| s.as_str() < text);
        self.starts.get(i).is_some_and(|s| s.starts_with(text))
    }
}

#[cfg(test)]
#[path = "leaks_tests.rs"]
mod tests;
