#!/usr/bin/env bash
# Writes bin/startup-symbols.txt, the order in which the linker lays out functions at the front of the
# code (bin/build.rs), recorded with valgrind's callgrind on QB_BIN:
#   1. the functions `queuebox serve` runs from its start through HOLD idle seconds (default 5), in
#      the order the binary had them: packed together, an idle process maps a small part of the text
#      instead of pages spread over all of it;
#   2. after them, the further functions a drain of DRAIN_ROWS rows (default 10,000, half over 1,000
#      keys, half without a key) to a local receiver runs, hottest first: the delivery path's code
#      sits on few pages instead of many.
#
# Symbol names carry hashes that change with the code and the compiler, so regenerate the list after
# larger changes (a stale list is skipped name by name; it never breaks a build):
#   QUEUEBOX_KEEP_SYMBOLS=1 CARGO_TARGET_DIR=/var/cache/qb-fat-target cargo build --release -p queuebox
#   QB_BIN=/var/cache/qb-fat-target/release/queuebox bench/startup-symbols.sh
# then rebuild without QUEUEBOX_KEEP_SYMBOLS and check with bench/run-idle-memory.sh. MATCH=1 only
# reports how many listed names QB_BIN (unstripped) still has.
source "$(dirname "$0")/lib.sh"
HOLD=${HOLD:-5}
DRAIN_ROWS=${DRAIN_ROWS:-10000}
LIST=$REPO_DIR/bin/startup-symbols.txt
command -v nm >/dev/null || die "needs nm (binutils)"
nm --defined-only "$QB_BIN" >"$WORK/nm.txt" 2>/dev/null && [ -s "$WORK/nm.txt" ] ||
  die "$QB_BIN has no symbol table: build it with QUEUEBOX_KEEP_SYMBOLS=1 (see above)"

if [ "${MATCH:-0}" = 1 ]; then
  grep -v '^#' "$LIST" | sort -u >"$WORK/listed.txt"
  awk '{print $3}' "$WORK/nm.txt" | sort -u >"$WORK/names.txt"
  echo "startup-symbols listed=$(wc -l <"$WORK/listed.txt") in_binary=$(comm -12 "$WORK/listed.txt" "$WORK/names.txt" | wc -l)"
  exit 0
fi

command -v valgrind >/dev/null || die "needs valgrind (apt-get install valgrind)"
need_bins
db=qb_bench_symbols_$$
new_db "$db"; migrate "$db"
cfg=$WORK/symbols.yml; write_config "$db" "$cfg"
start_receiver
valgrind --tool=callgrind --demangle=no --callgrind-out-file="$WORK/callgrind.%p" \
  "$QB_BIN" --config "$cfg" serve >"$WORK/serve.log" 2>&1 &
pid=$!; _PIDS+=("$pid")
deadline=$((SECONDS + 120))
until curl -sf "http://127.0.0.1:$QB_PORT/health/ready" >/dev/null; do
  [ $SECONDS -lt $deadline ] || { cat "$WORK/serve.log" >&2; die "not ready under valgrind in 120 s"; }
  kill -0 "$pid" 2>/dev/null || { cat "$WORK/serve.log" >&2; die "queuebox exited under valgrind"; }
  sleep 0.2
done
sleep "$HOLD"

# Each dump holds what ran since the one before: start and idle first, then the drain. Both are
# taken while the service runs, so shutdown code stays out of the list.
dump_callgrind() {
  local n=$1 deadline=$((SECONDS + 60))
  callgrind_control --dump "$pid" >/dev/null 2>&1
  until [ -s "$WORK/callgrind.$pid.$n" ]; do
    [ $SECONDS -lt $deadline ] || die "callgrind wrote no dump $n in 60 s"
    sleep 0.2
  done
}
dump_callgrind 1
sql "$db" "INSERT INTO outbox (topic, key, payload)
           SELECT 'order.created', CASE WHEN g % 2 = 0 THEN 'key-' || (g % 1000) END, jsonb_build_object('g', g)
             FROM generate_series(1, $DRAIN_ROWS) g"
deadline=$((SECONDS + 600))
until [ "$(recv /stats | field count)" -ge "$DRAIN_ROWS" ]; do
  [ $SECONDS -lt $deadline ] || die "the drain under valgrind did not finish in 600 s"
  sleep 0.5
done
dump_callgrind 2

python3 - "$WORK/callgrind.$pid.1" "$WORK/callgrind.$pid.2" "$QB_BIN" "$WORK/nm.txt" "$LIST" <<'EOF'
import re, sys
idle_dump, drain_dump, binary, nm_file, out_file = sys.argv[1:]

def own_costs(dump):
    """Instructions each function of the binary ran itself, its callees' left out."""
    # Callgrind names an object or function in full once and by its number after that; the cost
    # line after `calls=` is the callee's inclusive cost, not the caller's own.
    objects, functions, own = {}, {}, {}
    current_object, current, skip_next = None, None, False
    for line in open(dump, errors="replace"):
        line = line.rstrip("\n")
        m = re.match(r"^(c?ob|c?fn)=\((\d+)\)(?: (.*))?$", line)
        if m:
            kind, number, name = m.groups()
            table = objects if kind.endswith("ob") else functions
            if name:
                table[number] = name
            if kind == "ob":
                current_object = objects[number]
            elif kind == "fn":
                current = None
                if current_object == binary:
                    current = re.sub(r"'\d+$", "", functions[number])  # 'N marks recursion
                    own.setdefault(current, 0)
            continue
        if line.startswith("calls="):
            skip_next = True
        elif current and line and line[0] in "0123456789+-*":
            if skip_next:
                skip_next = False
            else:
                fields = line.split()  # position, then the instruction count (absent: none)
                own[current] += int(fields[1]) if len(fields) > 1 else 0
    return own

address = {}
for line in open(nm_file):
    parts = line.split()
    if len(parts) == 3 and parts[1] in "tTwW":
        address[parts[2]] = int(parts[0], 16)
idle = own_costs(idle_dump)
drain = own_costs(drain_dump)
startup = sorted((address[name], name) for name in idle if name in address)
delivery = sorted((-cost, name) for name, cost in drain.items()
                  if name in address and name not in idle and cost > 0)
with open(out_file, "w") as f:
    f.write("# The order in which the linker lays out functions at the front of the code (bin/build.rs):\n")
    f.write("# first what `queuebox serve` runs from start through its first idle seconds, then what a\n")
    f.write("# drain adds, hottest first. Written by bench/startup-symbols.sh; a name this build lacks is\n")
    f.write("# skipped, so a stale list costs memory, never a build.\n")
    for _, name in startup + delivery:
        f.write(name + "\n")
print(f"startup-symbols startup={len(startup)} drain_only={len(delivery)} file={out_file}")
EOF
