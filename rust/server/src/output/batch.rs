//! A completions request's prompts × `n` choices (mirrors `server/output/batch.py`): the
//! fan-out into engine requests (each choice's index, engine request id and seed) and the
//! merge of the choices' usage. A chat request is a batch of one prompt.
//! Behaviour: docs/api.md, "Batched prompts (completions)".

use vrs_wire::EngineCoreRequest;

use crate::openai::Usage;
use crate::validate::prompt::Prompt;

/// The engine requests of `prompts` (all sharing `n`), in choice-index order, with
/// `arrival_time` set by the caller.
pub fn fan_out(id: &str, prompts: &[Prompt], arrival_time: f64) -> Vec<EngineCoreRequest> {
    let n = prompts.first().map_or(1, |p| p.settings.n.max(1));
    let several = prompts.len() * n as usize > 1;
    let mut out = Vec::with_capacity(prompts.len() * n as usize);
    for (i, prompt) in prompts.iter().enumerate() {
        for j in 0..n {
            let mut sampling = prompt.settings.sampling.clone();
            let request_id = if several {
                sampling.seed = sampling.seed.map(|s| s.wrapping_add(i64::from(j)));
                format!("{id}-{}", i * n as usize + j as usize)
            } else {
                id.to_owned()
            };
            out.push(EngineCoreRequest {
                request_id,
                prompt_token_ids: prompt.ids.clone(),
                sampling_params: sampling,
                arrival_time,
                priority: prompt.settings.priority,
                cache_salt: prompt.settings.cache_salt.clone(),
                pooling_params: None,
            });
        }
    }
    out
}

/// The usage of a response whose choices (in index order, `n` per prompt) used
/// `usages`: each prompt counted once (its tokens, and its cached tokens as its first
/// choice found them), every choice's completion.
pub fn total(usages: &[Usage], n: usize) -> Usage {
    let firsts = || usages.iter().step_by(n.max(1));
    let prompt = firsts().map(|u| u.prompt_tokens).sum();
    let cached = firsts().map(Usage::cached_tokens).sum();
    let completion = usages.iter().map(|u| u.completion_tokens).sum();
    Usage::new(prompt, completion).with_cached(cached)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::params::{validate, Settings};

    fn prompt(ids: Vec<u32>, settings: &Settings) -> Prompt {
        Prompt {
            text: None,
            ids,
            settings: settings.clone(),
            chat: None,
        }
    }

    #[test]
    fn choices_are_prompt_major() {
        let common = crate::openai::CommonFields {
            n: Some(2),
            seed: Some(7),
            ..Default::default()
        };
        let settings = validate(common, None, false, 100).unwrap();
        let prompts = [prompt(vec![1], &settings), prompt(vec![2, 3], &settings)];
        let requests = fan_out("cmpl-x", &prompts, 0.0);
        let ids: Vec<_> = requests.iter().map(|r| r.request_id.as_str()).collect();
        assert_eq!(ids, ["cmpl-x-0", "cmpl-x-1", "cmpl-x-2", "cmpl-x-3"]);
        let seeds: Vec<_> = requests.iter().map(|r| r.sampling_params.seed).collect();
        assert_eq!(seeds, [Some(7), Some(8), Some(7), Some(8)]);
        assert_eq!(requests[2].prompt_token_ids, [2, 3]);
        let one = fan_out("cmpl-y", &prompts[..1], 0.0);
        assert_eq!(one.len(), 2);
        let single = validate(Default::default(), None, false, 100).unwrap();
        let alone = fan_out("cmpl-z", &[prompt(vec![1], &single)], 0.0);
        assert_eq!(alone[0].request_id, "cmpl-z");
    }

    #[test]
    fn prompts_count_once_completions_all() {
        let usages = [
            Usage::new(3, 1),
            Usage::new(3, 2).with_cached(2),
            Usage::new(5, 4).with_cached(4),
            Usage::new(5, 0).with_cached(4),
        ];
        // Each prompt's cached tokens as its first choice found them (choice 1 of
        // prompt 0 hit the blocks choice 0 had just filled).
        assert_eq!(total(&usages, 2), Usage::new(8, 7).with_cached(4));
        assert_eq!(total(&usages[..2], 2), Usage::new(3, 3));
        assert_eq!(total(&usages, 1), Usage::new(16, 7).with_cached(10));
        assert_eq!(total(&[], 1), Usage::new(0, 0));
    }
}
