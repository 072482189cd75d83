//! The verifiable content of a written unit: run, client, unit and generation in a header, the
//! rest derived from them.

const HEADER_LEN: usize = 24;

pub fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The content of one unit: a header naming it, then bytes derived from the header.
pub fn fill_unit(b: &mut [u8], run: u64, client: u32, unit: u64, generation: u32) {
    b[0..8].copy_from_slice(&run.to_le_bytes());
    b[8..12].copy_from_slice(&client.to_le_bytes());
    b[12..16].copy_from_slice(&generation.to_le_bytes());
    b[16..24].copy_from_slice(&unit.to_le_bytes());
    let mut x = run ^ (unit << 20) ^ ((client as u64) << 44) ^ generation as u64;
    for c in b[HEADER_LEN..].chunks_mut(8) {
        let v = splitmix(&mut x).to_le_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
}

/// Which generation a unit holds, if it is one of ours and intact.
pub fn unit_generation(b: &[u8], run: u64, client: u32, unit: u64, scratch: &mut [u8]) -> Option<u32> {
    if b[0..8] != run.to_le_bytes() || b[8..12] != client.to_le_bytes() || b[16..24] != unit.to_le_bytes() {
        return None;
    }
    let g = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
    fill_unit(scratch, run, client, unit, g);
    (scratch == b).then_some(g)
}
