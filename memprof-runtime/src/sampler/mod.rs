//! Sampling: how it runs, on demand or continuously ([`sampling`]); the record of sampled objects
//! continuous sampling keeps ([`record`]); and the budget of sampling work, judged ([`budget`]) on the
//! readings its pacer takes ([`throttle`]). Below the runs ([`crate::profiler`]), which open windows over it.

pub(crate) mod budget;
pub(crate) mod mode;
pub(crate) mod record;
pub(crate) mod sampling;
pub(crate) mod throttle;
