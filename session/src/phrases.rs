//! The few sentences the runtime itself says to participants (when a guard rewrites a decision,
//! or for consent), in the study's locale. Plain words: no internal terms (FR-04-27).

use crate::decision::ConcludeReason;

fn zh(locale: &str) -> bool {
    locale.to_ascii_lowercase().starts_with("zh")
}

pub fn consent_prompt(locale: &str) -> &'static str {
    if zh(locale) {
        "开始之前，请阅读以下说明并告诉我们你是否同意参加。"
    } else {
        "Before we start, please read this and tell us whether you agree to take part."
    }
}

pub fn confirm_question(locale: &str) -> &'static str {
    if zh(locale) {
        "这样总结对吗？如果有需要补充或更正的地方，请直接告诉我。"
    } else {
        "Did I get that right? If anything is missing or wrong, just tell me."
    }
}

pub fn summary_intro(locale: &str) -> &'static str {
    if zh(locale) {
        "我来简单总结一下你分享的内容："
    } else {
        "Here is a short summary of what you shared:"
    }
}

pub fn nothing_to_summarize(locale: &str) -> &'static str {
    if zh(locale) {
        "我们这次没有聊到太多内容。"
    } else {
        "We did not get to talk about much this time."
    }
}

pub fn closing(locale: &str, reason: ConcludeReason) -> &'static str {
    use ConcludeReason::*;
    match (zh(locale), reason) {
        (true, ConsentDeclined) => "没问题，感谢你的时间。你的回答不会被记录，你现在可以关闭这个页面。",
        (false, ConsentDeclined) => "No problem, thank you for your time. Nothing more will be recorded; you can close this page now.",
        (true, ScreeningFailed) => "感谢你的回答！这次的研究面向的人群和你的情况不太一样，所以我们就到这里。谢谢你的时间。",
        (false, ScreeningFailed) => "Thank you for your answers! This study is looking for people in a different situation, so we will stop here. Thanks for your time.",
        (true, SafetyTriggered) => "谢谢你告诉我。我们先在这里停下来。如果你正在经历困难，请联系你信任的人或当地的专业支持机构。",
        (false, SafetyTriggered) => "Thank you for telling me. Let's stop here for now. If you are going through something difficult, please reach out to someone you trust or a local support service.",
        (true, _) => "非常感谢你的分享，这次访谈到这里就结束了。",
        (false, _) => "Thank you so much for sharing your experience. That is the end of the interview.",
    }
}

/// "Yes" / "No" in the study's language.
pub fn yes_no(locale: &str, yes: bool) -> &'static str {
    match (zh(locale), yes) {
        (true, true) => "是",
        (true, false) => "否",
        (false, true) => "Yes",
        (false, false) => "No",
    }
}

/// The `error` StreamEvent's text when the participant waited on a failure the runtime then
/// worked around (a model that failed, stalled or broke off).
pub fn delayed(locale: &str) -> &'static str {
    if zh(locale) {
        "抱歉，刚才稍有延误。我们继续。"
    } else {
        "Sorry for the wait. Let's carry on."
    }
}
