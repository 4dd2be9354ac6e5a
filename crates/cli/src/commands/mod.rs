//! One module per subcommand, each with its `Args` and `run`.

pub mod apply;
pub mod ccr;
pub mod classify;
pub mod config;
pub mod generate;
pub mod import;
pub mod journal;
pub mod proxy;
pub mod recall;
pub mod replay;
