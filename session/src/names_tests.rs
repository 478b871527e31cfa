//! The names `strum` derives for the enums the events, the API and the prompt spell out are the
//! names serde writes: one spelling, whichever path a name takes.

use serde::Serialize;
use strum::IntoEnumIterator;

use crate::decision::{ConcludeReason, ProbeTrigger};
use crate::erasure::ErasedBy;
use crate::events::{Phase, SessionStatus};
use crate::input_class::InputClass;
use crate::study::FieldType;

fn same<T: IntoEnumIterator + Serialize + std::fmt::Debug>(name: impl Fn(&T) -> String) {
    for value in T::iter() {
        let written = serde_json::to_value(&value).unwrap();
        assert_eq!(written.as_str(), Some(name(&value).as_str()), "{value:?}");
    }
}

#[test]
fn each_derived_name_is_the_serialized_one() {
    same::<ConcludeReason>(|v| v.as_ref().to_string());
    same::<ProbeTrigger>(|v| v.as_ref().to_string());
    same::<ErasedBy>(|v| v.as_str().to_string());
    same::<Phase>(|v| v.as_ref().to_string());
    same::<SessionStatus>(|v| v.as_str().to_string());
    same::<InputClass>(|v| v.as_ref().to_string());
    same::<FieldType>(|v| v.as_ref().to_string());
}
