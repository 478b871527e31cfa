//! Two server processes on one PostgreSQL database: live fan-out of commits across them
//! (LISTEN/NOTIFY), and one answer per turn whichever process runs the interviewer.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{Store, TestApp};
use crate::sse::SseClient;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_on_one_process_sees_commands_handled_by_another() {
    let a = TestApp::spawn(Store::Postgres).await;
    let b = a.spawn_on_same_database().await;
    let (session, token) = a.interviewing("demo").await;
    let url = a.url(&format!("/api/sessions/{session}/stream?token={token}"));
    let mut on_a = SseClient::new(a.client.get(url).send().await.unwrap());
    assert_eq!(on_a.next(Duration::from_secs(5)).await.unwrap().id, Some(1));
    on_a.drain(Duration::from_millis(300)).await;

    let res = b
        .post_message(&session, &token, "Sent through the other process")
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let frames = on_a
        .until(Duration::from_secs(5), |f| f.event == "message.completed")
        .await;
    assert_eq!(
        frames.last().unwrap().data["content"],
        "Sent through the other process"
    );
    // Process B's interviewer answers; A's subscriber sees it live.
    let frames = on_a
        .until(Duration::from_secs(5), |f| {
            f.event == "message.completed" && f.data["role"] == "assistant"
        })
        .await;
    assert!(!frames.last().unwrap().data["content"]
        .as_str()
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_running_the_interviewer_answer_once() {
    let a = TestApp::spawn(Store::Postgres).await;
    let b = a.spawn_on_same_database().await;
    let (session, token) = a.create_session("demo").await;
    let (x, y) = tokio::join!(
        a.state.interviewer.run(&session),
        b.state.interviewer.run(&session)
    );
    x.unwrap();
    y.unwrap();
    // A's own trigger (from the create request) raced these runs too.
    let s = a.run(&session).await;
    assert_eq!(s["decision_log"].as_array().unwrap().len(), 1, "{s}");
    a.answer(&session, &token, &s, json!({"accepted": true}))
        .await;
    let (x, y) = tokio::join!(
        a.state.interviewer.run(&session),
        b.state.interviewer.run(&session)
    );
    x.unwrap();
    y.unwrap();
    a.run(&session).await;
    let s = b.researcher_view(&session).await;
    let questions = s["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "assistant")
        .count();
    assert_eq!(questions, 1, "one opening question, not two: {s}");
}

/// The interviewer's answer on `stream` up to its completion, and what follows for a while: its
/// words (the deltas for it, none after its completion) and its text.
async fn words_before_completion(
    stream: &mut SseClient,
    mut frames: Vec<crate::sse::Frame>,
) -> (Vec<String>, String) {
    let done = frames
        .iter()
        .rposition(|f| f.event == "message.completed" && f.data["role"] == "assistant")
        .expect("the answer completed");
    frames.extend(stream.drain(Duration::from_millis(500)).await);
    let id = frames[done].data["message_id"].clone();
    let deltas = frames[..done]
        .iter()
        .filter(|f| f.event == "message.delta" && f.data["message_id"] == id)
        .map(|f| f.data["content"].as_str().unwrap().to_string())
        .collect();
    assert!(
        frames[done + 1..]
            .iter()
            .all(|f| !(f.event == "message.delta" && f.data["message_id"] == id)),
        "no word after the completion: {:?}",
        &frames[done..]
    );
    (
        deltas,
        frames[done].data["content"].as_str().unwrap().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rules_words_reach_a_stream_held_by_another_process() {
    let a = TestApp::spawn(Store::Postgres).await;
    let b = a.spawn_on_same_database().await;
    let (session, token) = a.interviewing("demo").await;
    let url = b.url(&format!("/api/sessions/{session}/stream?token={token}"));
    let mut on_b = SseClient::new(b.client.get(url).send().await.unwrap());
    on_b.drain(Duration::from_millis(300)).await;
    let res = a
        .post_message(
            &session,
            &token,
            "We write a list on Sunday and shop on Monday.",
        )
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let frames = on_b
        .until(Duration::from_secs(5), |f| {
            f.event == "message.completed" && f.data["role"] == "assistant"
        })
        .await;
    let (deltas, said) = words_before_completion(&mut on_b, frames).await;
    assert!(deltas.len() > 1, "the words came in pieces: {deltas:?}");
    assert_eq!(deltas.concat(), said);
}

// Long by design: one turn across two processes in order — the stream opened on B, the model
// paced, the message posted to A, then the first words timed against the completion and the
// words checked against the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_words_reach_a_stream_held_by_another_process_as_they_stream() {
    use crate::scripted_model::Reply;
    let llm = crate::llm::Llm::start(Store::Postgres).await;
    let b = llm.app.spawn_on_same_database().await;
    let (session, token, _) = llm
        .consented(vec![Reply::Tool(
            "ask_question",
            json!({"objective_id": "planning_habits", "message": "How do you usually plan the week's shopping?", "rationale": "open"}),
        )])
        .await;
    let url = b.url(&format!("/api/sessions/{session}/stream?token={token}"));
    let mut on_b = SseClient::new(b.client.get(url).send().await.unwrap());
    on_b.drain(Duration::from_millis(300)).await;
    let question = "Which shop do you go to first, and what makes you pick it over the others?";
    llm.model.push(Reply::Tool(
        "ask_question",
        json!({"objective_id": "planning_habits", "message": question, "rationale": "probe"}),
    ));
    // Slowly enough that the words arrive well before the message completes.
    llm.model
        .pace(Duration::from_millis(50), Duration::from_millis(30));
    let res = llm
        .app
        .post_message(
            &session,
            &token,
            "I write a list on my phone every Sunday evening.",
        )
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    // The first words arrive while the model still streams, well before the completion.
    let mut frames = on_b
        .until(Duration::from_secs(10), |f| f.event == "message.delta")
        .await;
    let first_word = std::time::Instant::now();
    frames.extend(
        on_b.until(Duration::from_secs(10), |f| {
            f.event == "message.completed" && f.data["role"] == "assistant"
        })
        .await,
    );
    assert!(
        first_word.elapsed() >= Duration::from_millis(300),
        "the words streamed, not sent at the end: {:?}",
        first_word.elapsed()
    );
    let (deltas, said) = words_before_completion(&mut on_b, frames).await;
    assert_eq!(said, question);
    assert!(deltas.len() > 1, "the words came in pieces: {deltas:?}");
    assert_eq!(deltas.concat(), question);
}

/// A server alone on the database announces no commit (each NOTIFY serializes the committing
/// transactions on one lock through their flush): not until another process says hello, and
/// then at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_server_announces_commits_only_once_another_process_listens() {
    let a = TestApp::spawn(Store::Postgres).await;
    let interview_projections::Db::Postgres(pool) = &a.state.db else {
        unreachable!("a PostgreSQL app")
    };
    let mut listener = sqlx::postgres::PgListener::connect_with(pool)
        .await
        .unwrap();
    listener
        .listen(interview_projections::projector::NOTIFY_CHANNEL)
        .await
        .unwrap();
    let peers = a.state.projector.peers().clone();
    let alone = tokio::time::timeout(Duration::from_secs(10), async {
        while peers.may_listen() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(alone.is_ok(), "the server never found itself alone");
    let (session, token) = a.interviewing("demo").await;
    a.post_message(&session, &token, "Nobody else listens")
        .await;
    a.run(&session).await;
    let heard = tokio::time::timeout(Duration::from_millis(500), listener.recv()).await;
    assert!(
        heard.is_err(),
        "a lone server announced {:?}",
        heard.unwrap()
    );

    // A process starting to listen says hello; the next commit is announced.
    sqlx::query("SELECT pg_notify('interview_processes', 'another')")
        .execute(pool)
        .await
        .unwrap();
    let told = tokio::time::timeout(Duration::from_secs(5), async {
        while !peers.may_listen() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(told.is_ok(), "the hello was not heard");
    a.post_message(&session, &token, "Now somebody listens")
        .await;
    let note = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("the commit was announced")
        .unwrap();
    assert!(note.payload().starts_with(&session), "{}", note.payload());
}
