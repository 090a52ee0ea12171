# Sourced by the install scripts. sync_venv VENV REQUIREMENTS LABEL creates the virtual environment
# VENV if missing and installs REQUIREMENTS into it from PyPI; a stamp holding the requirements'
# checksum skips the install when nothing changed, so the scripts stay idempotent and fast.
sync_venv() {
  local venv="$1" requirements="$2" label="$3"
  local stamp="$venv/.requirements.sha256" wanted
  wanted="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    echo "$label: installing Python packages into $(basename "$venv")"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -r "$requirements"
    echo "$wanted" > "$stamp"
  else
    echo "$label: $(basename "$venv") up to date"
  fi
}
