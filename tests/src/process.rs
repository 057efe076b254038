//! The real `queuebox` binary as a child process with a clean environment.

use crate::wait_until;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tempfile::TempDir;
use tokio::process::{Child, Command};

/// The `queuebox` binary built next to this test executable (`target/<profile>/queuebox`).
pub fn binary() -> PathBuf {
    // QB_TEST_QUEUEBOX names another build of the binary (a slim feature set, a build of its own).
    if let Some(path) = std::env::var_os("QB_TEST_QUEUEBOX") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("path of the test executable");
    // target/<profile>/deps/<test> -> target/<profile>/queuebox
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps");
    let binary = profile_dir.join("queuebox");
    assert!(
        binary.exists(),
        "{} does not exist: build it first with `cargo build -p queuebox` (cargo test --workspace does)",
        binary.display()
    );
    binary
}

/// A configuration file and environment to start the binary with.
pub struct Launch {
    dir: TempDir,
    config: PathBuf,
    env: Vec<(String, String)>,
}

impl Launch {
    /// Writes `yaml` to a temporary `queuebox.yml`.
    pub fn with_config(yaml: &str) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let config = dir.path().join("queuebox.yml");
        std::fs::write(&config, yaml).expect("write the configuration file");
        Self {
            dir,
            config,
            env: Vec::new(),
        }
    }

    /// Adds an environment variable (the child sees only these, plus PATH and HOME).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The temporary directory, for extra files such as secrets.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, args: &[&str], log: &Path) -> Command {
        let mut command = Command::new(binary());
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", std::env::var("HOME").unwrap_or_default())
            .env("RUST_LOG", "info")
            .env("QUEUEBOX_CONFIG_FILE", &self.config)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::from(
                std::fs::File::create(log.with_extension("out")).expect("stdout file"),
            ))
            .stderr(Stdio::from(
                std::fs::File::create(log).expect("stderr file"),
            ))
            .kill_on_drop(true);
        command
    }

    /// Runs `queuebox <args>` to completion (bounded by `deadline`) and returns its status, stdout
    /// and stderr.
    pub async fn run(&self, args: &[&str], deadline: Duration) -> (ExitStatus, String, String) {
        let log = self
            .dir
            .path()
            .join(format!("run-{}.log", uuid::Uuid::new_v4().simple()));
        let mut child = self.command(args, &log).spawn().expect("start queuebox");
        let status = match tokio::time::timeout(deadline, child.wait()).await {
            Ok(status) => status.expect("wait for queuebox"),
            Err(_) => {
                let _ = child.kill().await;
                panic!(
                    "queuebox {args:?} did not exit within {deadline:?}; stderr:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
        };
        let stdout = std::fs::read_to_string(log.with_extension("out")).unwrap_or_default();
        let stderr = std::fs::read_to_string(&log).unwrap_or_default();
        (status, stdout, stderr)
    }

    /// Starts `queuebox serve` in the background.
    pub fn spawn(self, args: &[&str]) -> QueueBox {
        let log = self.dir.path().join("serve.log");
        let child = self.command(args, &log).spawn().expect("start queuebox");
        QueueBox {
            child,
            log,
            _launch: self,
        }
    }
}

/// A running `queuebox` process.
pub struct QueueBox {
    child: Child,
    log: PathBuf,
    _launch: Launch,
}

impl QueueBox {
    /// What the process wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What the process wrote to stdout so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(self.log.with_extension("out")).unwrap_or_default()
    }

    /// Waits until `GET http://127.0.0.1:<port>/health/live` answers 200, or panics with the log.
    pub async fn wait_live(&mut self, port: u16, deadline: Duration) {
        let url = format!("http://127.0.0.1:{port}/health/live");
        let client = crate::http();
        let started = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("queuebox exited early with {status}; log:\n{}", self.log());
            }
            if let Ok(response) = client.get(&url).send().await
                && response.status().is_success()
            {
                return;
            }
            assert!(
                started.elapsed() < deadline,
                "queuebox not live within {deadline:?}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let pid = self.child.id().expect("the process is running") as i32;
        // The workspace forbids unsafe code, so the signal goes through kill(1) rather than libc.
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {pid} failed");
    }

    /// The process id, while the process runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends SIGKILL.
    pub fn kill9(&self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }

    /// Waits for the process to exit, at most `deadline`.
    pub async fn wait_exit(&mut self, deadline: Duration) -> ExitStatus {
        match tokio::time::timeout(deadline, self.child.wait()).await {
            Ok(status) => status.expect("wait for queuebox"),
            Err(_) => panic!(
                "queuebox did not exit within {deadline:?}; log:\n{}",
                self.log()
            ),
        }
    }

    /// Polls the log until it contains `text`.
    pub async fn wait_for_log(&self, text: &str, deadline: Duration) {
        wait_until(
            &format!("log line containing {text:?}"),
            deadline,
            || async { self.log().contains(text).then_some(()) },
        )
        .await;
    }
}
