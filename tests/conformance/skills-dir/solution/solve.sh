#!/bin/bash
# The oracle finds the skills where the run time says they are, as an agent would.
set -eu
codename=$(cat "$TBSCALE_SKILLS_DIR/release-notes/codename.txt")
printf '# Release %s\n' "$codename" > /app/RELEASE.md
