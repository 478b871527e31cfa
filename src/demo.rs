//! The bundled demo study (`examples/demo-study.json`), published at start-up when no study has
//! the slug `demo`, so a fresh `cargo run` has something to interview with.

use interview_projections::Db;
use interview_session::StudyDefinition;

use crate::command::error::CommandError;
use crate::command::studies;

pub const DEMO_SLUG: &str = "demo";
const DEMO_DEFINITION: &str = include_str!("../examples/demo-study.json");

pub fn definition() -> StudyDefinition {
    serde_json::from_str(DEMO_DEFINITION).expect("the bundled demo study parses")
}

/// Publishes the demo study unless a study already has its slug. Returns whether it did.
pub async fn ensure_demo_study(db: &Db) -> Result<bool, CommandError> {
    if studies::by_slug(db, DEMO_SLUG).await?.is_some() {
        return Ok(false);
    }
    let study = studies::create(db, definition()).await?;
    studies::publish(db, &study.study_id).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_demo_study_is_valid() {
        let d = super::definition();
        d.validate().unwrap();
        assert_eq!(d.public_slug.as_deref(), Some(super::DEMO_SLUG));
    }
}
