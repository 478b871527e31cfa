//! First words across servers (issue 36, item 5): a second server on the same PostgreSQL — its
//! own runtime, hub and NOTIFY listener, sharing nothing with the first but the database — holds
//! each session's stream while its messages go to the first, as a load balancer without sticky
//! sessions would send them. The time from the POST's return to the answer's first
//! `message.delta`, beside the same turns with the stream on the server that takes the messages,
//! interleaved; rules (the words streamed by the reader's feed from the commit) and llm (the
//! words relayed in NOTIFY batches).

use crate::{row, stats, turns, Server};

pub async fn run(label: &str, server: &Server, http: &reqwest::Client, total: usize) {
    let other = crate::start_server(Some(server.url.clone()));
    for (slug, policy) in [("demo", "rules"), (crate::LLM_SLUG, "llm")] {
        let (mut same, mut across) = (Vec::new(), Vec::new());
        let (mut same_wall, mut across_wall) =
            (std::time::Duration::ZERO, std::time::Duration::ZERO);
        // Interleaved, so the machine's drift falls on both alike.
        for _ in 0..2 {
            let t = turns::run_split(http, &server.base, &server.base, slug, 1, total / 2).await;
            same.extend(t.first_delta);
            same_wall += t.wall;
            let t = turns::run_split(http, &server.base, &other.base, slug, 1, total / 2).await;
            across.extend(t.first_delta);
            across_wall += t.wall;
        }
        let n = same.len();
        row(
            label,
            &format!("→ 1st delta ({policy}) A"),
            1,
            n,
            &stats(same, same_wall),
        );
        let n = across.len();
        row(
            label,
            &format!("→ 1st delta ({policy}) B"),
            1,
            n,
            &stats(across, across_wall),
        );
    }
}
