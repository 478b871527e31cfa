//! The test kit's server and helpers, under the name the tests use (`crate::helpers`).

pub use interview_test_kit::app::*;
