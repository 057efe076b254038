//! The Dockerfile, read as a file (no container engine runs here): the runtime stage runs as a
//! non-root user (the uid the Kubernetes manifests set), the FEATURES build argument reaches
//! `cargo build --features`, and the HEALTHCHECK command, run as written against the real binary,
//! passes with and without a management port and fails once the process is gone.
//! `scripts/check-kubernetes.sh` lints the same file with hadolint.

use queuebox_tests::database::TestDatabase;
use queuebox_tests::docs::repo_root;
use queuebox_tests::free_port;
use queuebox_tests::process::Launch;
use std::time::Duration;

const START: Duration = Duration::from_secs(30);

/// One instruction: its keyword in upper case and its arguments, continuation lines joined.
#[derive(Debug)]
struct Instruction {
    keyword: String,
    args: String,
}

fn instructions() -> Vec<Instruction> {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile")).expect("read Dockerfile");
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (current.is_empty() && trimmed.is_empty()) {
            continue;
        }
        if let Some(body) = trimmed.strip_suffix('\\') {
            current.push_str(body);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        let (keyword, args) = current
            .split_once(char::is_whitespace)
            .unwrap_or((&current, ""));
        out.push(Instruction {
            keyword: keyword.to_ascii_uppercase(),
            args: args.trim().to_owned(),
        });
        current.clear();
    }
    out
}

/// The instructions of each stage (from its FROM to the next), in order.
fn stages() -> Vec<Vec<Instruction>> {
    let mut stages: Vec<Vec<Instruction>> = Vec::new();
    for instruction in instructions() {
        if instruction.keyword == "FROM" {
            stages.push(Vec::new());
        }
        if let Some(stage) = stages.last_mut() {
            stage.push(instruction);
        }
    }
    assert!(stages.len() >= 2, "a build stage and a runtime stage");
    stages
}

fn runtime_stage() -> Vec<Instruction> {
    stages().pop().expect("a runtime stage")
}

/// The value of `--flag VALUE` in a shell command, when present.
fn flag_value<'a>(command: &'a str, flag: &str) -> Option<&'a str> {
    let mut words = command.split_whitespace();
    while let Some(word) = words.next() {
        if word == flag {
            return words.next();
        }
        if let Some(value) = word.strip_prefix(&format!("{flag}=")) {
            return Some(value);
        }
    }
    None
}

#[test]
fn the_runtime_stage_runs_as_a_non_root_user_with_the_uid_of_the_kubernetes_manifests() {
    let stage = runtime_stage();
    let user = stage
        .iter()
        .rfind(|i| i.keyword == "USER")
        .expect("the runtime stage sets USER")
        .args
        .clone();
    let (uid, gid) = user.split_once(':').unwrap_or((&user, ""));
    assert!(
        !["root", "0"].contains(&uid) && !["root", "0"].contains(&gid),
        "USER {user} is root"
    );
    // The user is created in the same stage with that uid, so the image's /etc/passwd names it.
    let created = stage
        .iter()
        .filter(|i| i.keyword == "RUN")
        .find_map(|i| {
            i.args
                .split("&&")
                .find(|part| part.trim_start().starts_with("useradd"))
        })
        .expect("the runtime stage creates its user with useradd");
    if uid.chars().all(|c| c.is_ascii_digit()) {
        assert_eq!(
            flag_value(created, "--uid"),
            Some(uid),
            "USER {user} is not the uid useradd gives: {created}"
        );
    } else {
        assert!(created.trim_end().ends_with(uid), "{created}");
    }

    // Kubernetes' runAsNonRoot needs a numeric user; the manifests set the image's.
    let base = repo_root().join("deploy/kubernetes/base");
    let mut seen = 0;
    for entry in std::fs::read_dir(&base).expect("deploy/kubernetes/base") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("read manifest");
        for line in text.lines() {
            if let Some(value) = line.trim().strip_prefix("runAsUser:") {
                assert_eq!(
                    value.trim(),
                    uid,
                    "runAsUser in {base:?} differs from USER {user}"
                );
                seen += 1;
            }
        }
    }
    assert!(seen >= 2, "both Deployments set runAsUser ({seen} seen)");
}

#[test]
fn the_features_build_argument_reaches_cargo_build() {
    let stages = stages();
    let build = stages
        .iter()
        .find(|stage| {
            stage
                .iter()
                .any(|i| i.keyword == "RUN" && i.args.contains("cargo build"))
        })
        .expect("a stage runs cargo build");
    let arg = build
        .iter()
        .find(|i| i.keyword == "ARG" && i.args.starts_with("FEATURES"))
        .expect("ARG FEATURES in the build stage");
    let defaults = arg
        .args
        .split_once('=')
        .map(|(_, value)| value.trim_matches('"'))
        .expect("ARG FEATURES has a default");
    let run = build
        .iter()
        .find(|i| i.keyword == "RUN" && i.args.contains("cargo build"))
        .expect("RUN cargo build");
    let features = flag_value(&run.args, "--features").expect("cargo build --features");
    assert!(
        [
            "\"${FEATURES}\"",
            "${FEATURES}",
            "\"$FEATURES\"",
            "$FEATURES"
        ]
        .contains(&features),
        "cargo build --features {features}: not the FEATURES argument"
    );
    assert!(
        run.args.contains("--no-default-features"),
        "without --no-default-features a slim FEATURES still builds every backend: {}",
        run.args
    );
    assert!(run.args.contains("-p queuebox"), "{}", run.args);

    // Every default feature is one the queuebox package declares.
    let manifest =
        std::fs::read_to_string(repo_root().join("bin/Cargo.toml")).expect("bin/Cargo.toml");
    let table = manifest
        .split("[features]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("bin/Cargo.toml has [features]");
    for feature in defaults.split(',') {
        assert!(
            table
                .lines()
                .any(|line| line.trim_start().starts_with(&format!("{feature} ="))),
            "ARG FEATURES names {feature}, which bin/Cargo.toml does not declare"
        );
    }
}

/// The HEALTHCHECK's command as an argv, and its --timeout.
fn healthcheck() -> (Vec<String>, Duration) {
    let stage = runtime_stage();
    let check = stage
        .iter()
        .find(|i| i.keyword == "HEALTHCHECK")
        .expect("the runtime stage has a HEALTHCHECK");
    let (options, command) = check
        .args
        .split_once("CMD ")
        .expect("HEALTHCHECK ... CMD ...");
    let timeout = flag_value(options, "--timeout")
        .and_then(|t| t.strip_suffix('s'))
        .and_then(|t| t.parse().ok())
        .map(Duration::from_secs)
        .expect("HEALTHCHECK --timeout=<n>s");
    let command = command.trim();
    let argv = if command.starts_with('[') {
        serde_json::from_str(command).expect("the exec form is a JSON array of strings")
    } else {
        vec!["/bin/sh".to_owned(), "-c".to_owned(), command.to_owned()]
    };
    (argv, timeout)
}

/// Runs the HEALTHCHECK command with the container's environment (`env`), as the engine would,
/// and returns whether it passed.
async fn run_healthcheck(env: &[(&str, String)]) -> bool {
    let (argv, timeout) = healthcheck();
    let mut command = tokio::process::Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("run the HEALTHCHECK command");
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => status.expect("wait for the HEALTHCHECK command").success(),
        Err(_) => false,
    }
}

#[tokio::test]
async fn the_healthcheck_passes_with_and_without_a_management_port_and_fails_when_stopped() {
    let db = TestDatabase::create().await;
    let config = format!(
        "database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
    );

    // The ports come from QUEUEBOX_ variables, which the container's HEALTHCHECK sees too.
    for management in [false, true] {
        let data_port = free_port();
        let mut env = vec![("QUEUEBOX_SERVER_HTTPPORT", data_port.to_string())];
        let probe_port = if management {
            let port = free_port();
            env.push(("QUEUEBOX_SERVER_MANAGEMENTPORT", port.to_string()));
            port
        } else {
            data_port
        };
        let mut launch = Launch::with_config(&config);
        for (name, value) in &env {
            launch = launch.env(name, value);
        }
        let mut qb = launch.spawn(&["serve"]);
        qb.wait_live(probe_port, START).await;

        if management {
            // The trap: the data port answers 404 for /health/live once a management port is set.
            let data = queuebox_tests::http()
                .get(format!("http://127.0.0.1:{data_port}/health/live"))
                .send()
                .await
                .expect("GET the data port");
            assert_eq!(data.status(), 404, "with a management port");
        }
        assert!(
            run_healthcheck(&env).await,
            "the HEALTHCHECK failed against a live QueueBox (management port: {management}); log:\n{}",
            qb.log()
        );

        qb.terminate();
        let status = qb.wait_exit(START).await;
        assert!(status.success(), "queuebox exited with {status}");
        assert!(
            !run_healthcheck(&env).await,
            "the HEALTHCHECK passed with no QueueBox running (management port: {management})"
        );
    }
    db.drop_database().await;
}
