//! A binary of the profiled process, and what a reader should know about the names read from it.

/// A binary mapped into the profiled process.
#[derive(Debug, Clone, PartialEq)]
pub struct Module {
    /// The path the process mapped it from.
    pub path: String,
    /// Its executable mapping: first address, one past the last, and the file offset of `start`.
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// See `start`.
    pub file_offset: u64,
    /// The GNU build id, when the binary has one.
    pub build_id: Option<Vec<u8>>,
    /// Whether function names were found (DWARF or symbol table).
    pub has_functions: bool,
    /// Whether files and lines were found (DWARF).
    pub has_lines: bool,
    /// Whether this is the program itself (the first binary the dump maps), not a shared library.
    pub is_main_program: bool,
    /// How many of the profile's addresses in this binary nothing named: they show as `module+0xoffset`.
    pub unnamed_addresses: usize,
    /// An inlined Rust function its DWARF names without the function's path, such as
    /// `build<alloc::string::String>`: the binary was built with `debug = "line-tables-only"`, whose DWARF
    /// keeps no linkage names, so its inlined frames have short names (see [`Module::note`]).
    pub short_inline_name: Option<String>,
    /// Why the binary could not be read, if it could not.
    pub problem: Option<String>,
    /// The file read in its place (`memprof analyze --binary`), when it is not `path`.
    pub read_from: Option<String>,
    /// Where its debug info came from, when not from the binary or the machine's debug directories: a
    /// debuginfod server of `DEBUGINFOD_URLS` (or that client's cache), said in the notes.
    pub debug_info_from: Option<String>,
}

impl Module {
    /// The GNU build id in lowercase hexadecimal, as debuginfod, pprof and OTLP write it; empty when the
    /// binary has none.
    ///
    /// ```
    /// # let module = memprof_analysis::Module {
    /// #     path: String::new(), start: 0, end: 0, file_offset: 0, build_id: Some(vec![0xd6, 0x6b, 0x0f]),
    /// #     has_functions: true, has_lines: true, is_main_program: true, unnamed_addresses: 0,
    /// #     short_inline_name: None, problem: None, read_from: None, debug_info_from: None };
    /// assert_eq!(module.build_id_hex(), "d66b0f");
    /// assert_eq!(memprof_analysis::Module { build_id: None, ..module }.build_id_hex(), "");
    /// ```
    pub fn build_id_hex(&self) -> String {
        self.build_id.iter().flatten().map(|byte| format!("{byte:02x}")).collect()
    }

    /// Where `address` lies in the binary's file; `None` when it is outside the mapping or the dump's offsets
    /// overflow (a dump's numbers are claims).
    ///
    /// ```
    /// # let module = memprof_analysis::Module {
    /// #     path: String::new(), start: 0x1000, end: 0x2000, file_offset: 0x400, build_id: None,
    /// #     has_functions: true, has_lines: true, is_main_program: true, unnamed_addresses: 0,
    /// #     short_inline_name: None, problem: None, read_from: None, debug_info_from: None };
    /// assert_eq!(module.offset_of(0x1010), Some(0x410));
    /// assert_eq!(module.offset_of(0x10), None);
    /// let hostile = memprof_analysis::Module { file_offset: u64::MAX, ..module };
    /// assert_eq!(hostile.offset_of(0x1010), None);
    /// ```
    pub fn offset_of(&self, address: u64) -> Option<u64> {
        address.checked_sub(self.start)?.checked_add(self.file_offset)
    }

    /// What a reader of the profile should know about this binary's names, if anything: why it could not be
    /// read, what the program's build left out (symbols, debug info) and how to get it, or that its inlined
    /// frames have short names and how to build it for whole ones.
    ///
    /// ```
    /// # let mut module = memprof_analysis::Module {
    /// #     path: String::new(), start: 0, end: 0, file_offset: 0, build_id: None, has_functions: true,
    /// #     has_lines: true, is_main_program: true, unnamed_addresses: 0, short_inline_name: None,
    /// #     problem: None, read_from: None, debug_info_from: None };
    /// module.path = "/srv/service".into();
    /// assert_eq!(module.note(), None);
    /// module.short_inline_name = Some("build<alloc::string::String>".into());
    /// assert_eq!(
    ///     module.note().unwrap(),
    ///     "short names in /srv/service: inlined functions are named without their path \
    ///      (build<alloc::string::String>), as its debug = \"line-tables-only\" DWARF names them; \
    ///      build it with debug = \"limited\" for whole paths"
    /// );
    /// module.has_lines = false;
    /// assert!(module.note().unwrap().starts_with("no debug info in /srv/service: "));
    /// module.unnamed_addresses = 2;
    /// assert!(module.note().unwrap().starts_with("no symbols in /srv/service for 2 addresses: "));
    /// // Symbolized with another file (`memprof analyze --binary`): the note names the file given.
    /// let given = memprof_analysis::Module { read_from: Some("/tmp/service.copy".into()), ..module.clone() };
    /// assert!(given.note().unwrap().starts_with("no symbols in /tmp/service.copy (read for /srv/service) for 2 addresses: "));
    /// // A shared library without symbols for some of its code, as libc without its -dbg package: nothing.
    /// let libc = memprof_analysis::Module {
    ///     path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(), is_main_program: false, short_inline_name: None,
    ///     ..module
    /// };
    /// assert_eq!(libc.note(), None);
    /// // Names from a debuginfod server's debug info: said where they came from.
    /// let fetched = memprof_analysis::Module {
    ///     debug_info_from: Some("the debuginfod server https://debuginfod.example".into()),
    ///     ..libc
    /// };
    /// assert_eq!(
    ///     fetched.note().unwrap(),
    ///     "names in /usr/lib/x86_64-linux-gnu/libc.so.6 from the debug info of the debuginfod server https://debuginfod.example"
    /// );
    /// ```
    pub fn note(&self) -> Option<String> {
        // What the reader can act on: the file given in the binary's place, when one was.
        let path = match &self.read_from {
            Some(file) => format!("{file} (read for {})", self.path),
            None => self.path.clone(),
        };
        if let Some(problem) = &self.problem {
            return Some(format!("not symbolized: {problem}"));
        }
        // Shared libraries without symbols or debug info are the rule (distributions ship them apart, and
        // containers seldom have them: Debian's libc names `start_thread` only with libc6-dbg), so a line
        // each would end every profile. The program is what its builder can change.
        if self.is_main_program && self.unnamed_addresses > 0 {
            return Some(format!(
                "no symbols in {path} for {} address{}: it is stripped; symbolize the raw dump where its \
                 unstripped build is (memprof analyze <dump> --binary <unstripped build>)",
                self.unnamed_addresses,
                if self.unnamed_addresses == 1 { "" } else { "es" }
            ));
        }
        if self.is_main_program && !self.has_lines {
            return Some(format!(
                "no debug info in {path}: functions inlined into others show as their callers, without files \
                 or lines; build it with debug = \"limited\""
            ));
        }
        let Some(name) = &self.short_inline_name else {
            let from = self.debug_info_from.as_ref()?;
            return Some(format!("names in {path} from the debug info of {from}"));
        };
        Some(format!(
            "short names in {path}: inlined functions are named without their path ({name}), as its \
             debug = \"line-tables-only\" DWARF names them; build it with debug = \"limited\" for whole paths"
        ))
    }
}
