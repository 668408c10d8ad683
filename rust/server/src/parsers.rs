//! Parsers of generated text: tool calls ([`tools`]) and reasoning ([`reasoning`]),
//! both streaming, with the marker hold-back they share ([`markers`]), and which of
//! them a server uses ([`select`]).

pub mod markers;
pub mod reasoning;
pub mod select;
pub mod tools;
