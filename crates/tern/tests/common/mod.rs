//! Helpers shared by the tests that run the real `tern` in network
//! namespaces: the testkit's lab (each test file uses what it needs).
#![allow(dead_code, unused_imports)]

pub use tern_testkit::netns::{is_root, lab_missing, metric, must, netns_exec, scrape_in, sh, stop};

/// The testkit's two-host lab, wrapped so that each test file can add the
/// methods it needs (starting its daemon, its CLI calls).
pub struct Lab(pub tern_testkit::netns::Lab);

impl Lab {
    /// See [`tern_testkit::netns::Lab::two_hosts`].
    pub fn two_hosts(base: &str) -> Lab {
        Lab(tern_testkit::netns::Lab::two_hosts(base))
    }
}

impl std::ops::Deref for Lab {
    type Target = tern_testkit::netns::Lab;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Lab {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}
