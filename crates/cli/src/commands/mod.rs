//! One module per subcommand, each with its `Args` and `run`.

pub mod ccr;
pub mod config;
pub mod import;
pub mod recall;
