//! Single sign-on (issue 34): researchers' JWTs from a stand-in OpenID Connect provider serving
//! its keys (JWKS) over real HTTP, on both stores — the roles in the token decide, a token with
//! the wrong audience, an expired one and one signed by an unknown key are 401, a rotated key is
//! picked up, and every refusal is in the access log. The fixtures' keys (`fixtures/sso/`) are
//! for these tests only.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{web, App, HttpResponse, HttpServer};
use jsonwebtoken::{EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{assert_error, json_of, paths, Store, TestApp, RESEARCHER_TOKEN};
use interview_runtime::settings::Oidc;

const ISSUER: &str = "https://idp.example.test";
const AUDIENCE: &str = "interview-runtime";

fn jwk(kid: &str) -> Value {
    let text = match kid {
        "k1" => include_str!("fixtures/sso/k1.jwk.json"),
        "k2" => include_str!("fixtures/sso/k2.jwk.json"),
        _ => include_str!("fixtures/sso/k3.jwk.json"),
    };
    serde_json::from_str(text).unwrap()
}

fn pem(kid: &str) -> &'static [u8] {
    match kid {
        "k1" => include_bytes!("fixtures/sso/k1.pem"),
        "k2" => include_bytes!("fixtures/sso/k2.pem"),
        _ => include_bytes!("fixtures/sso/k3.pem"),
    }
}

/// The stand-in provider: serves whatever key set it holds now at `/jwks.json`.
async fn provider(keys: Arc<Mutex<Value>>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = HttpServer::new(move || {
        let keys = keys.clone();
        App::new().route(
            "/jwks.json",
            web::get().to(move || {
                let set = keys.lock().unwrap().clone();
                async move { HttpResponse::Ok().json(set) }
            }),
        )
    })
    .workers(1)
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    format!("http://127.0.0.1:{port}/jwks.json")
}

/// A JWT signed by `kid`, with these claims over the usual ones (issuer, audience, an hour); a
/// claim given as `null` is left out.
fn token(kid: &str, claims: Value) -> String {
    let now = chrono::Utc::now().timestamp();
    let mut body = json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": "u-123", "preferred_username": "sam@example.org",
        "iat": now, "exp": now + 3600,
    });
    for (k, v) in claims.as_object().unwrap() {
        match v {
            Value::Null => {
                body.as_object_mut().unwrap().remove(k);
            }
            _ => body[k] = v.clone(),
        }
    }
    let mut header = Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(
        &header,
        &body,
        &EncodingKey::from_rsa_pem(pem(kid)).unwrap(),
    )
    .unwrap()
}

// Long by design: one provider and one server, the accepted token's reach checked, then each kind
// of refused token, then a key rotation, then the access log read back for all of them.
async fn researchers_sign_in_with_the_organisations_provider(store: Store) {
    let keys = Arc::new(Mutex::new(json!({ "keys": [jwk("k1")] })));
    let jwks_url = provider(keys.clone()).await;
    let app = TestApp::spawn_with(store, |s| {
        s.oidc = Some(Oidc {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            jwks_url,
            name_claim: None,
            roles_claim: "interview_roles".into(),
        })
    })
    .await;
    let studies = json_of(app.get("/api/studies", Some(RESEARCHER_TOKEN)).await).await;
    let a = studies["studies"][0]["study_id"]
        .as_str()
        .unwrap()
        .to_string();
    let roles = json!({ "interview_roles": [format!("{a}:viewer")] });

    // Signed by the provider's key, naming a role: the role decides.
    let sam = token("k1", roles.clone());
    assert_eq!(
        app.get(&paths::study(&a), Some(&sam)).await.status(),
        StatusCode::OK
    );
    let res = app
        .get(&format!("/api/studies/{a}/results.csv"), Some(&sam))
        .await;
    let body = assert_error(res, StatusCode::FORBIDDEN, "forbidden").await;
    assert_eq!(body["error"]["details"]["required_role"], "analyst");
    let listed = json_of(app.get("/api/studies", Some(&sam)).await).await;
    assert_eq!(listed["studies"].as_array().unwrap().len(), 1);

    // Refused: another audience, expired, a key the provider does not publish, a token whose
    // header claims another algorithm (HS256 keyed with the public key), a made-up signature.
    let now = chrono::Utc::now().timestamp();
    let other_audience = token(
        "k1",
        json!({"aud": "someone-else", "interview_roles": roles["interview_roles"]}),
    );
    let expired = token(
        "k1",
        json!({"exp": now - 300, "interview_roles": roles["interview_roles"]}),
    );
    let other_issuer = token(
        "k1",
        json!({"iss": "https://elsewhere.example.test", "interview_roles": roles["interview_roles"]}),
    );
    let no_expiry = token(
        "k1",
        json!({"exp": null, "interview_roles": roles["interview_roles"]}),
    );
    let unknown_key = token("k3", roles.clone());
    let mut hs = Header::new(jsonwebtoken::Algorithm::HS256);
    hs.kid = Some("k1".into());
    let confused = jsonwebtoken::encode(
        &hs,
        &json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": now + 60}),
        &EncodingKey::from_secret(jwk("k1")["n"].as_str().unwrap().as_bytes()),
    )
    .unwrap();
    let (head, _) = sam.rsplit_once('.').unwrap();
    let forged = format!("{head}.AAAA");
    for bad in [
        &other_audience,
        &expired,
        &other_issuer,
        &no_expiry,
        &unknown_key,
        &confused,
        &forged,
    ] {
        let res = app.get(&paths::study(&a), Some(bad)).await;
        assert_error(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
    }

    // The provider rotates to a new key: a token signed by it is taken (its keys are fetched
    // again for an unknown key, at most every 3 s).
    *keys.lock().unwrap() = json!({ "keys": [jwk("k1"), jwk("k2")] });
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let rotated = token("k2", roles.clone());
    assert_eq!(
        app.get(&paths::study(&a), Some(&rotated)).await.status(),
        StatusCode::OK
    );

    // Every request, accepted or refused, is in the access log, under the name the token gives
    // when its signature held.
    let log = json_of(
        app.send(
            Method::GET,
            "/api/access-log?limit=1000",
            Some(RESEARCHER_TOKEN),
            None,
        )
        .await,
    )
    .await;
    let rows: Vec<(String, u64)> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["route"] == "/api/studies/{study_id}")
        .map(|e| {
            (
                e["researcher"].as_str().unwrap().to_string(),
                e["status"].as_u64().unwrap(),
            )
        })
        .collect();
    let sam_row = |status: u64| ("sam@example.org".to_string(), status);
    let unverified = ("unverified token".to_string(), 401);
    assert_eq!(
        rows,
        [
            sam_row(200),
            sam_row(401),
            sam_row(401),
            sam_row(401),
            sam_row(401),
            unverified.clone(),
            unverified.clone(),
            unverified,
            sam_row(200),
        ]
    );
    let accepted = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["researcher"] == "sam@example.org" && e["status"] == 200)
        .unwrap()
        .clone();
    assert_eq!(accepted["researcher_id"], "sso:u-123");
}

both_stores!(researchers_sign_in_with_the_organisations_provider);
