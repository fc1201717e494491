#!/usr/bin/env bash
# Audit the installed Python dependencies for known vulnerabilities with pip-audit, and print a report.
#   scripts/audit.sh            report only: exits 0 whatever it finds, and when the advisory service is unreachable
#   scripts/audit.sh --strict   exits 1 when a known vulnerability is found
# The report also goes to test-artifacts/pip-audit.json. Packages the service cannot look up are listed as
# "not audited", never counted as clean.
set -uo pipefail
cd "$(dirname "$0")/.."
STRICT=0
[ "${1:-}" = "--strict" ] && STRICT=1
PY="${VENV:-.venv}/bin/python"
[ -x "$PY" ] || PY="$(command -v python3)"
mkdir -p test-artifacts
REPORT=test-artifacts/pip-audit.json

if ! "$PY" -m pip_audit --version >/dev/null 2>&1; then
  if ! "$PY" -m pip install -q "pip-audit>=2.7" >/dev/null 2>&1; then
    echo "audit: pip-audit could not be installed (no package index reachable): dependencies NOT audited"
    exit 0
  fi
fi

rm -f "$REPORT"
"$PY" -m pip_audit --progress-spinner off --skip-editable --format json --output "$REPORT" \
  2> test-artifacts/pip-audit.stderr
STATUS=$?

"$PY" - "$REPORT" "$STATUS" "$STRICT" test-artifacts/pip-audit.stderr <<'PYEOF'
import json
import sys
from pathlib import Path

report, status, strict, stderr = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", Path(sys.argv[4])
if not report.is_file() or not report.read_text().strip():
    tail = stderr.read_text(errors="replace").strip().splitlines()[-1:] if stderr.is_file() else []
    print(f"audit: pip-audit gave no report (exit {status}): the advisory service is probably unreachable; "
          f"dependencies NOT audited. {' '.join(tail)}")
    sys.exit(0)
data = json.loads(report.read_text())
deps = data.get("dependencies", [])
skipped = [d for d in deps if d.get("skip_reason")]
audited = [d for d in deps if not d.get("skip_reason")]
vulnerable = [d for d in audited if d.get("vulns")]
print(f"audit: {len(deps)} installed packages; {len(audited)} audited, {len(skipped)} not audited, "
      f"{len(vulnerable)} with known vulnerabilities")
for d in vulnerable:
    for v in d["vulns"]:
        fixes = ", ".join(v.get("fix_versions") or []) or "no fix yet"
        print(f"  VULNERABLE {d['name']} {d['version']}: {v['id']} (fixed in: {fixes})")
if skipped:
    reasons = {}
    for d in skipped:
        reasons.setdefault(d["skip_reason"].split(":")[0], []).append(d["name"])
    for reason, names in reasons.items():
        print(f"  not audited ({reason}): {len(names)} packages, e.g. {', '.join(sorted(names)[:5])}")
    if not audited:
        print("audit: nothing could be looked up: the vulnerability service is unreachable from here")
sys.exit(1 if strict and vulnerable else 0)
PYEOF
