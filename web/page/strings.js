// The participant page: one interview over the REST routes and the session's event stream.
// The stream is the source of truth: the page rebuilds the conversation from it (it replays
// from the start, and EventSource resumes with Last-Event-ID after a drop), so a reload
// restores the transcript and any pending question. The token stays in this browser's storage.
//
// The script is the files of web/page/ joined in this order into one classic script, served as
// /interview/assets/app.js (src/http/routes/page.rs): strings.js (the page's words, English and
// Chinese), basics.js, stream.js, widgets.js, end.js, start.js (which starts the page). One file
// on the wire, one scope: later files use what earlier ones declare.
"use strict";

const boot = JSON.parse(document.getElementById("boot").textContent);
const zh = (boot.locale || "").toLowerCase().startsWith("zh");
const T = zh
  ? {
      start: "开始访谈", thinking: "正在思考…", send: "发送", placeholder: "输入你的回答…",
      end: "结束访谈", endConfirm: "确定要结束访谈吗？", submit: "提交", skip: "跳过",
      agree: "我同意", decline: "我不同意", yes: "是", no: "否", up: "上移", down: "下移",
      answered: "已回答", skipped: "已跳过", agreed: "同意", declined: "不同意", answerAbove: "请先回答上面的问题。",
      doneTitle: "谢谢你的参与！", saved: "你的回答和上面的总结已经保存。", ended: "访谈已结束。", continue: "继续",
      reconnecting: "连接中断，正在重新连接…", failed: "出了点问题，请稍后再试。",
      invalid: "这个回答不太符合要求，请检查后再提交。", gone: "这次访谈已经结束。",
      missing: "找不到这次访谈。请用开始访谈时的浏览器打开链接。", notFound: "这个链接没有通向任何研究，请检查链接，或回到邀请你的页面重新打开。",
      full: "这项研究的名额已满，谢谢你的关注。", paused: "这项研究暂时不接受新的参与者。",
      taken: "你已经有一次正在进行的访谈，请在开始它的地方继续。", badLink: "这个链接不完整或已失效，请回到邀请你的页面重新打开。",
      chooseBetween: (a, b) => `请选择 ${a} 到 ${b} 项`, messageLabel: "你的回答", returnLink: "返回",
      rankHint: "拖动或用按钮调整顺序", closePage: "现在可以关闭这个页面了。",
      confirmYes: "没错", confirmAdd: "补充一点", addPlaceholder: "想补充或更正什么？", finish: "完成",
      nearLimit: (p) => `已用 ${p}% 的长度上限`, tooLong: "这段回答太长了，请缩短一些再发送。",
      chosen: (n, max) => `已选 ${n} 项（最多 ${max} 项）`, characters: (n, max) => `${n} / ${max} 字`,
      tooLongField: (max) => `最多 ${max} 个字，请缩短一些。`, notChosen: "还没有选择",
      newer: "有新消息 ↓", notSent: "没有发出去 — 点这里重试", interviewer: "访谈者：", you: "你：",
      minutes: (n) => `大约需要 ${n} 分钟`, withName: (name) => `与你交谈的是 ${name}。`, named: (name) => `${name}：`,
      withdraw: "撤回并删除我的回答", withdrawConfirm: "确定要退出这项研究，并从研究中删除你在这次访谈中的回答吗？删除后无法恢复。",
      erased: "你的回答已删除。", erasedDetail: "你在这次访谈中说过、选过的内容已从这项研究中删除，研究人员再也看不到。",
      reference: (id) => `编号：${id}`,
      ownWords: "都不合适——用我自己的话回答", ownWordsPlaceholder: "用你自己的话说说…",
      offline: "网络已断开。恢复后会自动发送。",
    }
  : {
      start: "Start the interview", thinking: "Thinking…", send: "Send", placeholder: "Type your answer…",
      end: "End interview", endConfirm: "Do you want to end the interview?", submit: "Submit", skip: "Skip",
      agree: "I agree", decline: "I do not agree", yes: "Yes", no: "No", up: "Move up", down: "Move down",
      answered: "Answered", skipped: "Skipped", agreed: "Agreed", declined: "Declined", answerAbove: "Please answer the question above first.",
      doneTitle: "Thank you for taking part!", saved: "Your answers and the summary above have been saved.", ended: "The interview has ended.", continue: "Continue",
      reconnecting: "Connection lost — reconnecting…", failed: "Something went wrong. Please try again in a moment.",
      invalid: "That answer doesn't fit — please check it and try again.", gone: "This interview has already ended.",
      missing: "We can't find this interview. Please open the link in the browser you started it in.",
      notFound: "This link doesn't lead to a study. Please check it, or open it again from where you were invited.", full: "This study has all the participants it needs — thank you for your interest.",
      paused: "This study isn't taking new participants right now.",
      taken: "You already have an interview in progress for this study — please continue it where you started it.",
      badLink: "This link is incomplete or no longer valid. Please go back to where you were invited and open it again.",
      chooseBetween: (a, b) => `Choose ${a} to ${b}`,
      messageLabel: "Your answer", returnLink: "Continue", rankHint: "Drag, or use the buttons, to reorder",
      closePage: "You can close this page now.",
      confirmYes: "Yes, that's right", confirmAdd: "Add something", addPlaceholder: "What would you add or correct?",
      finish: "Finish",
      nearLimit: (p) => `${p}% of the length limit used`, tooLong: "This answer is too long — please shorten it before sending.",
      chosen: (n, max) => `${n} of at most ${max} chosen`, characters: (n, max) => `${n} / ${max} characters`,
      tooLongField: (max) => `At most ${max} characters — please shorten it.`, notChosen: "Not chosen yet",
      newer: "New message ↓", notSent: "Not sent — tap to retry", interviewer: "Interviewer: ", you: "You: ",
      minutes: (n) => `About ${n} minute${n === 1 ? "" : "s"}`, withName: (name) => `You'll be talking with ${name}.`,
      named: (name) => `${name}: `,
      withdraw: "Withdraw and delete my answers",
      withdrawConfirm: "Withdraw from this study and delete your answers from this interview? This cannot be undone.",
      erased: "Your answers have been deleted.",
      erasedDetail: "What you said and chose in this interview has been deleted from the study, and the researchers can no longer see it.",
      reference: (id) => `Reference: ${id}`,
      ownWords: "None of these fit — answer in my own words", ownWordsPlaceholder: "Say it in your own words…",
      offline: "You're offline. We'll send it as soon as you're back.",
    };
