//! Parsers of generated text: tool calls ([`tools`]) and reasoning ([`reasoning`]),
//! both streaming, with the marker hold-back they share ([`markers`]).

pub mod markers;
pub mod reasoning;
pub mod tools;
