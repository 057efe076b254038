//! Start-up probe: starts a command, polls `GET <path>` on 127.0.0.1:<port> every few milliseconds
//! over a fresh TCP connection, and prints the milliseconds from the exec to the first `200`. Then
//! it stops the command with SIGTERM (SIGKILL after 10 s) and waits for it.
//!
//! Usage: qb-bench-startup --port 18080 [--path /health/ready] [--interval-ms 2] [--timeout-s 20]
//!        [--hold-s 0] -- COMMAND [ARG ...]
//! --hold-s keeps the command running that long after ready (then prints VmRSS/VmHWM of the child).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let split = args.iter().position(|a| a == "--").unwrap_or_else(|| usage());
    let (opts, cmd) = (&args[1..split], &args[split + 1..]);
    if cmd.is_empty() {
        usage();
    }
    let mut port = 18080u16;
    let mut path = "/health/ready".to_owned();
    let mut interval = 2u64;
    let mut timeout = 20u64;
    let mut hold = 0u64;
    let mut i = 0;
    while i < opts.len() {
        let v = opts.get(i + 1).cloned().unwrap_or_else(|| usage());
        match opts[i].as_str() {
            "--port" => port = v.parse().unwrap_or_else(|_| usage()),
            "--path" => path = v,
            "--interval-ms" => interval = v.parse().unwrap_or_else(|_| usage()),
            "--timeout-s" => timeout = v.parse().unwrap_or_else(|_| usage()),
            "--hold-s" => hold = v.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
        i += 2;
    }
    let request = format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n");
    let started = Instant::now();
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("cannot start {}: {e}", cmd[0]);
            std::process::exit(1)
        });
    let pid = child.id();
    let mut ready_ms: Option<f64> = None;
    let mut polls = 0u64;
    while started.elapsed() < Duration::from_secs(timeout) {
        polls += 1;
        if probe(port, &request) {
            ready_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            eprintln!("the command exited before ready: {status}");
            break;
        }
        std::thread::sleep(Duration::from_millis(interval));
    }
    let mut rss = String::new();
    if ready_ms.is_some() && hold > 0 {
        let before = cpu_ticks(pid);
        std::thread::sleep(Duration::from_secs(hold));
        let after = cpu_ticks(pid);
        rss = format!("{} idle_cpu_ticks={}", status_memory(pid), after.saturating_sub(before));
    }
    let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
    let stop_started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            _ if stop_started.elapsed() > Duration::from_secs(10) => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    match ready_ms {
        Some(ms) => {
            println!(
                "ready_ms={ms:.1} polls={polls} stop_ms={:.1}{}{}",
                stop_started.elapsed().as_secs_f64() * 1000.0,
                if rss.is_empty() { "" } else { " " },
                rss
            );
        }
        None => {
            println!("ready_ms=NA polls={polls}");
            std::process::exit(1);
        }
    }
}

fn probe(port: u16, request: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    let mut got = 0;
    while got < head.len() {
        match stream.read(&mut head[got..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got += n,
        }
    }
    &head[9..12] == b"200"
}

fn status_memory(pid: u32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("VmRSS:") || l.starts_with("VmHWM:"))
        .map(|l| {
            let mut parts = l.split_whitespace();
            let name = parts.next().unwrap_or("").trim_end_matches(':');
            format!("{name}_kB={}", parts.next().unwrap_or("NA"))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// utime + stime of `pid` in clock ticks (usually 1/100 s).
fn cpu_ticks(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces: the fields start after the last ')'.
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime field 15.
    let get = |i: usize| fields.get(i - 3).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(14) + get(15)
}

fn usage() -> ! {
    eprintln!(
        "usage: qb-bench-startup --port P [--path /health/ready] [--interval-ms 2] [--timeout-s 20] [--hold-s 0] -- COMMAND [ARG ...]"
    );
    std::process::exit(2)
}
