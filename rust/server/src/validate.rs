//! The one gate a request body passes: field rules ([`params`], [`sampling`], [`extras`],
//! [`structured`], what may go with a beam search: [`beam_search`]), then the prompt
//! ([`prompt`]: model, messages or prompt, tools, template and tokenization, context
//! length). What comes out is a checked [`prompt::Prompt`].

pub mod beam_search;
pub mod engine_fields;
pub mod extras;
pub mod params;
pub mod prompt;
pub mod sampling;
pub mod structured;
