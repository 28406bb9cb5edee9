//! `functional_50`: the Functional API — an entrypoint starting n tasks at once and
//! joining their results.

use std::sync::Arc;

use stategraph::functional::{Entrypoint, Outcome, entrypoint, task};

use super::{expect_count, fresh_config, unexpected};
use crate::{Backend, BenchError, Measurement, Params, Spec, Unit, Workload, repeat};

/// `functional_50`: `wf(n)` calls `work(i)` for i in 0..n, all started before any is
/// awaited; `work(i)` returns `f"result {i}"`; `wf` returns the list.
pub(super) struct Functional;

fn workflow(backend: &Backend) -> Entrypoint<usize, Vec<String>> {
    let work = task(
        "work",
        |i: usize, _ctx| async move { Ok(format!("result {i}")) },
    );
    let wf = entrypoint("wf", move |n: usize, ctx| {
        let calls: Vec<_> = (0..n).map(|i| work.call(&ctx, i)).collect();
        async move {
            let mut out = Vec::with_capacity(calls.len());
            for c in calls {
                out.push(c.await?);
            }
            Ok(out)
        }
    });
    match backend.saver() {
        Some(saver) => wf.with_checkpointer(saver),
        None => wf,
    }
}

#[async_trait::async_trait]
impl Workload for Functional {
    fn spec(&self) -> Spec {
        Spec::new("functional_50", 50, 10, Unit::Invoke)
    }
    async fn measure(
        &self,
        backend: &Backend,
        n: usize,
        runs: usize,
        _: &Params,
    ) -> Result<Measurement, BenchError> {
        let wf = Arc::new(workflow(backend));
        let run = |wf: Arc<Entrypoint<usize, Vec<String>>>| async move {
            match wf.invoke(n, fresh_config(backend)).await {
                Ok(Outcome::Done(out)) => expect_count("functional_50", "results", out.len(), n),
                Ok(Outcome::Interrupted(_)) => {
                    Err(unexpected("functional_50", "an interrupt".to_owned()))
                }
                Err(e) => Err(unexpected("functional_50", e.to_string())),
            }
        };
        let samples = repeat(runs, || run(Arc::clone(&wf))).await?;
        Ok(Measurement {
            samples_ms: samples,
            ..Measurement::default()
        })
    }
}
