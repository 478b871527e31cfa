//! Webhook requests that are refused (`docs/webhooks.md`), on both stores: receivers at
//! private addresses or over plain http without `WEBHOOK_ALLOW_PRIVATE_ADDRESSES`, and a table
//! of bad requests — each answered with its status and code, and none of them changing what
//! the study's subscriptions are. Secrets are shown once.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{assert_error, json_of, Store, TestApp, RESEARCHER_TOKEN};
use crate::webhooks::{app, hooks, subscribe};

async fn receivers_at_private_addresses_are_refused_without_the_setting(store: Store) {
    let app = TestApp::spawn(store).await;
    let study = app.demo_study_id().await;
    for url in [
        "http://127.0.0.1:9/hook",
        "https://127.0.0.1:9/hook",
        "https://localhost/hook",
        "https://[::1]/hook",
        "https://10.0.0.7/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::ffff:192.168.0.1]/hook",
        "http://hooks.example.org/in",
    ] {
        let res = app
            .post(
                &hooks(&study),
                Some(RESEARCHER_TOKEN),
                &json!({"url": url, "events": ["session.completed"]}),
            )
            .await;
        let body = assert_error(res, StatusCode::UNPROCESSABLE_ENTITY, "webhook_url_refused").await;
        assert_eq!(body["error"]["details"]["field"], "url", "{url}");
    }
    let list = json_of(app.get(&hooks(&study), Some(RESEARCHER_TOKEN)).await).await;
    assert_eq!(list["webhooks"], json!([]));
}

// Long by design: a table of bad requests, one line each, sent in turn and each checked for its
// status and code, then the subscriptions compared with before.
async fn bad_webhook_requests_are_refused_and_change_nothing(store: Store) {
    let app = app(store, 3600).await;
    let study = app.demo_study_id().await;
    let url = "http://127.0.0.1:9/hook";
    let made = subscribe(&app, &study, url, &["session.completed"]).await;
    let one = format!("{}/{}", hooks(&study), made["hook_id"].as_str().unwrap());
    let analyst = {
        let res = app
            .post(
                "/api/researchers",
                Some(RESEARCHER_TOKEN),
                &json!({"name": "Ana", "roles": [{"study_id": study, "role": "analyst"}]}),
            )
            .await;
        json_of(res).await["token"].as_str().unwrap().to_string()
    };
    type Case<'a> = (Method, String, Option<&'a str>, Value, StatusCode, &'a str);
    let cases: Vec<Case> = vec![
        (
            Method::POST,
            hooks(&study),
            None,
            json!({"url": url, "events": ["session.completed"]}),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            Method::POST,
            hooks(&study),
            Some(&analyst),
            json!({"url": url, "events": ["session.completed"]}),
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            Method::POST,
            hooks(&study),
            Some(RESEARCHER_TOKEN),
            json!({"events": ["session.completed"]}),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            Method::POST,
            hooks(&study),
            Some(RESEARCHER_TOKEN),
            json!({"url": url, "events": []}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
        ),
        (
            Method::POST,
            hooks(&study),
            Some(RESEARCHER_TOKEN),
            json!({"url": url, "events": ["session.created"]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
        ),
        (
            Method::POST,
            hooks(&study),
            Some(RESEARCHER_TOKEN),
            json!({"url": url, "events": ["session.completed"], "secret": "hunter2"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
        ),
        (
            Method::POST,
            hooks(&study),
            Some(RESEARCHER_TOKEN),
            json!({"url": url, "events": ["session.completed"], "extra": 1}),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            Method::POST,
            hooks(&study),
            Some(RESEARCHER_TOKEN),
            json!({"url": "ftp://x/y", "events": ["session.completed"]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "webhook_url_refused",
        ),
        (
            Method::POST,
            hooks("no-such-study"),
            Some(RESEARCHER_TOKEN),
            json!({"url": url, "events": ["session.completed"]}),
            StatusCode::NOT_FOUND,
            "study_not_found",
        ),
        (
            Method::GET,
            hooks(&study),
            Some(&analyst),
            Value::Null,
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            Method::DELETE,
            format!("{}/nope", hooks(&study)),
            Some(RESEARCHER_TOKEN),
            Value::Null,
            StatusCode::NOT_FOUND,
            "webhook_not_found",
        ),
        (
            Method::DELETE,
            one.clone(),
            Some(&analyst),
            Value::Null,
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            Method::POST,
            format!("{one}/redeliver"),
            Some(RESEARCHER_TOKEN),
            json!({"from": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
        ),
        (
            Method::POST,
            format!("{one}/redeliver"),
            Some(RESEARCHER_TOKEN),
            json!({"from": "yesterday"}),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            Method::GET,
            format!("{one}/deliveries?limit=0"),
            Some(RESEARCHER_TOKEN),
            Value::Null,
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            Method::GET,
            format!("{}/nope/deliveries", hooks(&study)),
            Some(RESEARCHER_TOKEN),
            Value::Null,
            StatusCode::NOT_FOUND,
            "webhook_not_found",
        ),
    ];
    let before = json_of(app.get(&hooks(&study), Some(RESEARCHER_TOKEN)).await).await;
    for (method, path, token, body, status, code) in cases {
        let body = (!body.is_null()).then(|| body.to_string());
        let res = app.send(method.clone(), &path, token, body).await;
        let shown = format!("{method} {path}");
        let got = res.status();
        let error = json_of(res).await;
        assert_eq!(
            (got, error["error"]["code"].as_str().unwrap_or_default()),
            (status, code),
            "{shown}: {error}"
        );
    }
    let after = json_of(app.get(&hooks(&study), Some(RESEARCHER_TOKEN)).await).await;
    assert_eq!(before, after, "a refused request changed nothing");
    assert!(
        !after.to_string().contains(made["secret"].as_str().unwrap()),
        "secrets are shown once"
    );
    let res = app
        .send(Method::DELETE, &one, Some(RESEARCHER_TOKEN), None)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let gone = json_of(app.get(&hooks(&study), Some(RESEARCHER_TOKEN)).await).await;
    assert_eq!(gone["webhooks"], json!([]));
}

both_stores!(
    receivers_at_private_addresses_are_refused_without_the_setting,
    bad_webhook_requests_are_refused_and_change_nothing,
);
