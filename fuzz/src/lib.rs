//! k1s-fuzz: a small mutation fuzzer that runs under `cargo test` on stable Rust, and the fuzz
//! targets of k1s's input decoders (in `tests/`).
//!
//! Owns: the engine only ([`Target::run`]): seed corpus and regression inputs from
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`, byte-level havoc mutations (AFL's
//! flips, interesting values, dictionary words, splices, repeated chunks for deep nesting) and,
//! for JSON targets, structural mutations of the parsed document. No coverage instrumentation
//! (that needs nightly or an extra toolchain): instead each target returns a coarse signature of
//! what the input did (accepted, which error), and inputs that produce a new signature join the
//! pool that later mutations start from. It must never depend on k1s crates: the targets do.
//!
//! Budget and reproduction, from the environment:
//! - `K1S_FUZZ_SECONDS` (default 15): how long each target runs after its corpus and regressions;
//!   the eight targets, two at a time as `cargo test` runs them on two cores, then take about
//!   a minute and a half in a debug build.
//! - `K1S_FUZZ_SEED`: the random seed (default: from the clock, printed); a run is determined by
//!   the seed, the corpus and the number of inputs it gets through.
//! - `K1S_FUZZ_HANG_SECONDS` (default 10): an input that runs longer is a failure.
//!
//! A failing input (a panic, a hang, or a stack overflow, which aborts the process) is written
//! to `$TMPDIR/k1s-fuzz/<target>-crash-<hash>` (the input being run is always in
//! `$TMPDIR/k1s-fuzz/<target>.current`, so an abort leaves it there). Copy it into
//! `fuzz/regressions/<target>/` with a name that says what it broke: every file there runs
//! first, on every run.

use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod mutate;

pub use mutate::Mutator;

/// One fuzz target: its name (the corpus and regression folder), how its inputs are mutated,
/// and the stack it runs on.
#[derive(Clone, Debug)]
pub struct Target {
    name: &'static str,
    dictionary: Vec<Vec<u8>>,
    json: bool,
    max_len: usize,
    stack: usize,
}

impl Target {
    /// A target with the byte-level mutations only, inputs up to 64 KiB, on a 2 MiB stack (a
    /// tokio worker's, where the API server decodes requests).
    pub fn new(name: &'static str) -> Target {
        Target { name, dictionary: Vec::new(), json: false, max_len: 64 * 1024, stack: 2 * 1024 * 1024 }
    }

    /// Words the mutations insert (keywords, operators, field names of the format).
    pub fn dictionary(mut self, words: &[&str]) -> Target {
        self.dictionary.extend(words.iter().map(|w| w.as_bytes().to_vec()));
        self
    }

    /// Inputs are JSON documents: half the mutations edit the parsed document (replace, wrap,
    /// nest, drop, duplicate, retype nodes) before the byte-level ones.
    pub fn json(mut self) -> Target {
        self.json = true;
        self
    }

    /// The largest input a mutation may produce.
    pub fn max_len(mut self, bytes: usize) -> Target {
        self.max_len = bytes;
        self
    }

    fn dir(&self, kind: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(kind).join(self.name)
    }

    /// Runs `f` on every regression input and corpus file, then on mutated inputs until the
    /// budget is spent; panics (failing the test) on the first input that panics. `f` returns a
    /// coarse signature of the outcome (e.g. `Ok` or the error's kind, not its message): inputs
    /// with a signature not seen before are kept to mutate further.
    pub fn run<S: Hash>(self, f: impl Fn(&[u8]) -> S + Send + Sync + 'static) {
        let stack = self.stack;
        let name = self.name;
        let worker = std::thread::Builder::new()
            .name(format!("fuzz-{name}"))
            .stack_size(stack)
            .spawn(move || self.run_here(&f))
            .expect("spawn the fuzz thread");
        if let Err(panic) = worker.join() {
            std::panic::resume_unwind(panic);
        }
    }

    fn run_here<S: Hash>(self, f: &(dyn Fn(&[u8]) -> S + Send + Sync)) {
        let budget = env_f64("K1S_FUZZ_SECONDS").unwrap_or(15.0);
        let hang = Duration::from_secs_f64(env_f64("K1S_FUZZ_HANG_SECONDS").unwrap_or(10.0));
        let seed = std::env::var("K1S_FUZZ_SEED")
            .ok()
            .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
            });
        let out = std::env::temp_dir().join("k1s-fuzz");
        std::fs::create_dir_all(&out).expect("create the fuzz output folder");
        let current_path = out.join(format!("{}.current", self.name));
        let current = std::fs::File::create(&current_path).expect("create the current-input file");
        // First, straight to the terminal (the test harness captures `eprintln!`): a stack
        // overflow aborts the process before anything else could say which seed it ran.
        let _ = writeln!(
            std::io::stderr(),
            "fuzz {}: seed {seed:#x} (K1S_FUZZ_SEED={seed:x} repeats it), {budget} s; input being run: {}",
            self.name,
            current_path.display()
        );
        let runner = Runner { name: self.name, out: out.clone(), current, started: Arc::new(AtomicU64::new(0)) };
        let epoch = Instant::now();
        let done = Arc::new(AtomicBool::new(false));
        let watchdog = runner.watchdog(epoch, hang, done.clone(), current_path.clone());

        let regressions = read_dir(&self.dir("regressions"));
        let corpus = read_dir(&self.dir("corpus"));
        assert!(
            !corpus.is_empty() || !regressions.is_empty(),
            "fuzz target {}: no seed inputs in {}",
            self.name,
            self.dir("corpus").display()
        );
        let mut seen = std::collections::HashSet::new();
        let mut pool: Vec<Vec<u8>> = Vec::new();
        for (path, input) in regressions.iter().chain(&corpus) {
            let sig = runner
                .exec(epoch, f, input)
                .unwrap_or_else(|panic| panic!("fuzz target {}: {} panics: {panic}", self.name, path.display()));
            seen.insert(sig);
            pool.push(input.clone());
        }
        let seeds = pool.len();

        let mut mutator = Mutator::new(seed, self.dictionary.clone(), self.max_len);
        let deadline = Instant::now() + Duration::from_secs_f64(budget);
        let mut runs: u64 = 0;
        while Instant::now() < deadline {
            // Most inputs stack a few mutations on one pool entry; some splice two.
            let base = &pool[mutator.below(pool.len())];
            let other = &pool[mutator.below(pool.len())];
            let input = mutator.mutate(base, other, self.json);
            runs += 1;
            match runner.exec(epoch, f, &input) {
                Ok(sig) => {
                    if seen.insert(sig) && pool.len() < 4096 {
                        pool.push(input);
                    }
                }
                Err(panic) => {
                    done.store(true, Ordering::Relaxed);
                    let small = minimize(&runner, epoch, f, input, Duration::from_secs(20));
                    let file = runner.save_crash(&small);
                    panic!(
                        "fuzz target {}: input {} panics: {panic}\n  input: {}\n  (seed {seed:#x}, after {runs} inputs; \
                         add it to fuzz/regressions/{}/ once fixed)",
                        self.name,
                        file.display(),
                        escape(&small),
                        self.name
                    );
                }
            }
        }
        done.store(true, Ordering::Relaxed);
        let _ = watchdog.join();
        let _ = std::fs::remove_file(&current_path);
        let secs = budget.max(f64::EPSILON);
        // Straight to the terminal: the test harness captures `eprintln!` of passing tests.
        let _ = writeln!(
            std::io::stderr(),
            "fuzz {}: {} seeds, {runs} inputs in {budget:.0} s ({:.0}/s), {} outcomes, pool {}, seed {seed:#x}",
            self.name,
            seeds,
            runs as f64 / secs,
            seen.len(),
            pool.len()
        );
    }
}

/// Runs inputs one at a time, each first written to the current-input file.
struct Runner {
    name: &'static str,
    out: PathBuf,
    current: std::fs::File,
    /// When the input being run started, in milliseconds since the run began (0: none).
    started: Arc<AtomicU64>,
}

impl Runner {
    fn exec<S: Hash>(
        &self,
        epoch: Instant,
        f: &(dyn Fn(&[u8]) -> S + Send + Sync),
        input: &[u8],
    ) -> Result<u64, String> {
        let _ = self.current.set_len(0);
        let _ = self.current.write_all_at(input, 0);
        self.started.store(epoch.elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            f(input).hash(&mut h);
            h.finish()
        }));
        self.started.store(0, Ordering::Relaxed);
        result.map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into())
        })
    }

    /// Fails the whole process when one input runs longer than `hang`: a thread cannot be
    /// stopped, and an endless loop is as bad as a crash for a server.
    fn watchdog(
        &self,
        epoch: Instant,
        hang: Duration,
        done: Arc<AtomicBool>,
        current: PathBuf,
    ) -> std::thread::JoinHandle<()> {
        let (started, name, out) = (self.started.clone(), self.name, self.out.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let at = started.load(Ordering::Relaxed);
                if at == 0 {
                    continue;
                }
                let running = epoch.elapsed().saturating_sub(Duration::from_millis(at - 1));
                if running > hang && !done.load(Ordering::Relaxed) {
                    let input = std::fs::read(&current).unwrap_or_default();
                    let file = out.join(format!("{name}-hang-{:016x}", hash(&input)));
                    let _ = std::fs::write(&file, &input);
                    let _ = writeln!(
                        std::io::stderr(),
                        "fuzz target {name}: input {} still running after {hang:?}\n  input: {}",
                        file.display(),
                        escape(&input)
                    );
                    std::process::exit(101);
                }
            }
        })
    }

    fn save_crash(&self, input: &[u8]) -> PathBuf {
        let file = self.out.join(format!("{}-crash-{:016x}", self.name, hash(input)));
        let _ = std::fs::write(&file, input);
        file
    }
}

/// The smallest input (within `time`) that still panics, by deleting chunks of halving size.
fn minimize<S: Hash>(
    runner: &Runner,
    epoch: Instant,
    f: &(dyn Fn(&[u8]) -> S + Send + Sync),
    mut input: Vec<u8>,
    time: Duration,
) -> Vec<u8> {
    let deadline = Instant::now() + time;
    // Quiet: every attempt that still panics would print its message again.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut chunk = input.len() / 2;
    while chunk > 0 && Instant::now() < deadline {
        let mut at = 0;
        while at + chunk <= input.len() && Instant::now() < deadline {
            let mut shorter = input.clone();
            shorter.drain(at..at + chunk);
            if runner.exec(epoch, f, &shorter).is_err() {
                input = shorter;
            } else {
                at += chunk;
            }
        }
        chunk /= 2;
    }
    std::panic::set_hook(hook);
    input
}

fn read_dir(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files.into_iter().filter_map(|p| std::fs::read(&p).ok().map(|b| (p, b))).collect()
}

fn env_f64(name: &str) -> Option<f64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn hash(input: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    input.hash(&mut h);
    h.finish()
}

/// The input as a Rust byte string literal (shortened past 2 KiB).
pub fn escape(input: &[u8]) -> String {
    let shown = &input[..input.len().min(2048)];
    let mut s = String::from("b\"");
    for b in shown.iter().flat_map(|b| std::ascii::escape_default(*b)) {
        s.push(b as char);
    }
    s.push('"');
    if input.len() > shown.len() {
        s.push_str(&format!(" ... ({} bytes)", input.len()));
    }
    s
}
