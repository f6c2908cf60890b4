//! One thread per item, all at once, results in the items' order: how
//! halobox does a step on every node of a cluster (Ray's workers, the
//! staging of a `cluster refresh`, `cluster disable`, llama.cpp's RPC
//! servers). A thread that panics takes the caller down with it.

/// Runs `f` on every item at once (one thread each, given the item's
/// index); the results in the items' order.
pub fn each<T: Send, U: Send>(
    items: impl IntoIterator<Item = T>,
    f: impl Fn(usize, T) -> U + Sync,
) -> Vec<U> {
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = items
            .into_iter()
            .enumerate()
            .map(|(i, t)| s.spawn(move || f(i, t)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a node's thread"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    #[test]
    fn every_item_runs_at_once_and_results_keep_their_order() {
        // Each thread waits for all the others: run one after another,
        // this would never end.
        let all = Barrier::new(4);
        let got = each(["a", "b", "c", "d"], |i, s| {
            all.wait();
            format!("{i}{s}")
        });
        assert_eq!(got, ["0a", "1b", "2c", "3d"]);
    }
}
