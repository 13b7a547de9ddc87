//! `[[ipsec_sa]]`: each SA by the rules the API shares
//! (`config::sa_plan`), then across them: ids and SPIs unique.

use crate::config::{Config, Problem, SaPlan, Seg, bad, k, sa_plan};
use std::collections::HashMap;

pub(super) fn sas(config: &Config) -> Result<Vec<SaPlan>, Problem> {
    let mut out: Vec<SaPlan> = Vec::with_capacity(config.ipsec_sas.len());
    let mut ids: HashMap<u32, usize> = HashMap::new();
    let mut spis: HashMap<u32, usize> = HashMap::new();
    for (i, c) in config.ipsec_sas.iter().enumerate() {
        let p = |key: &str| vec![k("ipsec_sa"), Seg::Index(i), k(key)];
        // A key the entry lacks is reported at the entry.
        let sa = sa_plan(c).map_err(|(key, m)| match key {
            "integ_key" if c.integ_key.is_none() => bad(vec![k("ipsec_sa"), Seg::Index(i)], m),
            _ => bad(p(key), m),
        })?;
        if let Some(j) = ids.insert(sa.id, i) {
            return Err(bad(p("id"), format!("SA id {} is also ipsec_sa[{j}]'s", sa.id)));
        }
        if let Some(j) = spis.insert(sa.spi, i) {
            return Err(bad(p("spi"), format!("SPI {:#x} is also ipsec_sa[{j}]'s", sa.spi)));
        }
        out.push(sa);
    }
    Ok(out)
}
