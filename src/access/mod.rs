//! Who may do what (issue 34): researchers as named people with API tokens and a role per
//! study.
//!
//! - **Identities** (`identities.rs`): a researcher has a name, is or is not an admin, and holds
//!   tokens — `rt_` and 64 hex digits (32 random bytes), shown once, stored as their SHA-256,
//!   each with an optional expiry; a revoke ends every token of the researcher at once. Tokens
//!   are looked up on every request (no cache), so a revoke holds at once in every process.
//! - **Roles** ([`Role`]): `viewer` reads a study and its sessions; `analyst` also reads results
//!   and exports them; `owner` also edits, publishes, pauses and resumes the study, manages its
//!   link secret, grants roles on it and erases its participants' data. An admin may do
//!   everything, creates studies and manages researchers.
//! - **Single sign-on** (`sso.rs`): with `OIDC_*` set, a JWT from the organisation's provider
//!   names the researcher and their roles.
//! - **Configured tokens** (`RESEARCHER_TOKENS`, or the generated `DATA_DIR/researcher-token`)
//!   keep working as admins, named `token:` and the first 8 hex digits of their SHA-256 — which
//!   one, without the token.

pub mod cli;
pub mod identities;
pub mod sso;

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::command::error::CommandError;

/// When a token made now expires, `days` from now (fractions allowed; at most ten years).
pub fn expiry_in_days(days: Option<f64>) -> Result<Option<DateTime<Utc>>, CommandError> {
    match days {
        None => Ok(None),
        Some(d) if d.is_finite() && d > 0.0 && d <= 3650.0 => {
            Ok(Some(Utc::now() + Duration::seconds((d * 86_400.0) as i64)))
        }
        Some(_) => Err(CommandError::Invalid {
            code: "invalid_value",
            field: "expires_in_days".into(),
            message: "a number of days above 0, at most 3650".into(),
        }),
    }
}

/// A role on a study. Ordered: each includes what the ones before it may do.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::AsRefStr,
    strum::IntoStaticStr,
    clap::ValueEnum,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Role {
    /// Reads the study, its overview and its sessions' content.
    Viewer,
    /// Also reads results and exports them.
    Analyst,
    /// Also edits, publishes, pauses and resumes the study, its link secret, its roles, and
    /// erases its participants' data.
    Owner,
}

/// Who a researcher's request comes from, and what they may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The researcher's id; `None` for a configured token (which has no row).
    pub researcher_id: Option<String>,
    /// The researcher's name (`token:<8 hex>` for a configured token).
    pub name: String,
    pub admin: bool,
    /// Study id → role.
    pub roles: HashMap<String, Role>,
}

impl Identity {
    /// A token from `RESEARCHER_TOKENS` (or the generated file): an admin, named by the first 8
    /// hex digits of its digest.
    pub fn configured(digest: &str) -> Self {
        Self {
            researcher_id: None,
            name: format!("token:{}", &digest[..8.min(digest.len())]),
            admin: true,
            roles: HashMap::new(),
        }
    }

    /// The caller's role on `study_id` (an admin's is owner everywhere).
    pub fn role_on(&self, study_id: &str) -> Option<Role> {
        if self.admin {
            return Some(Role::Owner);
        }
        self.roles.get(study_id).copied()
    }

    /// Whether the caller holds at least `needed` on `study_id`.
    pub fn may(&self, study_id: &str, needed: Role) -> bool {
        self.role_on(study_id).is_some_and(|role| role >= needed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyst_of(study: &str) -> Identity {
        Identity {
            researcher_id: Some("r1".into()),
            name: "ana".into(),
            admin: false,
            roles: HashMap::from([(study.to_string(), Role::Analyst)]),
        }
    }

    #[test]
    fn a_role_includes_the_ones_below_it_on_its_study_only() {
        let ana = analyst_of("a");
        assert!(ana.may("a", Role::Viewer));
        assert!(ana.may("a", Role::Analyst));
        assert!(!ana.may("a", Role::Owner));
        assert!(!ana.may("b", Role::Viewer));
    }

    #[test]
    fn an_admin_may_do_everything_everywhere() {
        let admin = Identity::configured("0123456789abcdef");
        assert_eq!(admin.name, "token:01234567");
        assert!(admin.may("any", Role::Owner));
    }

    #[test]
    fn roles_read_and_write_in_lowercase() {
        assert_eq!(Role::Analyst.to_string(), "analyst");
        assert_eq!("owner".parse::<Role>().unwrap(), Role::Owner);
        assert_eq!(serde_json::to_value(Role::Viewer).unwrap(), "viewer");
    }
}
