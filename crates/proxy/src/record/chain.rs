//! Responses conversations chained by `previous_response_id`: the provider keeps the earlier
//! turns, and each request carries only its new input. The writer remembers the responses it
//! journaled last (their id, session, the request and the reply), so that a request continuing
//! one lands in that session with the history the model is given: the earlier turns and their
//! replies, then the new input, under the request's own instructions (the provider does not carry
//! earlier instructions over).

use crate::route::Parsed;
use salvage_types::{history_weight, Message, Role};
use std::collections::VecDeque;
use std::sync::Arc;

/// The responses remembered at most (the request of each is shared with the writer's cache, not
/// copied).
pub const CHAINS: usize = 64;
/// The weight of the requests they hold at most (`history_weight`); a request heavier than that
/// is not remembered.
pub const CHAIN_WEIGHT: u64 = 32 << 20;

/// One journaled response.
#[derive(Debug)]
struct Link {
    id: String,
    session: String,
    request: Arc<Parsed>,
    reply: Message,
    weight: u64,
}

/// The responses the writer journaled last (most recent last).
#[derive(Debug, Default)]
pub struct Chains {
    links: VecDeque<Link>,
    weight: u64,
}

impl Chains {
    /// Remembers response `id` of `session`: the request it answered and its reply (unless the
    /// request asked the provider not to store the response: nothing can continue it).
    pub fn keep(&mut self, id: String, session: String, request: Arc<Parsed>, reply: Message) {
        if request.request.fields.get("store").and_then(serde_json::Value::as_bool) == Some(false) {
            return;
        }
        let weight = history_weight(&request.history);
        if weight > CHAIN_WEIGHT {
            return;
        }
        self.links.retain(|l| l.id != id);
        self.weight = self.links.iter().map(|l| l.weight).fold(0, u64::saturating_add).saturating_add(weight);
        self.links.push_back(Link { id, session, request, reply, weight });
        while self.links.len() > CHAINS || self.weight > CHAIN_WEIGHT {
            match self.links.pop_front() {
                Some(old) => self.weight = self.weight.saturating_sub(old.weight),
                None => break,
            }
        }
    }

    /// The session of response `id` and the history after it (its request's, then its reply).
    pub fn after(&self, id: &str) -> Option<(String, Vec<Message>)> {
        let l = self.links.iter().rev().find(|l| l.id == id)?;
        let mut h = l.request.history.clone();
        h.push(l.reply.clone());
        Some((l.session.clone(), h))
    }
}

/// The history a request continuing `earlier` gives the model: its own system messages (its
/// instructions), the earlier turns without theirs, then its own other messages.
pub fn continued(earlier: &[Message], request: &[Message]) -> Vec<Message> {
    let (system, input): (Vec<&Message>, Vec<&Message>) =
        request.iter().partition(|m| m.role == Role::System);
    system
        .into_iter()
        .chain(earlier.iter().filter(|m| m.role != Role::System))
        .chain(input)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continued_history_takes_the_new_instructions() {
        let earlier = [Message::system("old"), Message::user("q1"), Message::assistant("a1")];
        let request = [Message::system("new"), Message::user("q2")];
        let h = continued(&earlier, &request);
        let got: Vec<&str> = h.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(got, ["new", "q1", "a1", "q2"]);
        let h = continued(&earlier, &[Message::user("q2")]);
        assert_eq!(h.len(), 3);
    }

    fn parsed(body: serde_json::Value) -> Arc<Parsed> {
        Arc::new(
            crate::route::parse(
                crate::route::Api::OpenaiResponses,
                &serde_json::to_vec(&body).unwrap_or_default(),
            )
            .expect("parses"),
        )
    }

    #[test]
    fn only_stored_responses_within_the_bounds_are_remembered() {
        let mut c = Chains::default();
        c.keep(
            "r0".into(),
            "s".into(),
            parsed(serde_json::json!({"model": "m", "input": "q", "store": false})),
            Message::assistant("a"),
        );
        assert!(c.after("r0").is_none(), "a response the provider did not store");
        for i in 0..CHAINS + 3 {
            c.keep(
                format!("r{i}"),
                "s".into(),
                parsed(serde_json::json!({"model": "m", "input": "q"})),
                Message::assistant("a"),
            );
        }
        assert_eq!(c.links.len(), CHAINS);
        assert!(c.after("r0").is_none() && c.after(&format!("r{}", CHAINS + 2)).is_some());
        let huge = "x".repeat(usize::try_from(CHAIN_WEIGHT).unwrap_or(usize::MAX));
        c.keep(
            "big".into(),
            "s".into(),
            parsed(serde_json::json!({"model": "m", "input": huge})),
            Message::assistant("a"),
        );
        assert!(c.after("big").is_none(), "a request heavier than the bound");
    }
}
