//! The state directory of capture: the `identity` file that ties it to the database record, and
//! `offsets.dat` with the last handled log position.
//!
//! Each file is replaced whole: written to a temporary file, flushed to disk, renamed over the old
//! one, and the directory flushed, so a crash leaves either the old or the new content, never a
//! torn one. (This is file I/O, not a database or broker, so it lives here rather than behind a
//! port: it is the same for every database product.)

use queuebox_domain::capture::{FilesState, Lsn};
use std::io::Write as _;
use std::path::{Path, PathBuf};

const IDENTITY: &str = "identity";
const OFFSETS: &str = "offsets.dat";

/// The files of one state directory.
#[derive(Debug, Clone)]
pub struct StateFiles {
    dir: PathBuf,
}

impl StateFiles {
    /// The files under `dir` (`outbox.capture.stateDirectory`).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the directory holds.
    ///
    /// # Errors
    /// The text of an I/O failure other than a missing file, naming the path.
    pub async fn read(&self) -> Result<FilesState, String> {
        let dir = self.dir.clone();
        blocking(move || read_state(&dir)).await
    }

    /// Writes the `identity` file: the instance and the scope description it was created for.
    ///
    /// # Errors
    /// The text of the I/O failure, naming the path.
    pub async fn write_identity(&self, instance_id: &str, scope: &str) -> Result<(), String> {
        let text = format!(
            "# QueueBox capture identity. Do not edit: it ties this directory to queuebox_capture_state.\ninstance={instance_id}\nscope={scope}\n"
        );
        let dir = self.dir.clone();
        blocking(move || replace(&dir, IDENTITY, &text)).await
    }

    /// Writes `offsets.dat`.
    ///
    /// # Errors
    /// The text of the I/O failure, naming the path.
    pub async fn write_offset(&self, position: Lsn) -> Result<(), String> {
        let dir = self.dir.clone();
        blocking(move || replace(&dir, OFFSETS, &format!("{position}\n"))).await
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| format!("state directory task failed: {error}"))?
}

fn read_state(dir: &Path) -> Result<FilesState, String> {
    let identity = match read_optional(&dir.join(IDENTITY))? {
        Some(text) => text,
        None => {
            return Ok(match read_optional(&dir.join(OFFSETS))? {
                Some(_) => FilesState::Corrupt(format!(
                    "{} holds {OFFSETS} but no {IDENTITY} file",
                    dir.display()
                )),
                None => FilesState::Empty,
            });
        }
    };
    let mut instance_id = None;
    let mut scope = None;
    for line in identity.lines() {
        if let Some(value) = line.strip_prefix("instance=") {
            instance_id = Some(value.trim().to_owned());
        } else if let Some(value) = line.strip_prefix("scope=") {
            scope = Some(value.trim().to_owned());
        }
    }
    let Some(instance_id) = instance_id.filter(|id| !id.is_empty()) else {
        return Ok(FilesState::Corrupt(format!(
            "{} names no instance",
            dir.join(IDENTITY).display()
        )));
    };
    let offset = match read_optional(&dir.join(OFFSETS))? {
        None => None,
        Some(text) => match text.trim().parse::<Lsn>() {
            Ok(position) => Some(position),
            Err(error) => {
                return Ok(FilesState::Corrupt(format!(
                    "{}: {error}",
                    dir.join(OFFSETS).display()
                )));
            }
        },
    };
    Ok(FilesState::Present {
        instance_id,
        scope,
        offset,
    })
}

fn read_optional(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(format!("reading {}: {error}", path.display())),
    }
}

fn replace(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    let fail = |what: &str, path: &Path, error: std::io::Error| {
        format!("{what} {}: {error}", path.display())
    };
    std::fs::create_dir_all(dir).map_err(|e| fail("creating", dir, e))?;
    let target = dir.join(name);
    let temporary = dir.join(format!(".{name}.tmp"));
    let mut file =
        std::fs::File::create(&temporary).map_err(|e| fail("creating", &temporary, e))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| fail("writing", &temporary, e))?;
    drop(file);
    std::fs::rename(&temporary, &target).map_err(|e| fail("replacing", &target, e))?;
    // The rename is durable only once the directory entry is.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| fail("flushing", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("qb-capture-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[tokio::test]
    async fn a_missing_directory_reads_empty_and_writes_create_it() {
        let dir = scratch("fresh");
        let files = StateFiles::new(&dir);
        assert_eq!(files.read().await, Ok(FilesState::Empty));
        files
            .write_identity("abc", "mode=x slot=y")
            .await
            .expect("identity");
        files
            .write_offset(Lsn(0x1_0000_0010))
            .await
            .expect("offset");
        assert_eq!(
            files.read().await,
            Ok(FilesState::Present {
                instance_id: "abc".into(),
                scope: Some("mode=x slot=y".into()),
                offset: Some(Lsn(0x1_0000_0010)),
            })
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("offsets.dat")).expect("read"),
            "1/10\n"
        );
        assert!(!dir.join(".offsets.dat.tmp").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn unreadable_content_is_corrupt_naming_the_file() {
        let dir = scratch("corrupt");
        let files = StateFiles::new(&dir);
        files.write_identity("abc", "s").await.expect("identity");
        std::fs::write(dir.join("offsets.dat"), "not a position").expect("write");
        let Ok(FilesState::Corrupt(why)) = files.read().await else {
            panic!("expected corrupt")
        };
        assert!(why.contains("offsets.dat"), "{why}");
        std::fs::remove_file(dir.join("identity")).expect("remove");
        let Ok(FilesState::Corrupt(why)) = files.read().await else {
            panic!("expected corrupt")
        };
        assert!(why.contains("no identity file"), "{why}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
