//! The compiled-component cache: a hit loads code that behaves as a fresh compilation, and an
//! entry that is missing, cut short, corrupted, or from another engine configuration is never
//! used: it is compiled again and replaced. Concurrent threads and processes (some killed
//! mid-write) share a directory safely, and a cache that cannot be written only costs time.

use std::path::{Path, PathBuf};

use host_wasmtime::component::sandbox_engine;
use host_wasmtime::{CacheOutcome, ComponentCache, LockComponent, SandboxLimits, LOCK_COMPONENT};
use lock_core::{AcquireOutcome, Duration, Fence, Grant, Instant, LockError};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lock-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The component answers like the core: it really is the lock component.
fn works(component: &LockComponent) {
    let mut table = component
        .instantiate(&lock_core::Limits::default(), 0, SandboxLimits::default())
        .unwrap();
    assert_eq!(
        table
            .try_acquire("k", "a", Duration(100), Instant(0))
            .unwrap(),
        Ok(AcquireOutcome::Acquired(Grant {
            fence: Fence(1),
            deadline: Instant(100)
        }))
    );
    assert_eq!(
        table
            .try_acquire("k", "b", Duration(100), Instant(1))
            .unwrap(),
        Err(LockError::Held {
            deadline: Instant(100)
        })
    );
}

fn load(cache: &ComponentCache) -> CacheOutcome {
    let (component, outcome) = LockComponent::from_bytes_cached(LOCK_COMPONENT, cache).unwrap();
    works(&component);
    outcome
}

fn entry(cache: &ComponentCache) -> PathBuf {
    cache
        .entry(&sandbox_engine().unwrap(), LOCK_COMPONENT)
        .unwrap()
}

fn edit(path: &Path, change: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(path).unwrap();
    change(&mut bytes);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_miss_stores_the_entry_and_the_next_load_is_a_hit() {
    let dir = temp_dir("hit");
    let cache = ComponentCache::Dir(dir.clone());
    assert_eq!(load(&cache), CacheOutcome::Miss);
    assert!(entry(&cache).is_file());
    assert_eq!(load(&cache), CacheOutcome::Hit);
    assert_eq!(load(&ComponentCache::Off), CacheOutcome::Disabled);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the cache directory is private: {mode:o}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A change to an entry's bytes.
type Damage = Box<dyn Fn(&mut Vec<u8>)>;

#[test]
fn a_damaged_entry_is_refused_and_replaced() {
    let dir = temp_dir("damaged");
    let cache = ComponentCache::Dir(dir.clone());
    assert_eq!(load(&cache), CacheOutcome::Miss);
    let path = entry(&cache);
    let len = std::fs::metadata(&path).unwrap().len() as usize;
    let damages: Vec<(&str, Damage)> = vec![
        (
            "a flipped bit in the code",
            Box::new(move |b| b[len / 2] ^= 1),
        ),
        (
            "the last byte cut off",
            Box::new(|b| b.truncate(b.len() - 1)),
        ),
        ("cut to its header", Box::new(|b| b.truncate(24))),
        ("empty", Box::new(Vec::clear)),
        ("a byte appended", Box::new(|b| b.push(0))),
        ("another format version", Box::new(|b| b[8] ^= 0xff)),
    ];
    for (what, damage) in damages {
        edit(&path, damage);
        assert_eq!(load(&cache), CacheOutcome::Replaced, "{what}");
        assert_eq!(load(&cache), CacheOutcome::Hit, "after replacing {what}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_entry_compiled_for_another_engine_configuration_is_never_loaded() {
    // A valid, well-framed entry, but compiled by an engine without epoch interruption (the
    // sandbox's time bound): put where this engine's entry belongs, wasmtime refuses it.
    let other_dir = temp_dir("other-engine");
    let other = wasmtime::Engine::new(&wasmtime::Config::new()).unwrap();
    let other_cache = ComponentCache::Dir(other_dir.clone());
    let (_, outcome) = other_cache.load_or_compile(&other, LOCK_COMPONENT).unwrap();
    assert_eq!(outcome, CacheOutcome::Miss);
    let other_entry = other_cache.entry(&other, LOCK_COMPONENT).unwrap();

    let dir = temp_dir("this-engine");
    let cache = ComponentCache::Dir(dir.clone());
    assert_ne!(
        entry(&cache).file_name(),
        other_entry.file_name(),
        "the key covers the engine configuration"
    );
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&other_entry, entry(&cache)).unwrap();
    assert_eq!(load(&cache), CacheOutcome::Replaced);
    assert_eq!(load(&cache), CacheOutcome::Hit);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(other_dir);
}

#[test]
fn the_key_covers_the_component_bytes() {
    let cache = ComponentCache::Dir(temp_dir("key"));
    let engine = sandbox_engine().unwrap();
    let mut changed = LOCK_COMPONENT.to_vec();
    let last = changed.len() - 1;
    changed[last] ^= 1;
    assert_ne!(
        cache.entry(&engine, LOCK_COMPONENT),
        cache.entry(&engine, &changed)
    );
    assert_eq!(ComponentCache::Off.entry(&engine, LOCK_COMPONENT), None);
}

#[test]
fn concurrent_loads_share_a_directory() {
    let dir = temp_dir("concurrent");
    let cache = ComponentCache::Dir(dir.clone());
    let outcomes: Vec<CacheOutcome> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| load(&cache))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, CacheOutcome::Miss | CacheOutcome::Hit)),
        "{outcomes:?}"
    );
    assert_eq!(load(&cache), CacheOutcome::Hit);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_cache_that_cannot_be_written_only_costs_time() {
    // The "directory" is a file: nothing can be stored under it.
    let file = temp_dir("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    let cache = ComponentCache::Dir(file.join("cache"));
    assert_eq!(load(&cache), CacheOutcome::Miss);
    assert_eq!(load(&cache), CacheOutcome::Miss);
    let _ = std::fs::remove_file(file);
}

/// Set in the child processes of the next test: the cache directory to load through.
const CACHE_CHILD_ENV: &str = "LOCK_CACHE_CHILD";

/// The child's work (only when spawned by the parent test): load through the shared cache,
/// prove the component works, say how it was obtained.
#[test]
#[ignore = "run as a child process by processes_racing_on_one_directory_share_it_safely"]
fn cache_child() {
    let Ok(dir) = std::env::var(CACHE_CHILD_ENV) else {
        return;
    };
    let outcome = load(&ComponentCache::Dir(PathBuf::from(dir)));
    println!("outcome {outcome:?}");
}

#[test]
fn processes_racing_on_one_directory_share_it_safely() {
    // Several processes load through one empty directory at once, and some are killed while
    // they compile or write: the survivors and every later process get a working component, and
    // no half-written entry is ever loaded (a torn one would be refused and replaced, not run).
    let dir = temp_dir("processes");
    let exe = std::env::current_exe().unwrap();
    let spawn = || {
        std::process::Command::new(&exe)
            .args([
                "cache_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CACHE_CHILD_ENV, &dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    for round in 0..3u64 {
        let mut children: Vec<_> = (0..4).map(|_| spawn()).collect();
        // Kill one child after a varying delay: before, during or after its write.
        std::thread::sleep(std::time::Duration::from_millis(50 + 150 * round));
        let _ = children[0].kill();
        for (i, child) in children.into_iter().enumerate() {
            let out = child.wait_with_output().unwrap();
            if i > 0 {
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success(),
                    "child {i} of round {round} failed: {text}"
                );
                assert!(
                    text.contains("outcome Hit") || text.contains("outcome Miss"),
                    "child {i} of round {round}: {text}"
                );
            }
        }
    }
    assert_eq!(load(&ComponentCache::Dir(dir.clone())), CacheOutcome::Hit);
    let _ = std::fs::remove_dir_all(dir);
}
