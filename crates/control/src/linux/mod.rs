//! Linux as the control plane: the kernel mirror (netlink) and the FPM
//! server for FRR's zebra. (Being built: issue 8.)

use crate::config::Plan;
use crate::source::ControlSource;
use serde::{Deserialize, Serialize};

/// `[linux]` configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinuxCfg {}

/// The sources the configuration asks for.
pub fn sources(_plan: &Plan) -> Result<Vec<Box<dyn ControlSource>>, String> {
    Ok(Vec::new())
}
