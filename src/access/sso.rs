//! Single sign-on: researchers present a JWT from the organisation's OpenID Connect provider
//! (`OIDC_ISSUER`, `OIDC_AUDIENCE`, `OIDC_JWKS_URL`).
//!
//! A token is accepted when it is signed by one of the provider's published keys (found by the
//! token's `kid`; RSA, EC or Ed25519 — never a shared secret, never `none`, and only with the
//! algorithm the key is for), names the issuer and the audience, and is within `exp`/`nbf`
//! (30 s of clock leeway). The keys are fetched at start-up and again when a token names a key
//! not yet seen (a rotation: at most once every 3 s) or an hour after the last fetch.
//!
//! The researcher's name comes from `OIDC_NAME_CLAIM` (default `preferred_username`, then
//! `sub`), their roles from `OIDC_ROLES_CLAIM` (default `interview_roles`): a list of `admin`
//! and `<study_id>:<role>` entries, or an object of study id → role. Their id is `sso:<sub>`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use tokio::sync::{Mutex, RwLock};

use super::{Identity, Role};

/// The OpenID Connect provider whose JWTs researchers may present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oidc {
    pub issuer: String,
    pub audience: String,
    pub jwks_url: String,
    /// `None`: `preferred_username`, then `sub`.
    pub name_claim: Option<String>,
    pub roles_claim: String,
}

/// How long fetched keys are trusted before they are fetched again.
const KEYS_FOR: Duration = Duration::from_secs(3600);
/// The least time between two fetches for an unknown key (a flood of made-up `kid`s must not
/// become a flood of requests to the provider).
const REFETCH_AFTER: Duration = Duration::from_secs(3);
/// A fetch's time limit.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest key set read (a few keys take a few kilobytes).
const MAX_KEY_SET_BYTES: usize = 256 * 1024;
/// How many refused tokens whose signature did not hold are recorded each second (per process):
/// they name no one, and anyone can send them.
const UNVERIFIED_PER_SECOND: u32 = 20;

/// Why a JWT was refused, and whose it was when its signature held.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The token's signature holds but a claim does not (expired, another audience …): the
    /// refusal is the named researcher's (`id`: `sso:<sub>`).
    #[error("{reason}")]
    Claims {
        reason: String,
        name: String,
        id: Option<String>,
    },
    /// No known key signed it, or it is not a JWT we take.
    #[error("{0}")]
    Unverified(String),
}

struct Keys {
    by_kid: HashMap<String, (DecodingKey, Algorithm)>,
    fetched: Option<Instant>,
}

/// The provider's keys and how tokens are checked against them.
pub struct Sso {
    settings: Oidc,
    client: reqwest13::Client,
    keys: RwLock<Keys>,
    /// One fetch at a time.
    fetching: Mutex<()>,
    /// Unverified refusals recorded in the current second: (its start, how many).
    unverified: std::sync::Mutex<(Instant, u32)>,
}

/// Whether a bearer token has a JWT's shape (three base64url parts, a JSON header).
pub fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.split('.').count() == 3
}

impl Sso {
    pub fn new(settings: Oidc) -> Self {
        crate::tls::use_ring();
        // No redirects: the keys come from the URL configured, or from nowhere.
        let client = reqwest13::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest13::redirect::Policy::none())
            .build()
            .expect("an HTTP client builds");
        Self {
            settings,
            client,
            keys: RwLock::new(Keys {
                by_kid: HashMap::new(),
                fetched: None,
            }),
            fetching: Mutex::new(()),
            unverified: std::sync::Mutex::new((Instant::now(), 0)),
        }
    }

    /// Whether another refusal of an unverified token may be recorded now (at most
    /// [`UNVERIFIED_PER_SECOND`]); the rest are only counted in the server's log.
    pub fn record_unverified(&self) -> bool {
        let mut window = self.unverified.lock().expect("never poisoned");
        if window.0.elapsed() >= Duration::from_secs(1) {
            *window = (Instant::now(), 0);
        }
        window.1 += 1;
        window.1 <= UNVERIFIED_PER_SECOND
    }

    /// Fetches the provider's keys (start-up; a failure is logged, and tried again on use).
    pub async fn refresh(&self) {
        let _one = self.fetching.lock().await;
        self.fetch_and_keep().await;
    }

    /// Fetches the keys again for `kid` — unless, by the time this caller's turn comes, another
    /// fetched them within [`REFETCH_AFTER`] (a crowd of unknown `kid`s makes one fetch).
    async fn refresh_for(&self, kid: &str) {
        let _one = self.fetching.lock().await;
        {
            let keys = self.keys.read().await;
            let recent = keys.fetched.is_some_and(|at| at.elapsed() <= REFETCH_AFTER);
            if keys.by_kid.contains_key(kid) || recent {
                return;
            }
        }
        self.fetch_and_keep().await;
    }

    #[tracing::instrument(skip(self), fields(url = %self.settings.jwks_url))]
    async fn fetch_and_keep(&self) {
        match self.fetch().await {
            Ok(by_kid) => {
                tracing::info!(keys = by_kid.len(), "identity provider's keys fetched");
                *self.keys.write().await = Keys {
                    by_kid,
                    fetched: Some(Instant::now()),
                };
            }
            Err(e) => {
                tracing::warn!(error = %e, "the identity provider's keys could not be fetched");
                self.keys.write().await.fetched = Some(Instant::now());
            }
        }
    }

    async fn fetch(&self) -> Result<HashMap<String, (DecodingKey, Algorithm)>, String> {
        let mut res = self
            .client
            .get(&self.settings.jwks_url)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !res.status().is_success() {
            return Err(format!("status {}", res.status()));
        }
        let too_big = || format!("the key set is larger than {MAX_KEY_SET_BYTES} bytes");
        if res.content_length().unwrap_or(0) > MAX_KEY_SET_BYTES as u64 {
            return Err(too_big());
        }
        let mut body = Vec::new();
        while let Some(chunk) = res.chunk().await.map_err(|e| e.to_string())? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_KEY_SET_BYTES {
                return Err(too_big());
            }
        }
        let set: JwkSet = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        Ok(set
            .keys
            .iter()
            // Keys published for encryption are not signing keys.
            .filter(|jwk| jwk.common.public_key_use != Some(PublicKeyUse::Encryption))
            .filter_map(|jwk| {
                let kid = jwk.common.key_id.clone()?;
                let alg = algorithm_of(jwk)?;
                let key = DecodingKey::from_jwk(jwk).ok()?;
                Some((kid, (key, alg)))
            })
            .collect())
    }

    /// The key a token names, fetching the keys again when it is unknown or they are old.
    async fn key(&self, kid: &str) -> Option<(DecodingKey, Algorithm)> {
        let (found, fetched) = {
            let keys = self.keys.read().await;
            (keys.by_kid.get(kid).cloned(), keys.fetched)
        };
        let stale = fetched.is_none_or(|at| at.elapsed() > KEYS_FOR);
        let may_refetch = fetched.is_none_or(|at| at.elapsed() > REFETCH_AFTER);
        if (found.is_none() && may_refetch) || stale {
            self.refresh_for(kid).await;
            return self.keys.read().await.by_kid.get(kid).cloned();
        }
        found
    }

    /// The researcher a JWT names, or why it is refused.
    pub async fn identity(&self, token: &str) -> Result<Identity, Refused> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Refused::Unverified(format!("not a JWT: {e}")))?;
        let kid = header
            .kid
            .ok_or_else(|| Refused::Unverified("the JWT names no key (kid)".into()))?;
        let (key, alg) = self.key(&kid).await.ok_or_else(|| {
            Refused::Unverified("signed by a key the provider does not publish".into())
        })?;
        if header.alg != alg {
            return Err(Refused::Unverified(format!(
                "signed with {:?}, but its key is for {alg:?}",
                header.alg
            )));
        }
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.validate_nbf = true;
        validation.leeway = 30;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = match jsonwebtoken::decode::<Value>(token, &key, &validation) {
            Ok(checked) => checked.claims,
            Err(e) => return Err(self.refusal(token, &key, alg, e)),
        };
        let name = self.name_of(&claims);
        let id = claims["sub"].as_str().map(|sub| format!("sso:{sub}"));
        let (admin, roles) = roles_of(claims.get(&self.settings.roles_claim));
        Ok(Identity {
            researcher_id: id,
            name,
            admin,
            roles,
        })
    }

    /// Why a token failed: when its signature holds (checked alone, without the claims), the
    /// refusal is the researcher's it names — the access log files it under them.
    fn refusal(
        &self,
        token: &str,
        key: &DecodingKey,
        alg: Algorithm,
        error: jsonwebtoken::errors::Error,
    ) -> Refused {
        let mut signature_only = Validation::new(alg);
        signature_only.validate_exp = false;
        signature_only.validate_aud = false;
        signature_only.required_spec_claims.clear();
        match jsonwebtoken::decode::<Value>(token, key, &signature_only) {
            Ok(signed) => Refused::Claims {
                reason: error.to_string(),
                name: self.name_of(&signed.claims),
                id: signed.claims["sub"]
                    .as_str()
                    .map(|sub| format!("sso:{sub}")),
            },
            Err(e) => Refused::Unverified(format!("its signature does not hold: {e}")),
        }
    }

    fn name_of(&self, claims: &Value) -> String {
        let claim = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_string);
        let name = match &self.settings.name_claim {
            Some(c) => claim(c),
            None => claim("preferred_username"),
        };
        name.or_else(|| claim("sub"))
            .unwrap_or_else(|| "unnamed".into())
            .chars()
            .take(100)
            .collect()
    }
}

/// The algorithm a published key is for: its `alg`, else its family's usual one. Shared-secret
/// keys are never taken (a public key set holds none, and one would let anyone sign).
fn algorithm_of(jwk: &jsonwebtoken::jwk::Jwk) -> Option<Algorithm> {
    let named = jwk.common.key_algorithm.and_then(|a| match a {
        KeyAlgorithm::RS256 => Some(Algorithm::RS256),
        KeyAlgorithm::RS384 => Some(Algorithm::RS384),
        KeyAlgorithm::RS512 => Some(Algorithm::RS512),
        KeyAlgorithm::PS256 => Some(Algorithm::PS256),
        KeyAlgorithm::PS384 => Some(Algorithm::PS384),
        KeyAlgorithm::PS512 => Some(Algorithm::PS512),
        KeyAlgorithm::ES256 => Some(Algorithm::ES256),
        KeyAlgorithm::ES384 => Some(Algorithm::ES384),
        KeyAlgorithm::EdDSA => Some(Algorithm::EdDSA),
        _ => None,
    });
    match &jwk.algorithm {
        AlgorithmParameters::OctetKey(_) => None,
        AlgorithmParameters::RSA(_) => named.or(Some(Algorithm::RS256)),
        AlgorithmParameters::EllipticCurve(p) => named.or(match p.curve {
            EllipticCurve::P256 => Some(Algorithm::ES256),
            EllipticCurve::P384 => Some(Algorithm::ES384),
            _ => None,
        }),
        AlgorithmParameters::OctetKeyPair(_) => named.or(Some(Algorithm::EdDSA)),
    }
}

/// Admin and per-study roles from the roles claim: `["admin", "<study>:<role>", …]` or
/// `{"<study>": "<role>", …}`. Entries that are neither are ignored.
pub fn roles_of(claim: Option<&Value>) -> (bool, HashMap<String, Role>) {
    let mut admin = false;
    let mut roles = HashMap::new();
    match claim {
        Some(Value::Array(items)) => {
            for item in items.iter().filter_map(Value::as_str) {
                if item == "admin" {
                    admin = true;
                } else if let Some((study, role)) = item.rsplit_once(':') {
                    if let Ok(role) = role.parse() {
                        roles.insert(study.to_string(), role);
                    }
                }
            }
        }
        Some(Value::Object(map)) => {
            for (study, role) in map {
                if let Some(role) = role.as_str().and_then(|r| r.parse().ok()) {
                    roles.insert(study.clone(), role);
                }
            }
        }
        _ => {}
    }
    (admin, roles)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn roles_read_from_a_list_or_an_object() {
        let (admin, roles) = roles_of(Some(&json!(["s1:viewer", "s2:owner", "x:boss", 3])));
        assert!(!admin);
        assert_eq!(roles.len(), 2);
        assert_eq!(roles["s2"], Role::Owner);
        let (admin, roles) = roles_of(Some(&json!(["admin"])));
        assert!(admin && roles.is_empty());
        let (_, roles) = roles_of(Some(&json!({"s1": "analyst"})));
        assert_eq!(roles["s1"], Role::Analyst);
        assert_eq!(roles_of(None), (false, HashMap::new()));
    }

    #[test]
    fn only_jwt_shaped_tokens_go_to_the_provider() {
        assert!(looks_like_jwt("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"));
        assert!(!looks_like_jwt("rt_0123"));
        assert!(!looks_like_jwt("eyJonly.two"));
    }
}
