# Sourced by the hack/*.sh wrappers (needs ROOT, the checkout): sets PY, the Python that runs
# hack.localbox: $PYTHON when set, else the checkout's .venv, else python3 on PATH.
if [[ -n "${PYTHON:-}" ]]; then PY="$PYTHON"
elif [[ -x "$ROOT/.venv/bin/python" ]]; then PY="$ROOT/.venv/bin/python"
else PY=python3; fi
