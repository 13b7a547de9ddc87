//! Compiles the XDP programs in `bpf/` with clang into objects that the
//! crate embeds with `include_bytes!`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const PROGRAMS: &[&str] = &["steer", "lane"];
const INSTALL_HINT: &str = "apt-get install -y clang llvm libbpf-dev";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let clang = env::var("TERN_CLANG").unwrap_or_else(|_| "clang".to_string());
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".to_string());
    // Debian keeps <asm/types.h> under the multiarch directory, which clang
    // does not search for -target bpf.
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    println!("cargo:rerun-if-env-changed=TERN_CLANG");
    // Headers the programs include (bpf/lane.h, and the lane's sections in
    // bpf/lib/: a directory is watched whole, so a header added there
    // counts too).
    for e in std::fs::read_dir("bpf").into_iter().flatten().flatten() {
        if e.path().extension().is_some_and(|x| x == "h") {
            println!("cargo:rerun-if-changed={}", e.path().display());
        }
    }
    println!("cargo:rerun-if-changed=bpf/lib");
    for name in PROGRAMS {
        let src = format!("bpf/{name}.c");
        println!("cargo:rerun-if-changed={src}");
        let obj = out.join(format!("{name}.o"));
        let status = Command::new(&clang)
            .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-c", &src, "-o"])
            .arg(&obj)
            .arg(format!("-I{multiarch}"))
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!(
                "clang failed ({s}) compiling {src}; the BPF build needs clang and the libbpf headers: {INSTALL_HINT}"
            ),
            Err(e) => panic!("cannot run `{clang}` ({e}) to compile {src}: {INSTALL_HINT}"),
        }
    }
    // The lane's map layouts as clang laid them out, for layout.rs to
    // check its mirror against at compile time (one source of truth: the
    // object the crate embeds). The structs the program's BTF lacks come
    // from bpf/lib/layout.c, the same header compiled the same way.
    let anchors = out.join("lane_layout.o");
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-c", "bpf/lib/layout.c", "-o"])
        .arg(&anchors)
        .arg(format!("-I{multiarch}"))
        .status();
    if !status.is_ok_and(|s| s.success()) {
        panic!("clang failed compiling bpf/lib/layout.c: {INSTALL_HINT}");
    }
    let mut objects = Vec::new();
    for obj in [out.join("lane.o"), anchors] {
        let elf = std::fs::read(&obj).unwrap_or_else(|e| panic!("{}: {e}", obj.display()));
        objects.push((obj, elf));
    }
    let table = btf::layouts(&objects, "lane_").unwrap_or_else(|e| panic!("BTF: {e}"));
    let dst = out.join("lane_btf.rs");
    std::fs::write(&dst, table).unwrap_or_else(|e| panic!("{}: {e}", dst.display()));
}

/// Just enough of ELF64 and BTF (the kernel's Documentation/bpf/btf.rst)
/// to list the members of an object's structs: name, byte offset, size.
mod btf {
    use std::fmt::Write;

    fn u16_at(b: &[u8], at: usize) -> Result<u16, String> {
        b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]])).ok_or_else(|| format!("truncated at {at}"))
    }

    fn u32_at(b: &[u8], at: usize) -> Result<u32, String> {
        b.get(at..at + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
            .ok_or_else(|| format!("truncated at {at}"))
    }

    fn u64_at(b: &[u8], at: usize) -> Result<u64, String> {
        Ok(u64::from(u32_at(b, at)?) | (u64::from(u32_at(b, at + 4)?) << 32))
    }

    fn cstr(b: &[u8], at: usize) -> Result<&str, String> {
        let s = b.get(at..).ok_or_else(|| format!("string at {at} out of range"))?;
        let n = s.iter().position(|&c| c == 0).ok_or("unterminated string")?;
        std::str::from_utf8(&s[..n]).map_err(|e| e.to_string())
    }

    /// Section `want` (`.BTF`) of a little-endian ELF64 object.
    fn section<'a>(elf: &'a [u8], want: &str) -> Result<&'a [u8], String> {
        if elf.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
            return Err("not a little-endian ELF64 object".into());
        }
        let shoff = u64_at(elf, 0x28)? as usize;
        let shentsize = usize::from(u16_at(elf, 0x3a)?);
        let shnum = usize::from(u16_at(elf, 0x3c)?);
        let shstrndx = usize::from(u16_at(elf, 0x3e)?);
        let sh = |i: usize| -> Result<(u32, usize, usize), String> {
            let at = shoff + i * shentsize;
            Ok((u32_at(elf, at)?, u64_at(elf, at + 0x18)? as usize, u64_at(elf, at + 0x20)? as usize))
        };
        let (_, stroff, _) = sh(shstrndx)?;
        for i in 0..shnum {
            let (name, off, size) = sh(i)?;
            if cstr(elf, stroff + name as usize)? == want {
                return elf.get(off..off + size).ok_or_else(|| format!("{want} out of range"));
            }
        }
        Err(format!("no {want} section (compiled without -g?)"))
    }

    struct Type {
        kind: u32,
        name: u32,
        vlen: usize,
        kind_flag: bool,
        size_or_type: u32,
        // Kind-specific data after the common part.
        extra: usize,
    }

    const INT: u32 = 1;
    const PTR: u32 = 2;
    const ARRAY: u32 = 3;
    const STRUCT: u32 = 4;
    const UNION: u32 = 5;
    const ENUM: u32 = 6;
    const TYPEDEF: u32 = 8;
    const VOLATILE: u32 = 9;
    const CONST: u32 = 10;
    const RESTRICT: u32 = 11;
    const FLOAT: u32 = 16;
    const TYPE_TAG: u32 = 18;
    const ENUM64: u32 = 19;

    struct Btf<'a> {
        types: &'a [u8],
        strs: &'a [u8],
        // Index = type id (0: void).
        all: Vec<Type>,
    }

    impl Btf<'_> {
        fn name(&self, off: u32) -> Result<&str, String> {
            cstr(self.strs, off as usize)
        }

        fn get(&self, id: u32) -> Result<&Type, String> {
            self.all.get(id as usize).filter(|_| id != 0).ok_or_else(|| format!("no type {id}"))
        }

        fn size(&self, id: u32, depth: u32) -> Result<usize, String> {
            if depth > 32 {
                return Err("type chain too deep".into());
            }
            let t = self.get(id)?;
            match t.kind {
                INT | STRUCT | UNION | ENUM | FLOAT | ENUM64 => Ok(t.size_or_type as usize),
                PTR => Ok(8),
                TYPEDEF | VOLATILE | CONST | RESTRICT | TYPE_TAG => self.size(t.size_or_type, depth + 1),
                ARRAY => {
                    let elem = u32_at(self.types, t.extra)?;
                    let n = u32_at(self.types, t.extra + 8)? as usize;
                    Ok(n * self.size(elem, depth + 1)?)
                }
                k => Err(format!("type {id} of kind {k} has no size")),
            }
        }

        /// (name, byte offset, size) of each member of struct or union
        /// `t`; an anonymous member is named after its own members
        /// joined with '_' (lane_fwd_flow's union: "hi_l2").
        fn members(&self, t: &Type) -> Result<Vec<(String, usize, usize)>, String> {
            let mut v = Vec::new();
            for i in 0..t.vlen {
                let at = t.extra + 12 * i;
                let name = u32_at(self.types, at)?;
                let ty = u32_at(self.types, at + 4)?;
                let mut off = u32_at(self.types, at + 8)?;
                if t.kind_flag {
                    if off >> 24 != 0 {
                        return Err("bitfield members are not mirrored".into());
                    }
                    off &= 0xff_ffff;
                }
                if off % 8 != 0 {
                    return Err("a member off a byte boundary".into());
                }
                let mut name = self.name(name)?.to_string();
                if name.is_empty() {
                    let inner = self.get(ty)?;
                    name = self.members(inner)?.into_iter().map(|m| m.0).collect::<Vec<_>>().join("_");
                }
                v.push((name, off as usize / 8, self.size(ty, 0)?));
            }
            Ok(v)
        }
    }

    fn parse(b: &[u8]) -> Result<Btf<'_>, String> {
        if u16_at(b, 0)? != 0xeb9f {
            return Err("bad BTF magic".into());
        }
        let hdr_len = u32_at(b, 4)? as usize;
        let (type_off, type_len) = (u32_at(b, 8)? as usize, u32_at(b, 12)? as usize);
        let (str_off, str_len) = (u32_at(b, 16)? as usize, u32_at(b, 20)? as usize);
        let types = b.get(hdr_len + type_off..hdr_len + type_off + type_len).ok_or("type section out of range")?;
        let strs = b.get(hdr_len + str_off..hdr_len + str_off + str_len).ok_or("string section out of range")?;
        let mut all = vec![Type { kind: 0, name: 0, vlen: 0, kind_flag: false, size_or_type: 0, extra: 0 }];
        let mut at = 0;
        while at < types.len() {
            let info = u32_at(types, at + 4)?;
            let t = Type {
                kind: (info >> 24) & 0x1f,
                name: u32_at(types, at)?,
                vlen: (info & 0xffff) as usize,
                kind_flag: info >> 31 != 0,
                size_or_type: u32_at(types, at + 8)?,
                extra: at + 12,
            };
            at = t.extra
                + match t.kind {
                    INT | 14 | 17 => 4, // INT, VAR, DECL_TAG
                    ARRAY => 12,
                    STRUCT | UNION | 15 | ENUM64 => 12 * t.vlen, // 15: DATASEC
                    ENUM | 13 => 8 * t.vlen,                     // 13: FUNC_PROTO
                    PTR | 7 | TYPEDEF | VOLATILE | CONST | RESTRICT | 12 | FLOAT | TYPE_TAG => 0,
                    k => return Err(format!("unknown BTF kind {k}")),
                };
            all.push(t);
        }
        Ok(Btf { types, strs, all })
    }

    /// Rust source: `STRUCTS`, every named struct whose name starts with
    /// `prefix` in the objects' BTF, as (name, size, members); a struct
    /// two objects have is taken from the first.
    pub fn layouts(objects: &[(std::path::PathBuf, Vec<u8>)], prefix: &str) -> Result<String, String> {
        let mut out = String::from(
            "// Generated by build.rs from the BTF of lane.o (then lane_layout.o):\n\
             // lane.h's structs as clang laid them out (name, size, members as\n\
             // (name, offset, size)), included in src/lane/layout.rs.\n\
             pub(crate) const STRUCTS: &[super::Layout] = &[\n",
        );
        let mut seen = std::collections::BTreeSet::new();
        for (path, elf) in objects {
            let at = |e: String| format!("{}: {e}", path.display());
            let btf = parse(section(elf, ".BTF").map_err(at)?).map_err(at)?;
            for t in &btf.all {
                let name = btf.name(t.name).map_err(at)?;
                if t.kind != STRUCT || !name.starts_with(prefix) || !seen.insert(name.to_string()) {
                    continue;
                }
                let _ = writeln!(out, "    (\"{name}\", {}, &[", t.size_or_type);
                for (m, off, size) in btf.members(t).map_err(at)? {
                    let _ = writeln!(out, "        (\"{m}\", {off}, {size}),");
                }
                out.push_str("    ]),\n");
            }
        }
        out.push_str("];\n");
        Ok(out)
    }
}
