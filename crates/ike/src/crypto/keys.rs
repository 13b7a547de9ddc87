//! Key material: the IKE SA's seven keys (RFC 7296 2.14, 2.18 for a
//! rekeyed IKE SA) and a child SA's (2.17).

use super::sk::SkCipher;
use crate::output::EspKeys;
use crate::proposal::Chosen;
use zeroize::Zeroizing;

/// An IKE SA's keys after IKE_SA_INIT.
pub struct IkeKeys {
    pub prf: crate::proposal::Prf,
    /// SK_d: child SAs' keys derive from it.
    pub sk_d: Zeroizing<Vec<u8>>,
    /// SK_pi, SK_pr: the AUTH payload's MACed ID.
    pub sk_pi: Zeroizing<Vec<u8>>,
    pub sk_pr: Zeroizing<Vec<u8>>,
    /// Protects what the initiator sends (SK_ai + SK_ei) / the responder.
    pub initiator: SkCipher,
    pub responder: SkCipher,
}

impl IkeKeys {
    /// SKEYSEED = prf(Ni | Nr, g^ir) (for GCM nonces without... per 2.14:
    /// the PRF key is Ni | Nr), then prf+(SKEYSEED, Ni | Nr | SPIi | SPIr).
    pub fn derive(
        chosen: &Chosen,
        shared: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> IkeKeys {
        let _ = (chosen, shared, ni, nr, spi_i, spi_r);
        todo!("ike-crypto")
    }

    /// A rekeyed IKE SA's keys (2.18): SKEYSEED = prf(SK_d (old),
    /// g^ir (new) | Ni | Nr).
    #[allow(clippy::too_many_arguments)]
    pub fn derive_rekey(
        old_sk_d: &[u8],
        old_prf: crate::proposal::Prf,
        chosen: &Chosen,
        shared: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> IkeKeys {
        let _ = (old_sk_d, old_prf, chosen, shared, ni, nr, spi_i, spi_r);
        todo!("ike-crypto")
    }
}

/// A child SA's keys (2.17): KEYMAT = prf+(SK_d, [g^ir (new) |] Ni | Nr);
/// the initiator-to-responder SA's keys first (encryption then integrity),
/// then the other direction. Returns (initiator to responder, responder to
/// initiator), with the SPIs given (each SA's SPI is the one its receiver
/// chose).
#[allow(clippy::too_many_arguments)]
pub fn child_keys(
    prf: crate::proposal::Prf,
    sk_d: &[u8],
    chosen: &Chosen,
    pfs_shared: Option<&[u8]>,
    ni: &[u8],
    nr: &[u8],
    spi_i_to_r: u32,
    spi_r_to_i: u32,
) -> (EspKeys, EspKeys) {
    let _ = (prf, sk_d, chosen, pfs_shared, ni, nr, spi_i_to_r, spi_r_to_i);
    todo!("ike-crypto")
}
