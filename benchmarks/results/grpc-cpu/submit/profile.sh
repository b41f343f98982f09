# py-spy from PyPI, outside the project: python3 -m venv /tmp/tools && /tmp/tools/bin/pip install py-spy
# usage: bash profile.sh [--run-journal] OUT.txt   (run from the repository root, .venv active)
# start the bench, attach py-spy to the lemon serve process during the loaded phase
if [ "$1" = --run-journal ]; then journal=$1; out=$2; else journal=; out=$1; fi
lemon bench grpc --json --no-ghz --rpc submit $journal --per-client 150 --out /tmp/s2.json >/dev/null 2>/tmp/err2.txt &
B=$!
for i in $(seq 1 100); do P=$(pgrep -f "lemon serve --port" | head -1); [ -n "$P" ] && break; sleep 0.2; done
sleep 6
timeout 12 /tmp/tools/bin/py-spy record -p $P -o $out -f raw -d 8 -r 200 --nonblocking >/dev/null 2>&1
wait $B
