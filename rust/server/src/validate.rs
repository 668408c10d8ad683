//! The one gate a request body passes: field rules ([`params`], [`sampling`], [`extras`],
//! [`structured`]), then the prompt ([`prompt`]: model, messages or prompt, tools,
//! template and tokenization, context length). What comes out is a checked
//! [`prompt::Prompt`].

pub mod extras;
pub mod params;
pub mod prompt;
pub mod sampling;
pub mod structured;
