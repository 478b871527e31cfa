//! The scripted participants: who they are, what they say, and what each of their messages is
//! (an answer, a non-answer, a question back, an end wish, a correction) — labelled here, by
//! the persona's author, not by the runtime's classifier, so the properties judge the runtime
//! against an independent reading.

/// Which study a persona is interviewed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Study {
    /// The bundled demo (English): two text objectives, a likert, a single choice.
    Demo,
    /// The demo in Chinese (`eval/studies/demo-zh.json`).
    DemoZh,
    /// Every widget type once (English, `examples/every-type-study.json`).
    EveryType,
}

/// What a participant's message is, as its author means it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Answer,
    /// "Nothing more", "不知道": says nothing about the question.
    NonAnswer,
    /// "What do you mean?": asks about the question instead of answering it.
    QuestionBack,
    /// Asks, in the participant's own words, to stop.
    EndWish,
    /// Declines to answer ("I'd rather not say").
    Refusal,
    /// A reply to the summary correcting it.
    Correction,
    /// A reply to the summary confirming it.
    Confirmation,
}

/// One scripted participant.
#[derive(Debug, Clone)]
pub struct Persona {
    pub name: &'static str,
    pub study: Study,
    /// Said once before the first answer to each objective's opening question.
    pub asks_back: Option<&'static str>,
    /// The first answer to each objective, in the study's order (the last repeats).
    pub answers: &'static [&'static str],
    /// Replies to follow-up questions, in order (the last repeats), with what they are.
    pub follow_ups: &'static [(&'static str, Kind)],
    /// After this many answers, this end wish instead of the next reply.
    pub stops: Option<(usize, &'static str)>,
    /// Skips every widget instead of answering it.
    pub skips_widgets: bool,
    /// The reply to the summary.
    pub at_summary: (&'static str, Kind),
    /// A probe of this trigger must follow the first answer (its author meant it so).
    pub expects_probe: Option<&'static str>,
    /// Words the summary's correction replaces (must not stay in the field it corrected).
    pub corrected_away: Option<&'static str>,
    /// Words the correction brings (must be in a field and in the summary).
    pub corrected_to: Option<&'static str>,
    /// Instead of answering this objective (by index) at all: these words, what they are, and
    /// the status its text fields must then have (`refused`, `unknown`).
    pub declines: Option<(usize, &'static str, Kind, &'static str)>,
}

const CONFIRM_EN: (&str, Kind) = ("Yes, that's right.", Kind::Confirmation);
const CONFIRM_ZH: (&str, Kind) = ("对，没错。", Kind::Confirmation);

const PLAN_EN: &str = "I write a shopping list on my phone every Sunday evening, mostly from the meals I plan for the week.";
const PAIN_EN: &str =
    "Vegetables go off before I use them, so I throw away spinach almost every week.";
const TOOL_EN: &str = "Probably help with knowing what is already in the fridge.";
const PLAN_ZH: &str = "我每周日晚上在手机上列购物清单，按一周要做的菜来写。";
const PAIN_ZH: &str = "蔬菜经常放坏，几乎每周都要扔掉一些菠菜。";
const TOOL_ZH: &str = "最想知道冰箱里已经有什么。";

/// Every persona the suite runs.
// Long by design: the persona table, one entry per persona.
pub fn all() -> Vec<Persona> {
    let base = |name, study, answers| Persona {
        name,
        study,
        asks_back: None,
        answers,
        follow_ups: &[],
        stops: None,
        skips_widgets: false,
        at_summary: CONFIRM_EN,
        expects_probe: None,
        corrected_away: None,
        corrected_to: None,
        declines: None,
    };
    let en = &[PLAN_EN, PAIN_EN, TOOL_EN][..];
    let zh = &[PLAN_ZH, PAIN_ZH, TOOL_ZH][..];
    vec![
        Persona {
            follow_ups: &[
                ("Nothing more.", Kind::NonAnswer),
                ("No idea, really.", Kind::NonAnswer),
            ],
            ..base("terse", Study::Demo, &["A list.", "Waste.", "Lists."])
        },
        Persona {
            follow_ups: &[(
                "Well, honestly, I think it is mostly that, you know, we usually go on Saturday morning to the big supermarket near the station and I try to remember what the kids asked for during the week, which is not easy at all.",
                Kind::Answer,
            )],
            ..base(
                "verbose",
                Study::Demo,
                &[
                    "Well, honestly, I think it is mostly that, you know, every Sunday evening I sit down with my partner and we look at the calendar for the week, see who is home for dinner, and then I write a list on my phone from the meals we pick.",
                    "Well, to be honest the most frustrating part is that vegetables go off before we get to them, so every week I end up throwing away spinach or lettuce, which feels like a waste of money and food.",
                    "I suppose, if I had to choose, knowing what is already in the fridge and the cupboards before I go shopping would help me the most.",
                ],
            )
        },
        Persona {
            asks_back: Some("What do you mean by that?"),
            follow_ups: &[("Nothing more.", Kind::NonAnswer)],
            ..base("asks-back", Study::Demo, en)
        },
        Persona {
            follow_ups: &[("That's all, nothing more to add.", Kind::NonAnswer)],
            expects_probe: Some("contradiction"),
            ..base(
                "contradicts",
                Study::Demo,
                &[
                    "I never plan anything, I just go to the shop. Actually I always write a detailed plan every Sunday.",
                    PAIN_EN,
                    TOOL_EN,
                ],
            )
        },
        Persona {
            follow_ups: &[("Nothing more.", Kind::NonAnswer)],
            expects_probe: Some("strong_emotion"),
            ..base(
                "emotional",
                Study::Demo,
                &[
                    PLAN_EN,
                    "I absolutely hate throwing food away, it makes me furious every single week.",
                    TOOL_EN,
                ],
            )
        },
        Persona {
            follow_ups: &[("Nothing more.", Kind::NonAnswer)],
            at_summary: (
                "Correction: I don't use my phone, I plan with a paper notebook.",
                Kind::Correction,
            ),
            corrected_away: Some("on my phone"),
            corrected_to: Some("paper notebook"),
            ..base("corrects-summary", Study::Demo, en)
        },
        Persona {
            stops: Some((
                1,
                "Sorry, I'd rather not continue, can we wrap up now please?",
            )),
            ..base("wants-to-stop", Study::Demo, en)
        },
        Persona {
            follow_ups: &[("Nothing more.", Kind::NonAnswer)],
            skips_widgets: true,
            ..base("skips-widgets", Study::Demo, en)
        },
        Persona {
            follow_ups: &[(
                "Every Saturday morning I compare prices in two stores.",
                Kind::Answer,
            )],
            ..base(
                "every-widget",
                Study::EveryType,
                &["Every Saturday morning I compare prices in two stores."],
            )
        },
        Persona {
            follow_ups: &[("没有了。", Kind::NonAnswer), ("不知道。", Kind::NonAnswer)],
            at_summary: CONFIRM_ZH,
            ..base("terse-zh", Study::DemoZh, zh)
        },
        Persona {
            asks_back: Some("你是什么意思？"),
            follow_ups: &[("没有了。", Kind::NonAnswer)],
            at_summary: CONFIRM_ZH,
            ..base("asks-back-zh", Study::DemoZh, zh)
        },
        Persona {
            declines: Some((1, "I'd rather not say.", Kind::Refusal, "refused")),
            follow_ups: &[("Nothing more.", Kind::NonAnswer)],
            ..base("refuses", Study::Demo, en)
        },
        Persona {
            declines: Some((0, "不知道。", Kind::NonAnswer, "unknown")),
            follow_ups: &[("没有了。", Kind::NonAnswer)],
            at_summary: CONFIRM_ZH,
            ..base("does-not-know-zh", Study::DemoZh, zh)
        },
        // Said otherwise than any list in the code has it.
        Persona {
            asks_back: Some("Sorry, what do you mean exactly?"),
            declines: Some((1, "Honestly, I'd rather not talk about that.", Kind::Refusal, "refused")),
            follow_ups: &[("I really don't know.", Kind::NonAnswer)],
            ..base(
                "paraphrases",
                Study::Demo,
                &[
                    "On Sunday I cook a big batch of soup, portion it and wrap it up, and I write the shopping list from that.",
                    PAIN_EN,
                    TOOL_EN,
                ],
            )
        },
        Persona {
            asks_back: Some("啥意思？"),
            declines: Some((0, "我也说不清楚。", Kind::NonAnswer, "unknown")),
            follow_ups: &[("我真的不知道。", Kind::NonAnswer)],
            at_summary: CONFIRM_ZH,
            ..base("paraphrases-zh", Study::DemoZh, zh)
        },
        Persona {
            stops: Some((1, "我说完了，不想继续了。")),
            at_summary: CONFIRM_ZH,
            ..base("wants-to-stop-zh", Study::DemoZh, zh)
        },
    ]
}

/// Where a persona is in its script.
#[derive(Debug, Default)]
pub struct Script {
    /// The objective whose opening question was asked last, by index.
    objective: Option<usize>,
    /// The opening question was asked and not answered yet.
    awaiting_first_answer: bool,
    asked_back: Vec<usize>,
    answers_given: usize,
    follow_ups_given: usize,
    stopped: bool,
}

impl Persona {
    /// The reply to the `nth` summary (from 0): its own first, then a confirmation.
    pub fn summary_reply(&self, nth: usize) -> (&'static str, Kind) {
        match (nth, self.study) {
            (0, _) => self.at_summary,
            (_, Study::DemoZh) => CONFIRM_ZH,
            _ => CONFIRM_EN,
        }
    }

    /// The next message, given the interviewer's last words and which objective's opening
    /// question they are (if they are one).
    pub fn reply(&self, script: &mut Script, opening_of: Option<usize>) -> (&'static str, Kind) {
        if let Some(i) = opening_of {
            script.objective = Some(i);
            script.awaiting_first_answer = true;
        }
        if let Some((after, wish)) = self.stops {
            if script.answers_given >= after && !script.stopped {
                script.stopped = true;
                return (wish, Kind::EndWish);
            }
        }
        let objective = script.objective.unwrap_or(0);
        if let Some((declined, words, kind, _)) = self.declines {
            if script.awaiting_first_answer && declined == objective {
                script.awaiting_first_answer = false;
                return (words, kind);
            }
        }
        if script.awaiting_first_answer {
            if let Some(back) = self.asks_back {
                if !script.asked_back.contains(&objective) {
                    script.asked_back.push(objective);
                    return (back, Kind::QuestionBack);
                }
            }
            script.awaiting_first_answer = false;
            script.answers_given += 1;
            let answer = self.answers[objective.min(self.answers.len() - 1)];
            return (answer, Kind::Answer);
        }
        if self.follow_ups.is_empty() {
            script.answers_given += 1;
            return (
                self.answers[objective.min(self.answers.len() - 1)],
                Kind::Answer,
            );
        }
        let i = script.follow_ups_given.min(self.follow_ups.len() - 1);
        script.follow_ups_given += 1;
        let (text, kind) = self.follow_ups[i];
        if kind == Kind::Answer {
            script.answers_given += 1;
        }
        (text, kind)
    }
}
