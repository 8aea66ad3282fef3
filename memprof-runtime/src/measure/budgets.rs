//! The heap budgets of `#[memprof::test]`: its body measured, then each budget checked; a broken one fails
//! the test with the budget, the measure and the functions that allocated the most.

use std::future::Future;

use memprof_wire::usage::{Budget, Usage};

/// Runs `body` (the test `test`'s), measured, and panics if it breaks one of `budgets`; else its value.
///
/// ```should_panic
/// # #[global_allocator] static A: memprof_runtime::Allocator = memprof_runtime::Allocator;
/// use memprof_runtime::__private::{Budget, Comparison, Quantity, budgeted};
///
/// let budget = Budget { quantity: Quantity::Allocated, comparison: Comparison::AtMost, limit: 1024, written: "allocated <= 1024" };
/// budgeted("tests::small", &[budget], || vec![0u8; 4096]);
/// ```
pub fn budgeted<T>(test: &str, budgets: &[Budget], body: impl FnOnce() -> T) -> T {
    let (value, usage) = super::measure(body);
    check(test, budgets, &usage);
    value
}

/// Runs the async test `test`'s `body`, measured over its polls, and panics if it breaks one of `budgets`.
pub async fn budgeted_future<F: Future>(test: &str, budgets: &[Budget], body: F) -> F::Output {
    let (value, usage) = super::measure_future(body).await;
    check(test, budgets, &usage);
    value
}

/// Panics with every budget `usage` breaks, if any.
fn check(test: &str, budgets: &[Budget], usage: &Usage) {
    if let Some(message) = broken(test, budgets, usage) {
        panic!("{message}");
    }
}

/// What a test that breaks budgets fails with: each broken budget, then the whole measure.
fn broken(test: &str, budgets: &[Budget], usage: &Usage) -> Option<String> {
    let broken: Vec<String> = budgets.iter().filter_map(|budget| budget.check(usage).err()).collect();
    if broken.is_empty() {
        return None;
    }
    let budgets = if broken.len() == 1 { "heap budget" } else { "heap budgets" };
    Some(format!("{test} broke its {budgets}:\n  {}\nits body {usage}", broken.join("\n  ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memprof_wire::usage::{AllocatingStack, Comparison, Quantity};

    #[test]
    fn a_broken_budget_says_the_test_the_budget_the_measure_and_the_stacks() {
        let budget =
            Budget { quantity: Quantity::Peak, comparison: Comparison::AtMost, limit: 1024, written: "peak <= 1024" };
        let usage = Usage {
            allocated_bytes: 4096,
            allocated_objects: 1,
            live_bytes: 4096,
            peak_bytes: 4096,
            stacks: vec![AllocatingStack { function: "parse".into(), bytes: 4096.0, frames: vec!["parse".into()] }],
            ..Usage::exact()
        };
        assert_eq!(broken("tests::parses", &[budget], &Usage::exact()), None);
        assert_eq!(
            broken("tests::parses", &[budget, budget], &usage).unwrap(),
            "tests::parses broke its heap budgets:\n  \
             peak <= 1024: 4096 B (4.0 KiB) peak, over the budget of 1024 B (1.0 KiB)\n  \
             peak <= 1024: 4096 B (4.0 KiB) peak, over the budget of 1024 B (1.0 KiB)\n\
             its body allocated 4096 B (4.0 KiB) in 1 object, freed 0 B in 0 objects, live 4096 B (4.0 KiB), peak 4096 B (4.0 KiB)\n\
             the functions that allocated the most (sampled estimates):\n     4.0 KiB  parse"
        );
    }
}
