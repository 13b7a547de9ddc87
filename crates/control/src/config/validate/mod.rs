//! A deserialized [`Config`] checked into a [`Plan`], section by section.
//! The sections are checked in this order and the first problem found is
//! the one reported, so an error names the same key whatever else is
//! wrong further down the file.

mod acl;
mod interfaces;
mod ipsec;
mod routes;
mod settings;
pub(crate) mod vrrp;

use super::{Config, Plan, Problem};
use std::collections::HashMap;
use std::path::Path;

pub(super) fn validate(config: Config, base: &Path) -> Result<Plan, Problem> {
    settings::dataplane(&config.dataplane)?;
    settings::neighbor(&config.neighbor, &config.dataplane)?;
    settings::reassembly(&config.reassembly)?;
    settings::metrics(&config.metrics)?;
    settings::api(&config.api)?;
    let acl_names = acl::rule_sets(&config.acl)?;
    let tap = settings::linux(&config.linux)?;
    let mut ifs = interfaces::interfaces(&config, tap, &acl_names)?;
    let sas = ipsec::sas(&config)?;
    let ike_keyed = super::ike::keyed_tunnels(&config.ike);
    interfaces::tunnels(&config, &acl_names, &sas, &ike_keyed, &mut ifs)?;
    let ike = super::ike::ike(&config, base, &ifs.all_addrs, config.linux.linux_mode())?;
    interfaces::no_shared_subnet(&config, &ifs)?;
    let ifaces = ifs.ifaces;
    // Fewer than NO_IF of them (checked above): every index fits a u16.
    let by_name: HashMap<&str, u16> = ifaces.iter().enumerate().map(|(i, f)| (f.name.as_str(), i as u16)).collect();
    let index_of = |name: &str| by_name.get(name).copied();
    // With the kernel mirror, Linux's addresses bring connected subnets too:
    // a gateway outside tern's own may still be reached.
    let kernel_addrs = config.linux.kernel_enabled();
    let routes = routes::routes(&config.routes, &ifaces, &index_of, kernel_addrs)?;
    let route_files = routes::route_files(&config.route_files, &ifaces, &index_of, kernel_addrs, base)?;
    let acls = config.acl.clone();
    let static_neighbors = routes::static_neighbors(&config.static_neighbors, &ifaces, &index_of)?;
    vrrp::groups(&config.vrrp, &ifaces, &index_of, config.linux.linux_mode())?;
    Ok(Plan { config, ifaces, routes, route_files, acls, static_neighbors, sas, ike })
}
